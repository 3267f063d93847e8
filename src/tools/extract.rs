//! `extract`: run any operation of any strategy with its parameters.

use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::pool::Pool;
use crate::tiers::{self, RunOptions};

/// Arguments: `strategy`, `operation`, `params` (object), optional `slot`.
pub async fn run(pool: &Pool, args: Value, opts: RunOptions) -> Result<Value> {
    let mut args = super::object(args)?;
    let name: String =
        super::take(&mut args, "strategy")?.ok_or_else(|| bad("missing argument `strategy`"))?;
    let op_name: String =
        super::take(&mut args, "operation")?.ok_or_else(|| bad("missing argument `operation`"))?;
    let params = super::object(args.remove("params").unwrap_or(Value::Null))?;
    let slot: Option<usize> = super::take(&mut args, "slot")?;
    if let Some(k) = args.keys().next() {
        return Err(bad(&format!(
            "unknown argument `{k}` (expected strategy, operation, params, slot)"
        )));
    }
    let strategy = pool
        .registry()
        .get(&name)
        .cloned()
        .ok_or_else(|| bad(&format!("unknown strategy `{name}`")))?;
    let op = strategy.operations().get(&op_name).ok_or_else(|| {
        bad(&format!(
            "strategy `{name}` has no operation `{op_name}` (it has: {})",
            strategy
                .operations()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let bound = op.bind(params)?;
    let opts = RunOptions {
        slot: slot.or(opts.slot),
        ..opts
    };
    let r = tiers::run(pool, &strategy, op, &bound, &opts).await?;
    let mut out = json!({
        "strategy": name,
        "operation": op_name,
        "has_more": r.extracted.has_more,
        "slot": r.slot,
        "tier": r.tier,
        "degraded": r.degraded,
        "attempts": r.attempts,
    });
    // Moved into place: `json!` would copy every item through serde.
    out["items"] = Value::Array(r.extracted.items.into_iter().map(Value::Object).collect());
    Ok(out)
}

fn bad(msg: &str) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg.to_string()).retryable(false)
}
