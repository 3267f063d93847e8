//! `reset_slot`: close a slot's breaker(s) and/or restart its browser.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::pool::Pool;

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    slot: usize,
    /// Close the breakers (default true).
    #[serde(default = "yes")]
    breakers: bool,
    /// Only this strategy's breaker.
    #[serde(default)]
    strategy: Option<String>,
    /// Close the browser; it relaunches on next use (default false).
    #[serde(default)]
    browser: bool,
}

pub async fn run(pool: &Pool, args: Value) -> Result<Value> {
    let bad = |m: String| Error::new(ErrorKind::InvalidArgument, m).retryable(false);
    let a: Args = serde_json::from_value(args)
        .map_err(|e| bad(format!("invalid reset_slot arguments: {e}")))?;
    let Some(slot) = pool.slot(a.slot) else {
        return Err(bad(format!(
            "slot {} does not exist (the pool has {} slots)",
            a.slot,
            pool.slots().len()
        )));
    };
    if let Some(s) = &a.strategy
        && pool.registry().get(s).is_none()
        && s != crate::pool::DIRECT
    {
        return Err(bad(format!("unknown strategy `{s}`")));
    }
    if a.breakers {
        pool.reset_breakers(a.slot, a.strategy.as_deref());
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
