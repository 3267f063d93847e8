//! `retire_slot`: give a slot a fresh identity (new jar, Chromium profile and
//! proxy session; recalibrated at its next launch). It keeps its number.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::lease::Leases;
use std::sync::Arc;

pub const SPEC: Spec = Spec::new(
    "retire_slot",
    Role::Admin,
    "Retire a slot's identity",
    "Give a slot a fresh identity: its browser is closed, its cookie jar, Chromium \
         profile and calibration are moved aside (kept for pool.retire.retired_keep \
         generations), it gets a new proxy session (`{session}` in its proxy URL, so a \
         new IP with providers' sticky sessions), its breakers close, and it recalibrates \
         at its next browser launch. The slot keeps its number.",
    Run::Leases(|leases, args, _| crate::tools::plain(run(leases, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slot": {"type": "integer"}, "reason": {"type": "string"},
            "old_generation": {"type": "integer"}, "generation": {"type": "integer"},
            "session": {"type": "string"}, "retired_to": {"type": "string"},
        }),
        &["slot", "generation", "session"],
    )
})
.annotations(Annotations::CHANGES_POOL.destructive().not_idempotent());

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The slot.
    slot: usize,
}

pub async fn run(leases: &Arc<Leases>, args: Value) -> Result<Value> {
    let a: Args = parse("retire_slot", args)?;
    leases.identities().check(a.slot)?;
    let r = leases.retire(a.slot, "manual").await?;
    Ok(json!(r))
}
