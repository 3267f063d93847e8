//! `extract`: run any operation of any strategy with its parameters.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use super::{Output, Provenance};
use crate::error::Result;
use crate::lease::Leases;
use crate::lease::cascade::{self, RunOptions};
use std::sync::Arc;

use crate::strategy::Strategy;
use crate::strategy::web::{self, answer::Trust};

pub const SPEC: Spec = Spec::new(
    "extract",
    Role::Operator,
    "Run a strategy operation",
    "Run any operation of a strategy (see list_strategies for operations and their \
         parameters) and return its items with provenance. The generic strategy `web` reads \
         any shop's page: `product` or `reviews` with `params: {url}`; its answers say their \
         `source` (json-ld, microdata, rdfa or page) and a product's `disagreements` with \
         the visible page (`params.trust`: `structured` or `page` decides whose value wins).",
    Run::Leases(|leases, args, opts| Box::pin(run(leases, args, opts.clone()))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "strategy": {"type": "string"}, "operation": {"type": "string"},
            "items": {"type": "array", "items": {"type": "object"}},
            "slot": {"type": "integer"}, "tier": {"type": "integer"},
            "attempts": super::attempts_schema(),
            "requests": {"type": "integer", "description": "Requests sent to the site."},
            "masked": {"type": "array", "items": {"type": "string"}, "description": "Fields masked as personal data (pii = true) for a caller below security.pii_role."},
            "warnings": {"type": "array", "items": {"type": "string"}, "description": "Fields or the operation drifting (often empty against their own history: the site's markup may have changed), and the operation's expect rules that did not hold."},
            "fallback": {"type": "object", "description": "Present when the operation needs a signed-in identity, none was, and its fallback_operation ran instead.", "properties": {
                "operation": {"type": "string"}, "instead_of": {"type": "string"}, "reason": {"type": "string"}}},
        }),
        &["strategy", "operation", "items", "slot", "tier"],
    )
})
.annotations(Annotations::READS_SITES)
.strategy_enum()
.progress()
.route(route);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The strategy (`web`: the generic one, for any shop's page).
    strategy: String,
    /// One of its operations.
    operation: String,
    /// The operation's parameters.
    #[serde(default)]
    params: Map<String, Value>,
    /// Use only this slot (identity).
    slot: Option<usize>,
    /// Stay on the slot of this MCP session's last call for the strategy
    /// while the site admits it; `false`: round-robin.
    #[serde(default = "super::spec::yes")]
    sticky: bool,
}

/// The operation's strategy on the marketplace its `params` name.
fn route(leases: &Leases, args: &Value) -> Option<super::Route> {
    let strategy = pick(leases, args["strategy"].as_str()?, &args["params"]).ok()?;
    Some(super::spec::route_to(
        strategy.as_ref(),
        args["operation"].as_str()?,
    ))
}

/// The strategy `name` means: a registered one on the marketplace `params`
/// names, or the generic one on the host of `params.url`.
fn pick(leases: &Leases, name: &str, params: &Value) -> Result<Arc<dyn Strategy>> {
    if name != web::NAME {
        let market = params["marketplace"].as_str();
        return leases.registry().pick(name, market, None).map_err(invalid);
    }
    // A `trust` the operation does not know is refused by its parameter
    // check, before any request.
    let trust = (params["trust"].as_str())
        .and_then(Trust::parse)
        .unwrap_or_default();
    leases.generic_for(params[web::URL_PARAM].as_str().unwrap_or_default(), trust)
}

/// Arguments: `strategy`, `operation`, `params` (object), optional `slot`.
pub async fn run(leases: &Arc<Leases>, args: Value, opts: RunOptions) -> Result<Output> {
    let Args {
        strategy: name,
        operation: op_name,
        params,
        slot,
        sticky,
    } = parse("extract", args)?;
    let strategy = pick(leases, &name, &Value::Object(params.clone()))?;
    let op = strategy.operations().get(&op_name).ok_or_else(|| {
        invalid(format!(
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
        rotate: !sticky,
        ..opts
    };
    let r = cascade::run(
        &mut crate::lease::Call::new(leases, None, opts.scope.clone()),
        &strategy,
        op,
        &bound,
        &opts,
    )
    .await?;
    let by = Provenance::of(&r);
    let mut out = json!({
        "strategy": strategy.family(),
        "operation": op_name,
        "has_more": r.extracted.has_more,
        "slot": r.slot,
        "tier": r.tier,
        "trial": r.trial,
        "requests": r.requests,
        "attempts": r.attempts,
    });
    if let Some(m) = strategy.marketplace() {
        out["marketplace"] = json!(m);
    }
    if let Some(f) = &r.fallback {
        out["fallback"] = json!(f);
    }
    if !r.warnings.is_empty() {
        out["warnings"] = json!(r.warnings);
    }
    if !r.masked.is_empty() {
        out["masked"] = json!(r.masked);
    }
    // Moved into place: `json!` would copy every item through serde.
    out["items"] = Value::Array(r.extracted.items.into_iter().map(Value::Object).collect());
    Ok(Output::served(out, by))
}
