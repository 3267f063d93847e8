//! `list_strategies`: strategies, their hosts, operations and parameters.

use serde_json::{Value, json};

use super::spec::{NoArgs, Role, Run, Spec, parse, result_schema};
use std::collections::BTreeMap;

use crate::strategy::Registry;
use crate::strategy::operation::Operation;
use crate::strategy::web;

pub const SPEC: Spec = Spec::new(
    "list_strategies",
    Role::Viewer,
    "List strategies",
    "The site strategies this pool knows: hosts, operations, and each operation's tiers \
         and parameters (JSON Schema).",
    Run::Leases(|leases, args, _| {
        crate::tools::plain(async move {
            parse::<NoArgs>("list_strategies", args)?;
            Ok(run(&leases.registry()))
        })
    }),
)
.output(|| {
    result_schema(
        json!({"strategies": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "hosts": {"type": "array", "items": {"type": "string"}},
            "builtin": {"type": "boolean", "description": "The generic strategy `web`, for any host (`*`) no strategy covers."},
            "operations": {"type": "object"},
            "marketplaces": {"type": "array", "items": {"type": "object"}, "description": "The storefronts one strategy serves (amazon.com, amazon.de, ...), each with its own hosts, base URL, cookies and site state; pick one with an operation's `marketplace` parameter."},
        }}}}),
        &["strategies"],
    )
});

pub fn run(registry: &Registry) -> Value {
    let strategies: Vec<Value> = registry
        .iter()
        .map(|s| {
            let ops = operations(s.operations());
            let mut out = json!({"name": s.name(), "hosts": s.hosts(), "operations": ops});
            if !s.marketplaces().is_empty() {
                // Each marketplace: its hosts and base URL (`marketplace` in
                // the operations' parameters picks one).
                let markets: Vec<Value> = crate::strategy::with_variants(s)
                    .map(|m| {
                        json!({"name": m.marketplace(), "strategy": m.name(), "hosts": m.hosts(),
                               "base_url": m.base_url(), "locale": m.locale().tag})
                    })
                    .collect();
                out["marketplaces"] = Value::Array(markets);
            }
            out
        })
        .chain(std::iter::once(json!({
            "name": web::NAME, "hosts": ["*"], "builtin": true,
            "description": "The generic strategy, for any shop no strategy covers (and any page by name): products and reviews from schema.org structured data or the page's own markup.",
            "operations": operations(web::operations()),
        })))
        .collect();
    json!({ "strategies": strategies })
}

/// Each operation's description, tiers and parameters.
fn operations(ops: &BTreeMap<String, Operation>) -> serde_json::Map<String, Value> {
    ops.values()
        .map(|op| {
            (
                op.name.clone(),
                json!({
                    "description": op.description,
                    "tiers": op.tiers.iter().map(|t| t.number).collect::<Vec<_>>(),
                    "params": op.json_schema(),
                }),
            )
        })
        .collect()
}
