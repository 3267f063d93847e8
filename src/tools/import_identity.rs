//! `import_identity`: seat an identity bundle (`export_identity`) in a
//! slot; the slot's own identity is retired (kept), nothing else changes
//! when the bundle does not open.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Description, Role, Spec, input_schema, parse, result_schema};
use crate::error::{Error, ErrorKind, Result};
use crate::pool::Pool;

pub const SPEC: Spec = Spec {
    name: "import_identity",
    role: Role::Admin,
    title: "Import an identity bundle into a slot",
    description: Description::Fixed(
        "Open an encrypted identity bundle (`bundle`, base64, from `export_identity` or \
         `idpool identity export`) with `passphrase` and make slot `slot` that identity: the \
         same proxy session, cookies, localStorage, login and site states, and calibration \
         when the slot runs the same browser. The slot's own identity is retired (kept under \
         its `retired/` folder). A wrong passphrase, a changed or cut bundle or another \
         format version is refused and the slot is left as it was.",
    ),
    input: input_schema::<Args>,
    strategy_enum: false,
    output: || {
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
    },
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    },
    progress: false,
    budget: crate::tools::Budget::Items,
    also_runs: None,
    route: None,
    run: |pool, args, _| crate::tools::plain(run(pool, args)),
};

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

pub async fn run(pool: &Pool, args: Value) -> Result<Value> {
    let a: Args = parse("import_identity", args)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(a.bundle.trim())
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("`bundle` is not base64 ({e})"),
            )
        })?;
    let out = pool
        .services()
        .bundles
        .import(a.slot, bytes, &a.passphrase)
        .await?;
    Ok(serde_json::to_value(&out).unwrap_or_else(|_| json!({})))
}
