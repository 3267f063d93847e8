//! `import_session`: merge a session file (cookies.txt, Cookie-Editor JSON
//! or Playwright storageState) into a slot's jar and browser.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::request::SessionFormat as Format;
use crate::services::SessionFiles;

pub const SPEC: Spec = Spec::new(
    "import_session",
    Role::Admin,
    "Import a session into a slot",
    "Merge a session file into a slot: its cookies go into the slot's jar (saved at \
         once) and its running browser; a Playwright storageState's `origins[].localStorage` \
         goes into the slot's Chromium profile. `session` is the file's text: Netscape \
         cookies.txt, the JSON array of Cookie-Editor / EditThisCookie, or a storageState \
         (`format` auto-detects). A bad file is refused with the line or entry named and \
         changes nothing. The jar judges each cookie as a browser would: one whose domain \
         is a public suffix (`com`, `co.uk`, `github.io`, `test`), or with a `__Host-` / \
         `__Secure-` name it does not live up to, is refused on its own and listed in \
         `refused` (its position among the file's cookies, name, domain and reason); the \
         rest of the file is imported. Reports the cookies taken per domain.",
    Run::SessionFiles(|files, args| crate::tools::plain(run(files, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slot": {"type": "integer"}, "format": {"type": "string"},
            "cookies": {"type": "integer"}, "rejected": {"type": "integer"},
            "refused": {"type": "array", "items": {"type": "object", "properties": {
                "entry": {"type": "integer"}, "name": {"type": "string"},
                "domain": {"type": "string"}, "reason": {"type": "string"}}}},
            "domains": {"type": "object"}, "local_storage": {"type": "object"},
            "browser": {"type": "boolean"},
        }),
        &["slot", "format", "cookies", "domains"],
    )
})
.annotations(Annotations::CHANGES_POOL);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The slot.
    slot: usize,
    /// The session file's text.
    session: String,
    /// `auto` (default), `netscape`, `json` or `storage-state`.
    #[serde(default)]
    format: Format,
}

pub async fn run(files: &SessionFiles, args: Value) -> Result<Value> {
    let a: Args = parse("import_session", args)?;
    let r = files.import_session(a.slot, &a.session, a.format).await?;
    Ok(json!(r))
}
