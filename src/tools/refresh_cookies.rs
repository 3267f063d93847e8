//! `refresh_cookies`: warm slots up in their browser for a strategy (visit its
//! warm-up URL, let any challenge pass) and persist the cookies.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Description, result_schema, Annotations, Role, Spec, input_schema, invalid, parse};
use crate::error::{Error, ErrorKind, Result};
use crate::pool::Pool;
use crate::lease::cascade::RunOptions;

pub const SPEC: Spec = Spec {
    name: "refresh_cookies",
    role: Role::Admin,
    title: "Refresh cookies",
    description: Description::Fixed(
        "Warm slots up for a strategy in their real browser (visit its warm-up URL, let a JS \
         challenge pass) and persist the cookies into the slots' jars. Captchas and login \
         walls are not solved; they are reported.",
    ),
    input: input_schema::<Args>,
    strategy_enum: true,
    output: || {
        result_schema(
            json!({
                "strategy": {"type": "string"}, "cookie_domain": {"type": "string"},
                "slots": {"type": "array", "items": {"type": "object", "properties": {
                    "slot": {"type": "integer"}, "ok": {"type": "boolean"},
                    "cookies_before": {"type": "integer"}, "cookies_after": {"type": "integer"},
                    "error": {"type": ["string", "null"]},
                }}},
            }),
            &["strategy", "slots"],
        )
    },
    annotations: Annotations {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: true,
    },
    progress: true,
    budget: crate::tools::Budget::Items,
    also_runs: None,
    route: None,
    run: |pool, args, opts| crate::tools::plain(run(pool, args, opts)),
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The strategy whose warm-up URL the slots visit.
    strategy: String,
    /// Only this slot; default every slot.
    slot: Option<usize>,
}

/// Arguments: `strategy`, and `slot` (default: every slot). Fails only when no
/// slot could be refreshed; per-slot errors are in the result.
pub async fn run(pool: &Pool, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: Args = parse("refresh_cookies", args)?;
    let strategy = pool
        .registry()
        .get(&a.strategy)
        .cloned()
        .ok_or_else(|| invalid(format!("unknown strategy `{}`", a.strategy)))?;
    let url = strategy
        .warmup_url()
        .cloned()
        .ok_or_else(|| invalid(format!("strategy `{}` has no warmup_url", a.strategy)))?;
    let slots: Vec<usize> = match a.slot.or(opts.slot) {
        Some(n) if n >= pool.slots().len() => {
            return Err(invalid(format!(
                "slot {n} does not exist (the pool has {} slots)",
                pool.slots().len()
            )));
        }
        Some(n) => vec![n],
        None => (0..pool.slots().len()).collect(),
    };
    let domain = strategy.cookie_domain().to_string();
    let mut results = Vec::new();
    let mut ok = 0;
    for n in slots {
        let jar = pool.slots()[n].jar().clone();
        let before = jar.export_for_domain(&domain).len();
        let r = pool.leases().refresh_cookies(n, strategy.name(), &url).await;
        let after = jar.export_for_domain(&domain).len();
        opts.report(|| {
            format!(
                "slot {n}: {domain} cookies {before} -> {after}: {}",
                r.as_ref()
                    .map(|_| "ok".to_string())
                    .unwrap_or_else(|e| e.to_string())
            )
        });
        ok += usize::from(r.is_ok());
        results.push(json!({
            "slot": n, "ok": r.is_ok(), "cookies_before": before, "cookies_after": after,
            "error": r.err().map(|e| e.to_string()),
        }));
    }
    if ok == 0 {
        let msgs: Vec<String> = results
            .iter()
            .map(|r| format!("slot {}: {}", r["slot"], r["error"].as_str().unwrap_or("")))
            .collect();
        return Err(Error::new(
            ErrorKind::Refused,
            format!("no slot could be refreshed: {}", msgs.join("; ")),
        )
        .retryable(false));
    }
    Ok(json!({ "strategy": strategy.name(), "cookie_domain": domain, "slots": results }))
}
