//! The tools as MCP lists them: each tool's [`Spec`] (declared in its own
//! file under `tools/`) as an MCP `Tool` object, with truthful annotations and
//! the pool's strategies named where a tool takes one. Names and roles are
//! part of the product contract (DESIGN.md §7).

use serde_json::{Value, json};

use crate::auth::Role;
use crate::pool::Pool;
use crate::tools::{self, Budget, Spec};

/// The MCP `Tool` object of `spec` on `pool`; `budget` is the server's
/// `max_answer_chars`.
pub fn to_json(spec: &Spec, pool: &Pool, budget: usize) -> Value {
    let mut input = (spec.input)();
    let mut output = (spec.output)();
    let mut description = spec.description.text(&pool.registry());
    if spec.budget == Budget::Items {
        tools::add_properties(&mut input, tools::budget::argument_properties(budget));
        tools::add_properties(&mut output, tools::budget::piece_properties());
        description.push_str(&format!(
            " Answers longer than `max_chars` (default {budget}) come in pieces: `truncated`, \
             then call again with `cursor` = `next_cursor`."
        ));
    }
    if spec.strategy_enum
        && let Some(p) = input.pointer_mut("/properties/strategy")
    {
        p["enum"] = json!(tools::strategy_names(&pool.registry()));
    }
    tools::portable(&mut input, true);
    tools::portable(&mut output, false);
    json!({
        "name": spec.name,
        "title": spec.title,
        "description": description,
        "inputSchema": input,
        "outputSchema": output,
        "annotations": {
            "title": spec.title,
            "readOnlyHint": spec.annotations.read_only,
            "destructiveHint": spec.annotations.destructive,
            "idempotentHint": spec.annotations.idempotent,
            "openWorldHint": spec.annotations.open_world,
        },
    })
}

/// The tools `role` may call, as MCP `Tool` objects.
/// The tools `who` may call: those of its role, and when the key has
/// grants, only those a grant of it that holds now names (or every tool
/// of the role, for a grant that names none).
pub fn tools_of(pool: &Pool, who: &crate::auth::Principal, budget: usize) -> Vec<Value> {
    tools::ALL
        .iter()
        .filter(|s| who.role >= s.role)
        .filter(|s| crate::auth::scope(who, s.name, s.role).is_ok())
        .map(|s| to_json(s, pool, budget))
        .collect()
}

pub fn tools_for(pool: &Pool, role: Role, budget: usize) -> Vec<Value> {
    tools::ALL
        .iter()
        .filter(|s| role >= s.role)
        .map(|s| to_json(s, pool, budget))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_an_object_schema_with_its_role() {
        let cfg = crate::config::Config::default();
        let pool = Pool::open(&cfg).unwrap();
        assert_eq!(
            tools_for(&pool, Role::Admin, tools::budget::DEFAULT_MAX_CHARS).len(),
            tools::ALL.len()
        );
        for s in tools::ALL {
            let j = to_json(s, &pool, tools::budget::DEFAULT_MAX_CHARS);
            assert_eq!(j["name"], s.name);
            assert_eq!(j["inputSchema"]["type"], "object", "{}", s.name);
            assert_eq!(j["outputSchema"]["type"], "object", "{}", s.name);
            let viewer = tools_for(&pool, Role::Viewer, tools::budget::DEFAULT_MAX_CHARS);
            let listed = viewer.iter().any(|t| t["name"] == s.name);
            assert_eq!(listed, s.role == Role::Viewer, "{}", s.name);
        }
        assert!(tools::find("nope").is_none());
    }
}
