//! `calibrate`: run a slot's calibration now (its browser launches if
//! needed) and return both sides: what the browser sent, what the calibrated
//! HTTP tier sent, and the residual.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Description, result_schema, Annotations, Role, Spec, input_schema, invalid, parse};
use crate::error::Result;
use crate::pool::Pool;

pub const SPEC: Spec = Spec {
    name: "calibrate",
    role: Role::Admin,
    title: "Calibrate slots",
    description: Description::Fixed(
        "Calibrate slots' HTTP tier against their own Chromium now (it launches if needed): \
         both visit the daemon's loopback calibration listener; the HTTP tier takes the \
         browser's header sets, HTTP/2 priority and TLS options. Returns both sides \
         (ClientHello with JA4, HTTP/2 fingerprint, header lists) and the residual \
         differences by name. Slots also calibrate by themselves at their browser's first \
         launch and when Chromium's version changes.",
    ),
    input: input_schema::<Args>,
    strategy_enum: false,
    output: || {
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
    },
    annotations: Annotations {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
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
    /// Only this slot; default every slot.
    slot: Option<usize>,
}

pub async fn run(pool: &Pool, args: Value) -> Result<Value> {
    let bad = invalid;
    let a: Args = parse("calibrate", args)?;
    let ids: Vec<usize> = match a.slot {
        Some(n) if pool.slot(n).is_none() => {
            return Err(bad(format!(
                "slot {n} does not exist (the pool has {} slots)",
                pool.slots().len()
            )));
        }
        Some(n) => vec![n],
        None => (0..pool.slots().len()).collect(),
    };
    let mut out = Vec::new();
    for id in ids {
        let Some(slot) = pool.slot(id) else { continue };
        out.push(match slot.calibrate_now().await {
            Ok(r) => json!({"slot": id, "ok": true, "record": r, "error": null}),
            Err(e) => json!({"slot": id, "ok": false, "record": null, "error": e.to_string()}),
        });
    }
    Ok(json!({ "slots": out }))
}
