//! `refresh_cookies`: warm slots up in their browser for a strategy (visit its
//! warm-up URL, let any challenge pass) and persist the cookies.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Leases;
use crate::lease::cascade::RunOptions;
use std::sync::Arc;

pub const SPEC: Spec = Spec::new(
    "refresh_cookies",
    Role::Admin,
    "Refresh cookies",
    "Warm slots up for a strategy in their real browser (visit its warm-up URL, let a JS \
         challenge pass) and persist the cookies into the slots' jars. Captchas and login \
         walls are not solved; they are reported.",
    Run::Leases(|leases, args, opts| crate::tools::plain(run(leases, args, opts))),
)
.input(input_schema::<Args>)
.output(|| {
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
})
.annotations(Annotations::CHANGES_POOL.open_world())
.strategy_enum()
.progress();

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
pub async fn run(leases: &Arc<Leases>, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: Args = parse("refresh_cookies", args)?;
    let strategy = leases
        .registry()
        .get(&a.strategy)
        .cloned()
        .ok_or_else(|| invalid(format!("unknown strategy `{}`", a.strategy)))?;
    let url = strategy
        .warmup_url()
        .cloned()
        .ok_or_else(|| invalid(format!("strategy `{}` has no warmup_url", a.strategy)))?;
    let identities = leases.identities();
    let slots = identities.chosen(a.slot.or(opts.slot))?;
    let domain = strategy.cookie_domain().to_string();
    let mut results = Vec::new();
    let mut ok = 0;
    for n in slots {
        let before = identities.cookies_for(n, &domain);
        let r = leases.refresh_cookies(n, strategy.name(), &url).await;
        let after = identities.cookies_for(n, &domain);
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
