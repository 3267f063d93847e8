//! `import_identity`: seat an identity bundle (`export_identity`) in a
//! slot; the slot's own identity is retired (kept), nothing else changes
//! when the bundle does not open.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::{Error, ErrorKind, Result};
use crate::services::Bundles;

pub const SPEC: Spec = Spec::new(
    "import_identity",
    Role::Admin,
    "Import an identity bundle into a slot",
    "Open an encrypted identity bundle (`bundle`, base64, from `export_identity` or \
         `idpool identity export`) with `passphrase` and make slot `slot` that identity: the \
         same proxy session, cookies, localStorage, login and site states, and calibration \
         when the slot runs the same browser. The slot's own identity is retired (kept under \
         its `retired/` folder). A wrong passphrase, a changed or cut bundle or another \
         format version is refused and the slot is left as it was.",
    Run::Bundles(|bundles, args| crate::tools::plain(run(bundles, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slot": {"type": "integer"}, "from_slot": {"type": "integer"},
            "exported_at": {"type": "integer"}, "proxy_session": {"type": "string"},
            "previous_kept_in": {"type": "string"}, "cookies": {"type": "integer"},
            "local_storage": {"type": "object"}, "strategies": {"type": "array", "items": {"type": "string"}},
            "calibration_applied": {"type": "boolean"}, "login": {"type": "object"},
            "proxy_note": {"type": ["string", "null"]},
        }),
        &["slot", "cookies"],
    )
})
.annotations(Annotations::CHANGES_POOL.destructive().not_idempotent().open_world());

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The slot that becomes the identity.
    slot: usize,
    /// The bundle, base64.
    bundle: String,
    /// The passphrase it was sealed with.
    passphrase: String,
}

pub async fn run(bundles: &Bundles, args: Value) -> Result<Value> {
    let a: Args = parse("import_identity", args)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(a.bundle.trim())
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("`bundle` is not base64 ({e})"),
            )
        })?;
    let out = bundles.import(a.slot, bytes, &a.passphrase).await?;
    Ok(serde_json::to_value(&out).unwrap_or_else(|_| json!({})))
}
