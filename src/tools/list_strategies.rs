//! `list_strategies`: strategies, their hosts, operations and parameters.

use serde_json::{Value, json};

use crate::pool::Pool;

pub fn run(pool: &Pool) -> Value {
    let strategies: Vec<Value> = pool
        .registry()
        .iter()
        .map(|s| {
            let ops: serde_json::Map<String, Value> = s
                .operations()
                .values()
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
                .collect();
            json!({"name": s.name(), "hosts": s.hosts(), "operations": ops})
        })
        .collect();
    json!({ "strategies": strategies })
}
