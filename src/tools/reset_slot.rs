//! `reset_slot`: close a slot's breaker(s) and/or restart its browser.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use std::sync::Arc;

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use crate::error::Result;
use crate::lease::Leases;

pub const SPEC: Spec = Spec::new(
    "reset_slot",
    Role::Admin,
    "Reset a slot",
    "Close a slot's circuit breaker(s) and forget its tier blocks (`breakers`, default \
         true; `strategy` for one only), and/or close its browser (`browser`), which \
         relaunches on next use with the same profile and cookies.",
    Run::Leases(|leases, args, _| crate::tools::plain(run(leases, args))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "slot": {"type": "integer"}, "breakers_reset": {"type": "boolean"},
            "strategy": {"type": ["string", "null"]}, "browser_closed": {"type": "boolean"},
        }),
        &["slot", "breakers_reset", "browser_closed"],
    )
})
.annotations(Annotations::CHANGES_POOL.destructive());

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

pub async fn run(leases: &Arc<Leases>, args: Value) -> Result<Value> {
    let a: Args = parse("reset_slot", args)?;
    let identities = leases.identities();
    identities.check(a.slot)?;
    if let Some(s) = &a.strategy
        && !leases.knows_strategy(s)
    {
        return Err(invalid(format!("unknown strategy `{s}`")));
    }
    if a.breakers {
        leases.sites().reset_breakers(a.slot, a.strategy.as_deref());
    }
    let closed = a.browser && identities.close_browser(a.slot).await?;
    Ok(json!({
        "slot": a.slot,
        "breakers_reset": a.breakers,
        "strategy": a.strategy,
        "browser_closed": closed,
    }))
}
