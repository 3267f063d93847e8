//! `retire_slot`: give a slot a fresh identity (new jar, Chromium profile and
//! proxy session; recalibrated at its next launch). It keeps its number.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Description, result_schema, Annotations, Role, Spec, input_schema, invalid, parse};
use crate::error::Result;
use crate::pool::Pool;

pub const SPEC: Spec = Spec {
    name: "retire_slot",
    role: Role::Admin,
    title: "Retire a slot's identity",
    description: Description::Fixed(
        "Give a slot a fresh identity: its browser is closed, its cookie jar, Chromium \
         profile and calibration are moved aside (kept for pool.retire.retired_keep \
         generations), it gets a new proxy session (`{session}` in its proxy URL, so a \
         new IP with providers' sticky sessions), its breakers close, and it recalibrates \
         at its next browser launch. The slot keeps its number.",
    ),
    input: input_schema::<Args>,
    strategy_enum: false,
    output: || {
        result_schema(
            json!({
                "slot": {"type": "integer"}, "reason": {"type": "string"},
                "old_generation": {"type": "integer"}, "generation": {"type": "integer"},
                "session": {"type": "string"}, "retired_to": {"type": "string"},
            }),
            &["slot", "generation", "session"],
        )
    },
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
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
    /// The slot.
    slot: usize,
}

pub async fn run(pool: &Pool, args: Value) -> Result<Value> {
    let a: Args = parse("retire_slot", args)?;
    if pool.slot(a.slot).is_none() {
        return Err(invalid(format!(
            "slot {} does not exist (the pool has {} slots)",
            a.slot,
            pool.slots().len()
        )));
    }
    let r = pool.leases().retire(a.slot, "manual").await?;
    Ok(json!(r))
}
