//! The tools the MCP server offers: name, the role a caller needs, description,
//! input and output JSON Schemas, and truthful annotations. Names and roles are
//! part of the product contract (DESIGN.md §7).

use serde_json::{Value, json};

use crate::auth::Role;
use crate::pool::Pool;

/// One tool as the catalog describes it.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: &'static str,
    pub role: Role,
    pub title: &'static str,
    pub description: String,
    pub input: Value,
    pub output: Value,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
    /// Sends `notifications/progress` when given a progress token.
    pub progress: bool,
}

impl ToolDef {
    /// The MCP `Tool` object.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input,
            "outputSchema": self.output,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                "openWorldHint": self.open_world,
            },
        })
    }
}

/// The role `tool` needs, or `None` for an unknown tool.
pub fn role_of(tool: &str) -> Option<Role> {
    Some(match tool {
        "list_strategies" | "pool_status" => Role::Viewer,
        "scrape" | "get_reviews" | "extract" => Role::Operator,
        "refresh_cookies" | "reset_slot" | "calibrate" => Role::Admin,
        _ => return None,
    })
}

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

/// Every tool, with schemas that mention the pool's strategies.
pub fn tools(pool: &Pool) -> Vec<ToolDef> {
    let strategies: Vec<String> = pool
        .registry()
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    let with_reviews: Vec<String> = pool
        .registry()
        .iter()
        .filter(|s| s.operations().contains_key("reviews"))
        .map(|s| s.name().to_string())
        .collect();
    let slot =
        json!({"type": "integer", "minimum": 0, "description": "Use only this slot (identity)."});
    vec![
        ToolDef {
            name: "scrape",
            role: Role::Operator,
            title: "Scrape a page",
            description: "Fetch any allowed URL through the identity pool (HTTP with a real \
                browser's TLS fingerprint, escalating to the slot's real Chromium on a block or \
                challenge) and return it as markdown, HTML, text or a list of links. Long pages \
                come in pieces: pass `start_index` = the previous `next_start_index`."
                .into(),
            input: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "http(s) URL on a host a strategy or security.allowed_hosts covers."},
                    "mode": {"type": "string", "enum": ["auto", "http", "browser"], "default": "auto"},
                    "format": {"type": "string", "enum": ["markdown", "html", "text", "links"], "default": "markdown"},
                    "wait_for": {"type": "string", "description": "CSS selector that must appear (browser tier waits for it)."},
                    "max_chars": {"type": "integer", "minimum": 1, "default": 20000},
                    "start_index": {"type": "integer", "minimum": 0, "default": 0},
                    "slot": slot,
                },
                "required": ["url"],
                "additionalProperties": false,
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string"}, "status": {"type": "integer"},
                    "format": {"type": "string"}, "content": {"type": "string"},
                    "start_index": {"type": "integer"}, "total_chars": {"type": "integer"},
                    "next_start_index": {"type": ["integer", "null"]},
                    "slot": {"type": "integer"}, "tier": {"type": "integer", "description": "2: HTTP, 3: browser"},
                    "via": {"type": "string"}, "degraded": {"type": "boolean"}, "outcome": {"type": "string"},
                },
                "required": ["url", "status", "content", "total_chars", "slot", "tier"],
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: true,
            progress: true,
        },
        ToolDef {
            name: "get_reviews",
            role: Role::Operator,
            title: "Get reviews of an item",
            description: format!(
                "Reviews of an item through a strategy's `reviews` operation, one or more pages, \
                 via the cheapest tier that works (1: AJAX endpoint, 2: HTML page, 3: real \
                 browser). Strategies with reviews: {}. Extra arguments are the operation's own \
                 filters (see list_strategies).",
                with_reviews.join(", ")
            ),
            input: json!({
                "type": "object",
                "properties": {
                    "item": {"type": "string", "description": "Item id, or the item's URL (then `strategy` may be omitted)."},
                    "strategy": {"type": "string", "enum": strategies},
                    "page": {"type": "integer", "minimum": 1, "default": 1},
                    "pages": {"type": "integer", "minimum": 1, "maximum": crate::tools::get_reviews::MAX_PAGES, "default": 1},
                    "slot": slot,
                },
                "required": ["item"],
                "additionalProperties": true,
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "strategy": {"type": "string"}, "item": {"type": "string"},
                    "count": {"type": "integer"},
                    "reviews": {"type": "array", "items": {"type": "object"}},
                    "has_more": {"type": "boolean"},
                    "pages": {"type": "array", "items": {"type": "object", "properties": {
                        "page": {"type": "integer"}, "count": {"type": "integer"},
                        "slot": {"type": "integer"}, "tier": {"type": "integer"},
                        "degraded": {"type": "boolean"}, "attempts": attempts_schema(),
                    }}},
                },
                "required": ["strategy", "item", "count", "reviews", "pages"],
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: true,
            progress: true,
        },
        ToolDef {
            name: "extract",
            role: Role::Operator,
            title: "Run a strategy operation",
            description: "Run any operation of a strategy (see list_strategies for operations \
                and their parameters) and return its items with provenance."
                .into(),
            input: json!({
                "type": "object",
                "properties": {
                    "strategy": {"type": "string", "enum": strategies},
                    "operation": {"type": "string"},
                    "params": {"type": "object", "default": {}},
                    "slot": slot,
                },
                "required": ["strategy", "operation"],
                "additionalProperties": false,
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "strategy": {"type": "string"}, "operation": {"type": "string"},
                    "items": {"type": "array", "items": {"type": "object"}},
                    "slot": {"type": "integer"}, "tier": {"type": "integer"},
                    "attempts": attempts_schema(),
                },
                "required": ["strategy", "operation", "items", "slot", "tier"],
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: true,
            progress: true,
        },
        ToolDef {
            name: "list_strategies",
            role: Role::Viewer,
            title: "List strategies",
            description: "The site strategies this pool knows: hosts, operations, and each \
                operation's tiers and parameters (JSON Schema)."
                .into(),
            input: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            output: json!({
                "type": "object",
                "properties": {"strategies": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "hosts": {"type": "array", "items": {"type": "string"}},
                    "operations": {"type": "object"},
                }}}},
                "required": ["strategies"],
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
            progress: false,
        },
        ToolDef {
            name: "pool_status",
            role: Role::Viewer,
            title: "Pool status",
            description: "Every slot: profile, proxy (credentials redacted), breaker per \
                strategy (state, failures, time left open), tier memory, browser (running, \
                pid, port, operations, RSS), cookies (count, last saved), last success and error, \
                and calibration: how closely the HTTP tier matches the slot's browser (browser \
                and HTTP JA4, HTTP/2 and headers equal, the residual differences by name)."
                .into(),
            input: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            output: json!({
                "type": "object",
                "properties": {"slots": {"type": "array", "items": {"type": "object", "properties": {
                    "slot": {"type": "integer"}, "profile": {"type": "string"},
                    "breakers": {"type": "object"}, "browser": {"type": "object"},
                    "cookies": {"type": "object"}, "calibration": {"type": "object"},
                }}}},
                "required": ["slots"],
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
            progress: false,
        },
        ToolDef {
            name: "refresh_cookies",
            role: Role::Admin,
            title: "Refresh cookies",
            description: "Warm slots up for a strategy in their real browser (visit its \
                warm-up URL, let a JS challenge pass) and persist the cookies into the slots' \
                jars. Captchas and login walls are not solved; they are reported."
                .into(),
            input: json!({
                "type": "object",
                "properties": {
                    "strategy": {"type": "string", "enum": strategies},
                    "slot": {"type": "integer", "minimum": 0, "description": "Only this slot; default every slot."},
                },
                "required": ["strategy"],
                "additionalProperties": false,
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "strategy": {"type": "string"}, "cookie_domain": {"type": "string"},
                    "slots": {"type": "array", "items": {"type": "object", "properties": {
                        "slot": {"type": "integer"}, "ok": {"type": "boolean"},
                        "cookies_before": {"type": "integer"}, "cookies_after": {"type": "integer"},
                        "error": {"type": ["string", "null"]},
                    }}},
                },
                "required": ["strategy", "slots"],
            }),
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: true,
            progress: true,
        },
        ToolDef {
            name: "reset_slot",
            role: Role::Admin,
            title: "Reset a slot",
            description: "Close a slot's circuit breaker(s) and forget its tier blocks \
                (`breakers`, default true; `strategy` for one only), and/or close its browser \
                (`browser`), which relaunches on next use with the same profile and cookies."
                .into(),
            input: json!({
                "type": "object",
                "properties": {
                    "slot": {"type": "integer", "minimum": 0},
                    "breakers": {"type": "boolean", "default": true},
                    "strategy": {"type": "string"},
                    "browser": {"type": "boolean", "default": false},
                },
                "required": ["slot"],
                "additionalProperties": false,
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "slot": {"type": "integer"}, "breakers_reset": {"type": "boolean"},
                    "strategy": {"type": ["string", "null"]}, "browser_closed": {"type": "boolean"},
                },
                "required": ["slot", "breakers_reset", "browser_closed"],
            }),
            read_only: false,
            destructive: true,
            idempotent: true,
            open_world: false,
            progress: false,
        },
        ToolDef {
            name: "calibrate",
            role: Role::Admin,
            title: "Calibrate slots",
            description: "Calibrate slots' HTTP tier against their own Chromium now (it \
                launches if needed): both visit the daemon's loopback calibration listener; the \
                HTTP tier takes the browser's header sets, HTTP/2 priority and TLS options. \
                Returns both sides (ClientHello with JA4, HTTP/2 fingerprint, header lists) and \
                the residual differences by name. Slots also calibrate by themselves at their \
                browser's first launch and when Chromium's version changes."
                .into(),
            input: json!({
                "type": "object",
                "properties": {
                    "slot": {"type": "integer", "minimum": 0, "description": "Only this slot; default every slot."},
                },
                "additionalProperties": false,
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "slots": {"type": "array", "items": {"type": "object", "properties": {
                        "slot": {"type": "integer"}, "ok": {"type": "boolean"},
                        "record": {"type": ["object", "null"]},
                        "error": {"type": ["string", "null"]},
                    }}},
                },
                "required": ["slots"],
            }),
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
            progress: false,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_tool_has_the_contract_role() {
        let cfg = crate::config::Config::default();
        let pool = Pool::open(&cfg).unwrap();
        for t in tools(&pool) {
            assert_eq!(role_of(t.name), Some(t.role), "{}", t.name);
            let j = t.to_json();
            assert_eq!(j["inputSchema"]["type"], "object");
            assert_eq!(j["outputSchema"]["type"], "object");
        }
        assert_eq!(role_of("nope"), None);
    }
}
