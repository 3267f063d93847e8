//! `reset_slot`: close a slot's breaker(s) and/or restart its browser.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Description, result_schema, Annotations, Role, Spec, input_schema, invalid, parse};
use crate::error::Result;
use crate::pool::Pool;

pub const SPEC: Spec = Spec {
    name: "reset_slot",
    role: Role::Admin,
    title: "Reset a slot",
    description: Description::Fixed(
        "Close a slot's circuit breaker(s) and forget its tier blocks (`breakers`, default \
         true; `strategy` for one only), and/or close its browser (`browser`), which \
         relaunches on next use with the same profile and cookies.",
    ),
    input: input_schema::<Args>,
    strategy_enum: false,
    output: || {
        result_schema(
            json!({
                "slot": {"type": "integer"}, "breakers_reset": {"type": "boolean"},
                "strategy": {"type": ["string", "null"]}, "browser_closed": {"type": "boolean"},
            }),
            &["slot", "breakers_reset", "browser_closed"],
        )
    },
    annotations: Annotations {
        read_only: false,
        destructive: true,
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
    /// The slot.
    slot: usize,
    /// Close its breakers and forget its tier blocks (default true).
    #[serde(default = "super::spec::yes")]
    breakers: bool,
    /// Only this strategy's breaker.
    strategy: Option<String>,
    /// Close its browser (default false).
    #[serde(default)]
    browser: bool,
}

pub async fn run(pool: &Pool, args: Value) -> Result<Value> {
    let bad = invalid;
    let a: Args = parse("reset_slot", args)?;
    let Some(slot) = pool.slot(a.slot) else {
        return Err(bad(format!(
            "slot {} does not exist (the pool has {} slots)",
            a.slot,
            pool.slots().len()
        )));
    };
    if let Some(s) = &a.strategy
        && pool.registry().get(s).is_none()
        && !crate::pool::is_web_key(s)
    {
        return Err(bad(format!("unknown strategy `{s}`")));
    }
    if a.breakers {
        pool.leases().reset_breakers(a.slot, a.strategy.as_deref());
    }
    let was_running = slot.browser_facts().running;
    if a.browser {
        slot.browser().close().await;
    }
    Ok(json!({
        "slot": a.slot,
        "breakers_reset": a.breakers,
        "strategy": a.strategy,
        "browser_closed": a.browser && was_running,
    }))
}
