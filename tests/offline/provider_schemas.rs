//! Every tool's `inputSchema` as two model providers take a tool's
//! parameters, by their published rules (an agent's client hands our
//! schema to its model provider as the function's parameters):
//!
//! - **Gemini** function declarations: parameters are "a select subset of
//!   an OpenAPI 3.0 schema object" (the API's `Schema`: `type`, `format`,
//!   `title`, `description`, `nullable`, `enum`, `maxItems`, `minItems`,
//!   `properties`, `required`, `minProperties`, `maxProperties`,
//!   `minLength`, `maxLength`, `pattern`, `example`, `anyOf`,
//!   `propertyOrdering`, `default`, `items`, `minimum`, `maximum`). The
//!   clients' converters drop what the subset lacks
//!   (`additionalProperties`, `$schema`); a schema is refused when what is
//!   left is outside it: a `type` that is not one of STRING, NUMBER,
//!   INTEGER, BOOLEAN, ARRAY, OBJECT (a type array, or `null`), an `enum`
//!   that is not of strings, a `format` the subset does not know,
//!   `oneOf`/`allOf`/`not`/`$ref`/`const`.
//! - **OpenAI** function calling: `parameters` is a JSON Schema whose root
//!   is `"type": "object"` and has no `anyOf`, `oneOf`, `allOf`, `enum` or
//!   `not`; a `format` must be one the structured-outputs subset knows
//!   (`date-time`, `time`, `date`, `duration`, `email`, `hostname`, `ipv4`,
//!   `ipv6`, `uuid`); no `$ref` without its `$defs`.
//!
//! Both are checked on the schemas as `tools/list` sends them, so a new
//! tool or argument that one of them would refuse fails here by name.

use idpool::config::{Config, Role};
use serde_json::Value;

/// What the Gemini subset keeps of a schema node.
const GEMINI_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];
/// What Gemini's converters drop without a word (not in the subset, and
/// nothing the model needs to call the tool right).
const GEMINI_DROPPED: &[&str] = &["additionalProperties", "$schema", "examples"];
/// Keys that make Gemini refuse the declaration.
const GEMINI_REFUSED: &[&str] = &["oneOf", "allOf", "not", "$ref", "const", "$defs"];

/// Gemini's conversion of `v` (keys outside the subset dropped) and the
/// reasons it would be refused.
fn gemini(v: &Value, at: &str, problems: &mut Vec<String>) -> Value {
    let Some(o) = v.as_object() else {
        problems.push(format!("{at}: not a schema object"));
        return Value::Null;
    };
    let mut out = serde_json::Map::new();
    for (k, x) in o {
        if GEMINI_REFUSED.contains(&k.as_str()) {
            problems.push(format!("{at}: `{k}` is outside Gemini's schema subset"));
            continue;
        }
        if GEMINI_DROPPED.contains(&k.as_str()) {
            continue;
        }
        if !GEMINI_KEYS.contains(&k.as_str()) {
            problems.push(format!("{at}: `{k}` is not a Gemini schema field"));
            continue;
        }
        let converted = match k.as_str() {
            "properties" => Value::Object(
                (x.as_object().into_iter().flatten())
                    .map(|(p, s)| (p.clone(), gemini(s, &format!("{at}.{p}"), problems)))
                    .collect(),
            ),
            "items" => gemini(x, &format!("{at}[]"), problems),
            "anyOf" => Value::Array(
                (x.as_array().into_iter().flatten())
                    .enumerate()
                    .map(|(i, s)| gemini(s, &format!("{at}.anyOf[{i}]"), problems))
                    .collect(),
            ),
            _ => x.clone(),
        };
        out.insert(k.clone(), converted);
    }
    let ty = o.get("type");
    match ty {
        Some(Value::String(t))
            if ["string", "number", "integer", "boolean", "array", "object"]
                .contains(&t.as_str()) => {}
        None if o.contains_key("anyOf") => {}
        None => problems.push(format!("{at}: no `type`")),
        Some(other) => problems.push(format!("{at}: type {other} is not one Gemini type")),
    }
    if let Some(e) = o.get("enum") {
        let strings = e.as_array().is_some_and(|a| a.iter().all(Value::is_string));
        if !strings || ty != Some(&Value::String("string".into())) {
            problems.push(format!("{at}: Gemini's `enum` is for strings only: {e}"));
        }
    }
    if let Some(f) = o.get("format").and_then(Value::as_str) {
        let known = match ty.and_then(Value::as_str) {
            Some("string") => ["enum", "date-time"].contains(&f),
            Some("integer") => ["int32", "int64"].contains(&f),
            Some("number") => ["float", "double"].contains(&f),
            _ => false,
        };
        if !known {
            problems.push(format!("{at}: format `{f}` is not in Gemini's subset"));
        }
    }
    Value::Object(out)
}

