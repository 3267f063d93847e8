//! `export_identity`: a slot's whole identity as one encrypted bundle
//! (`crate::services::bundles`), base64 in the result.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::services::Bundles;

pub const SPEC: Spec = Spec::new(
    "export_identity",
    Role::Admin,
    "Export an identity as an encrypted bundle",
    "A slot's whole identity as one encrypted file: its proxy session, profile and \
         calibration, cookies and localStorage, login state and site state (breakers, holds) \
         per strategy, and the proxy it goes through (credentials only with `with_secrets`). \
         Sealed with `passphrase` (Argon2id, XChaCha20-Poly1305); `bundle` is the file, \
         base64. `import_identity` (or `idpool identity import`) seats it in a slot of this \
         or another daemon.",
    Run::Bundles(|bundles, args| crate::tools::plain(run(bundles, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slot": {"type": "integer"}, "bundle": {"type": "string", "description": "The encrypted bundle, base64."},
            "size": {"type": "integer"}, "cookies": {"type": "integer"}, "origins": {"type": "integer"},
            "strategies": {"type": "array", "items": {"type": "string"}},
            "proxy_secrets": {"type": "boolean"},
        }),
        &["slot", "bundle", "size"],
    )
})
.annotations(Annotations::READS_POOL.not_idempotent());

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The slot.
    slot: usize,
    /// At least 8 characters; the bundle opens only with it.
    passphrase: String,
    /// Put the proxy's credentials in the bundle too (default: redacted).
    #[serde(default)]
    with_secrets: bool,
}

pub async fn run(bundles: &Bundles, args: Value) -> Result<Value> {
    let a: Args = parse("export_identity", args)?;
    let out = bundles
        .export(a.slot, &a.passphrase, a.with_secrets)
        .await?;
    let mut v = serde_json::to_value(&out).unwrap_or_else(|_| json!({}));
    v["bundle"] = json!(base64::engine::general_purpose::STANDARD.encode(&out.bytes));
    Ok(v)
}
