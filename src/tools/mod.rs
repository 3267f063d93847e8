//! Transport-agnostic tools, one file each. A tool's file declares its
//! [`Spec`] (name, role, description, typed arguments with a derived JSON
//! Schema, result schema, annotations, run); [`ALL`] lists them, and the MCP
//! catalog, the role gate and `idpool call` read only that list.
//!
//! Adding a tool: write `tools/<name>.rs` with `pub const SPEC: Spec` (see
//! `reset_slot.rs` for a small one) and add `<name>` to the `tools!` list below.

mod aliases;
mod browsing;
pub mod budget;
mod output;
mod spec;

pub use budget::Budget;
pub use output::{Output, Provenance};
pub use spec::{
    Annotations, Description, JobDesk, NoArgs, Ran, Role, Route, RouteOf, Run, Spec,
    add_properties, input_schema, invalid, parse, plain, portable,
};

use serde_json::{Value, json};

/// Declares each tool's module and lists its spec in [`ALL`], in the order
/// `tools/list` shows them.
macro_rules! tools {
    ($($name:ident),* $(,)?) => {
        $(pub mod $name;)*
        /// Every tool.
        pub const ALL: &[&Spec] = &[$(&$name::SPEC),*];
    };
}

tools!(
    scrape,
    search,
    map,
    crawl,
    crawl_status,
    browser_open,
    browser_navigate,
    browser_snapshot,
    browser_click,
    browser_type,
    browser_press,
    browser_select,
    browser_wait_for,
    browser_screenshot,
    browser_close,
    get_reviews,
    extract,
    keyword_rank,
    list_strategies,
    pool_status,
    refresh_cookies,
    reset_slot,
    calibrate,
    retire_slot,
    import_session,
    export_session,
    export_identity,
    import_identity,
);

/// The tool called `name`.
pub fn find(name: &str) -> Option<&'static Spec> {
    ALL.iter().copied().find(|s| s.name == name)
}

/// What a call of `tool` with `args` would lease identities for (see
/// [`Spec::route`]); `None` for tools that route nothing and for arguments
/// that name nothing to route by.
pub fn route_of(pool: &crate::pool::Pool, tool: &str, args: &Value) -> Option<Route> {
    (find(tool)?.route?)(pool.leases(), args)
}

/// Every name a tool's `strategy` argument takes: the pool's strategies
/// (marketplaces' too), and the generic `web`.
pub fn strategy_names(registry: &crate::strategy::Registry) -> Vec<String> {
    (registry.all())
        .map(|s| s.name().to_string())
        .chain(std::iter::once(crate::strategy::web::NAME.to_string()))
        .collect()
}

/// Every tier a cascade tried, as results report them.
fn attempts_schema() -> Value {
    json!({
        "type": "array",
        "description": "Every tier tried, in order.",
        "items": {"type": "object", "properties": {
            "slot": {"type": "integer"}, "tier": {"type": "integer"},
            "outcome": {"type": "string"}, "status": {"type": ["integer", "null"]},
            "ms": {"type": "integer"}
        }, "required": ["slot", "tier", "outcome", "ms"]}
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn schemas_are_derived_from_the_checked_types() {
        for spec in super::ALL {
            let s = (spec.input)();
            assert_eq!(s["type"], "object", "{}", spec.name);
            assert!(s.get("$defs").is_none() && s.get("$schema").is_none());
        }
        let scrape = (super::scrape::SPEC.input)();
        let max = &scrape["properties"]["max_chars"];
        assert_eq!(max["maximum"], json!(super::scrape::MAX_MAX_CHARS));
        assert_eq!(max["type"], "integer", "optional, not nullable");
        let reviews = (super::get_reviews::SPEC.input)();
        assert_eq!(
            reviews["properties"]["pages"]["maximum"],
            json!(super::get_reviews::MAX_PAGES)
        );
        assert_eq!(reviews["additionalProperties"], true, "operation filters");
    }
}
