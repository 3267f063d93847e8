//! `calibrate`: run a slot's calibration now (its browser launches if
//! needed) and return both sides: what the browser sent, what the calibrated
//! HTTP tier sent, and the residual.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::lease::Leases;
use std::sync::Arc;

pub const SPEC: Spec = Spec::new(
    "calibrate",
    Role::Admin,
    "Calibrate slots",
    "Calibrate slots' HTTP tier against their own Chromium now (it launches if needed): \
         both visit the daemon's loopback calibration listener; the HTTP tier takes the \
         browser's header sets, HTTP/2 priority and TLS options. Returns both sides \
         (ClientHello with JA4, HTTP/2 fingerprint, header lists) and the residual \
         differences by name. Slots also calibrate by themselves at their browser's first \
         launch and when Chromium's version changes.",
    Run::Leases(|leases, args, _| crate::tools::plain(run(leases, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slots": {"type": "array", "items": {"type": "object", "properties": {
                "slot": {"type": "integer"}, "ok": {"type": "boolean"},
                "record": {"type": ["object", "null"]},
                "error": {"type": ["string", "null"]},
            }}},
        }),
        &["slots"],
    )
})
.annotations(Annotations::CHANGES_POOL);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Only this slot; default every slot.
    slot: Option<usize>,
}

pub async fn run(leases: &Arc<Leases>, args: Value) -> Result<Value> {
    let a: Args = parse("calibrate", args)?;
    let identities = leases.identities();
    let mut out = Vec::new();
    for id in identities.chosen(a.slot)? {
        out.push(match identities.calibrate(id).await {
            Ok(r) => json!({"slot": id, "ok": true, "record": r, "error": null}),
            Err(e) => json!({"slot": id, "ok": false, "record": null, "error": e.to_string()}),
        });
    }
    Ok(json!({ "slots": out }))
}
