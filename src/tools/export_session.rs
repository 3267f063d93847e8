//! `export_session`: a slot's session as a file (storageState, cookies.txt
//! or Cookie-Editor JSON).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::request::SessionFormat as Format;
use crate::services::SessionFiles;

pub const SPEC: Spec = Spec::new(
    "export_session",
    Role::Admin,
    "Export a slot's session",
    "A slot's cookies (and, as a Playwright storageState, the localStorage its imports \
         wrote, read back from its Chromium) as a session file: `format` `storage-state` \
         (default), `netscape` (cookies.txt) or `json` (Cookie-Editor). `domain` keeps only \
         that domain and its subdomains. The text signs in as this identity: keep it private.",
    Run::SessionFiles(|files, args| crate::tools::plain(run(files, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slot": {"type": "integer"}, "format": {"type": "string"},
            "session": {"type": "string"},
        }),
        &["slot", "format", "session"],
    )
})
.annotations(Annotations::READS_POOL);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The slot.
    slot: usize,
    /// `storage-state` (default), `netscape` or `json`.
    #[serde(default)]
    format: Option<Format>,
    /// Only this domain and its subdomains.
    #[serde(default)]
    domain: Option<String>,
}

pub async fn run(files: &SessionFiles, args: Value) -> Result<Value> {
    let a: Args = parse("export_session", args)?;
    let format = match a.format {
        None | Some(Format::Auto) => Format::StorageState,
        Some(f) => f,
    };
    let text = files
        .export_session(a.slot, format, a.domain.as_deref())
        .await?;
    Ok(json!({"slot": a.slot, "format": format.as_str(), "session": text}))
}