/// OpenAI's rules for a function's `parameters`.
fn openai(root: &Value, name: &str, problems: &mut Vec<String>) {
    if root["type"] != "object" {
        problems.push(format!("{name}: the root is not `\"type\": \"object\"`"));
    }
    for k in ["anyOf", "oneOf", "allOf", "enum", "not"] {
        if root.get(k).is_some() {
            problems.push(format!("{name}: `{k}` at the root"));
        }
    }
    fn walk(v: &Value, at: &str, defs: bool, problems: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(f) = o.get("format").and_then(Value::as_str) {
                    let known = [
                        "date-time",
                        "time",
                        "date",
                        "duration",
                        "email",
                        "hostname",
                        "ipv4",
                        "ipv6",
                        "uuid",
                    ];
                    if !known.contains(&f) {
                        problems.push(format!("{at}: format `{f}` is not one OpenAI knows"));
                    }
                }
                if o.contains_key("$ref") && !defs {
                    problems.push(format!("{at}: `$ref` without `$defs`"));
                }
                for (k, x) in o {
                    if k != "enum" && k != "default" && k != "examples" && k != "example" {
                        walk(x, &format!("{at}.{k}"), defs, problems);
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}[{i}]"), defs, problems);
                }
            }
            _ => {}
        }
    }
    walk(root, name, root.get("$defs").is_some(), problems);
}

fn tools() -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = Config::default();
    cfg.pool.data_dir = dir.path().to_path_buf();
    let pool = idpool::pool::Pool::open(&cfg).expect("pool");
    idpool::mcp::catalog::tools_for(&pool, Role::Admin, idpool::tools::budget::DEFAULT_MAX_CHARS)
}

#[test]
fn every_input_schema_converts_under_geminis_rules() {
    let mut problems = Vec::new();
    let all = tools();
    assert!(all.len() > 20);
    for t in &all {
        let name = t["name"].as_str().unwrap_or("?");
        let converted = gemini(
            &t["inputSchema"],
            &format!("{name}.inputSchema"),
            &mut problems,
        );
        assert_eq!(converted["type"], "object", "{name}");
    }
    assert!(
        problems.is_empty(),
        "Gemini would refuse:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_input_schema_keeps_openais_rules() {
    let mut problems = Vec::new();
    for t in &tools() {
        let name = t["name"].as_str().unwrap_or("?");
        openai(
            &t["inputSchema"],
            &format!("{name}.inputSchema"),
            &mut problems,
        );
    }
    assert!(
        problems.is_empty(),
        "OpenAI would refuse:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_rules_catch_what_the_providers_refuse() {
    // What the checks exist for: the schemas as schemars writes them
    // before `portable` (type arrays, uint formats) fail both.
    let raw = serde_json::json!({"type": "object", "properties": {
        "n": {"type": ["integer", "null"], "format": "uint64"},
        "k": {"enum": [1, 2]},
        "u": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    }});
    let mut g = Vec::new();
    gemini(&raw, "raw", &mut g);
    assert!(
        g.iter().any(|p| p.contains("type [\"integer\",\"null\"]")),
        "{g:?}"
    );
    assert!(g.iter().any(|p| p.contains("`oneOf`")), "{g:?}");
    assert!(
        g.iter().any(|p| p.contains("`enum` is for strings")),
        "{g:?}"
    );
    let mut o = Vec::new();
    openai(&raw, "raw", &mut o);
    assert!(o.iter().any(|p| p.contains("uint64")), "{o:?}");
    let mut o = Vec::new();
    openai(
        &serde_json::json!({"anyOf": [{"type": "object"}]}),
        "root",
        &mut o,
    );
    assert_eq!(o.len(), 2, "{o:?}");
}
