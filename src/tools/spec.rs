//! What a tool is, declared once, in its own file: its name, the role a
//! caller needs, what it says about itself, its typed arguments (whose JSON
//! Schema is derived from the type the tool parses, so the two cannot
//! drift), the schema of its result, and how it runs. The MCP catalog,
//! the dispatcher's role gate and `idpool call --help` all read these.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::output::Output;
pub use crate::config::Role;
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Leases;
use crate::lease::cascade::RunOptions;
use crate::pool::{Pool, Reports};
use crate::services::{Browsing, Bundles, Jobs, SessionFiles};
use crate::strategy::Registry;
use std::sync::Arc;

/// MCP's behaviour hints, stated truthfully.
#[derive(Debug, Clone, Copy)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    /// Reaches sites outside the daemon.
    pub open_world: bool,
}

impl Annotations {
    /// Reads sites through the pool; changes nothing of ours but cookies.
    pub const READS_SITES: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: true,
    };
    /// Acts on a site as a person in a browser would (clicks, typing, a
    /// form submitted): not read-only, not destructive of ours.
    pub const ACTS_ON_SITES: Annotations = Annotations {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };
    /// Opens or ends something of the caller's in the pool (a browser
    /// session): not read-only, and a second call is not the first.
    pub const SESSION: Annotations = Annotations {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    /// Reads the pool's own state.
    pub const READS_POOL: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// Changes the pool's own state (an identity's browser, jar or
    /// calibration), the same way when called again.
    pub const CHANGES_POOL: Annotations = Annotations {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };

    /// …and what it replaces is gone (a breaker's history, an identity).
    pub const fn destructive(self) -> Annotations {
        Annotations {
            destructive: true,
            ..self
        }
    }

    /// …and a second call is not the first (a new identity, a new bundle).
    pub const fn not_idempotent(self) -> Annotations {
        Annotations {
            idempotent: false,
            ..self
        }
    }

    /// …and it reaches sites outside the daemon.
    pub const fn open_world(self) -> Annotations {
        Annotations {
            open_world: true,
            ..self
        }
    }
}

/// What a tool says it does: fixed, or naming the strategies the pool has.
#[derive(Clone, Copy)]
pub enum Description {
    Fixed(&'static str),
    Of(fn(&Registry) -> String),
}

impl Description {
    pub fn text(&self, registry: &Registry) -> String {
        match self {
            Description::Fixed(t) => (*t).to_string(),
            Description::Of(f) => f(registry),
        }
    }
}

/// What a run returns.
pub type Ran<'a> = BoxFuture<'a, Result<Output>>;

/// A tool's run, by the one handle it needs: it gets that and nothing else
/// of the pool (see `docs/architecture.md`, "A new tool").
#[derive(Clone, Copy)]
pub enum Run {
    /// Reaches sites, or acts on identities by number, through the lease
    /// source (which also holds the strategies).
    Leases(for<'a> fn(&'a Arc<Leases>, Value, &'a RunOptions) -> Ran<'a>),
    /// Starts or reads jobs that run past their call.
    Jobs(for<'a> fn(&'a JobDesk, Value, &'a RunOptions) -> Ran<'a>),
    /// Drives interactive browser sessions.
    Browsing(for<'a> fn(&'a Browsing, Value, &'a RunOptions) -> Ran<'a>),
    /// Session files into and out of identities.
    SessionFiles(for<'a> fn(&'a SessionFiles, Value) -> Ran<'a>),
    /// Identity bundles out of and into identities.
    Bundles(for<'a> fn(&'a Bundles, Value) -> Ran<'a>),
    /// Reads the pool's reports.
    Reports(for<'a> fn(&'a Reports<'a>, Value, &'a RunOptions) -> Ran<'a>),
}

/// A job tool's handle: the job store and the lease source its jobs'
/// requests go through.
#[derive(Clone)]
pub struct JobDesk {
    pub jobs: Arc<Jobs>,
    pub leases: Arc<Leases>,
}

/// The [`Run`] future of a tool whose result reaches no site.
pub fn plain<'a>(
    f: impl std::future::Future<Output = Result<Value>> + Send + 'a,
) -> BoxFuture<'a, Result<Output>> {
    Box::pin(async move { f.await.map(Output::plain) })
}

/// One tool.
pub struct Spec {
    pub name: &'static str,
    /// The least role that may call it.
    pub role: Role,
    pub title: &'static str,
    /// What the tool does.
    pub description: Description,
    /// The arguments' JSON Schema, derived from the type the tool parses.
    pub input: fn() -> Value,
    /// The input's `strategy` property lists the pool's strategies.
    pub strategy_enum: bool,
    /// The result's JSON Schema.
    pub output: fn() -> Value,
    pub annotations: Annotations,
    /// Sends `notifications/progress` when given a progress token.
    pub progress: bool,
    /// Who keeps its answer within the caller's `max_chars`.
    pub budget: super::Budget,
    /// Another tool a call with these arguments runs on the caller's behalf
    /// (`search` with `scrape_results` runs `scrape`): the caller's role
    /// and grants must allow that tool too.
    pub also_runs: Option<fn(&Value) -> Option<&'static str>>,
    /// Where a call would lease identities, for the fleet to forward it
    /// when none here is admitted; `None` for tools that hold nothing
    /// site-bound or hold it past the call.
    pub route: Option<RouteOf>,
    pub run: Run,
}

impl Spec {
    /// A tool with what most have: no arguments, an object result, reading
    /// the pool's state, its answer kept within `max_chars` item by item,
    /// no progress, no route. Each tool file sets only what differs.
    pub const fn new(
        name: &'static str,
        role: Role,
        title: &'static str,
        description: &'static str,
        run: Run,
    ) -> Spec {
        Spec {
            name,
            role,
            title,
            description: Description::Fixed(description),
            input: input_schema::<NoArgs>,
            strategy_enum: false,
            output: || result_schema(serde_json::json!({}), &[]),
            annotations: Annotations::READS_POOL,
            progress: false,
            budget: super::Budget::Items,
            also_runs: None,
            route: None,
            run,
        }
    }

    /// Its arguments' schema.
    pub const fn input(self, input: fn() -> Value) -> Spec {
        Spec { input, ..self }
    }

    /// Its result's schema.
    pub const fn output(self, output: fn() -> Value) -> Spec {
        Spec { output, ..self }
    }

    pub const fn annotations(self, annotations: Annotations) -> Spec {
        Spec {
            annotations,
            ..self
        }
    }

    /// What it says of itself names the pool's strategies.
    pub const fn described_by(self, of: fn(&Registry) -> String) -> Spec {
        Spec {
            description: Description::Of(of),
            ..self
        }
    }

    /// Its `strategy` argument lists the pool's strategies.
    pub const fn strategy_enum(self) -> Spec {
        Spec {
            strategy_enum: true,
            ..self
        }
    }

    /// It sends `notifications/progress` when given a progress token.
    pub const fn progress(self) -> Spec {
        Spec {
            progress: true,
            ..self
        }
    }

    pub const fn budget(self, budget: super::Budget) -> Spec {
        Spec { budget, ..self }
    }

    pub const fn also_runs(self, f: fn(&Value) -> Option<&'static str>) -> Spec {
        Spec {
            also_runs: Some(f),
            ..self
        }
    }

    pub const fn route(self, route: RouteOf) -> Spec {
        Spec {
            route: Some(route),
            ..self
        }
    }

    /// Run it on `pool`: its handle, taken from the pool, and nothing else.
    pub fn call<'a>(&self, pool: &'a Pool, args: Value, opts: &'a RunOptions) -> Ran<'a> {
        match self.run {
            Run::Leases(f) => f(pool.leases(), args, opts),
            Run::Jobs(f) => {
                let desk = JobDesk {
                    jobs: pool.services().jobs.clone(),
                    leases: pool.leases().clone(),
                };
                Box::pin(async move { f(&desk, args, opts).await })
            }
            Run::Browsing(f) => f(&pool.services().browsing, args, opts),
            Run::SessionFiles(f) => f(&pool.services().session_files, args),
            Run::Bundles(f) => f(&pool.services().bundles, args),
            Run::Reports(f) => Box::pin(async move { f(&pool.reports(), args, opts).await }),
        }
    }
}

/// A call's routing key: the strategy (a marketplace's own name where the
/// call picks one) or the open-web host it leases identities for, and
/// whether its operation needs a signed-in identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub key: String,
    pub login: bool,
}

/// How a tool finds its [`Route`] in raw arguments: the same resolution its
/// run uses; `None` for arguments that name none (the run reports why).
pub type RouteOf = fn(&Leases, &Value) -> Option<Route>;

/// The route of `op` on `strategy`.
pub fn route_to(strategy: &dyn crate::strategy::Strategy, op: &str) -> Route {
    Route {
        key: strategy.name().to_string(),
        login: strategy
            .operations()
            .get(op)
            .is_some_and(|o| o.requires_login),
    }
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish()
    }
}

/// The JSON Schema of `T` as a tool's `inputSchema`: an object schema
/// without the generator's `$schema` and type `title`.
pub fn input_schema<T: JsonSchema>() -> Value {
    // Inline (no `$defs`), and an optional argument is simply not required
    // (not "T or null"): what MCP clients and models read most easily.
    let schema = schemars::generate::SchemaSettings::default()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = serde_json::to_value(schema).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
        if let Some(Value::Object(props)) = o.get_mut("properties") {
            for p in props.values_mut() {
                not_null(p);
            }
        }
    }
    v
}

/// `more` among the schema's properties (a schema without any gets them).
pub fn add_properties(schema: &mut Value, more: Value) {
    if let (Some(p), Value::Object(more)) = (
        schema.as_object_mut().map(|o| {
            o.entry("properties")
                .or_insert_with(|| serde_json::json!({}))
        }),
        more,
    ) && let Some(p) = p.as_object_mut()
    {
        p.extend(more);
    }
}

/// `format` values schemars writes that JSON Schema does not define (Ajv in
/// strict mode refuses them); the bounds they imply stay as `minimum` and
/// `maximum`.
const NONSTANDARD_FORMATS: &[&str] = &[
    "uint", "uint8", "uint16", "uint32", "uint64", "uint128", "int", "int8", "int16", "int32",
    "int64", "int128", "float", "double",
];

/// A schema in the form the widest set of clients and model providers
/// accept: no non-standard `format`; in an input schema (`input`), no
/// `null` anywhere (an argument that may be absent is just not required:
/// `"type": ["string", "null"]` → `"type": "string"`, an `anyOf` with a
/// `null` branch → the other branch, a `null` default dropped), since
/// several providers' tool converters refuse type arrays and null types.
/// Output schemas write a field that can be null as `anyOf` branches of one
/// `type` each (`{"anyOf": [{"type": "string"}, {"type": "null"}]}`), never
/// a type array: clients that map tool schemas onto a one-type dialect
/// (Gemini's OpenAPI subset) take it, the MCP Inspector's portability check
/// asks for it, and Ajv's strict mode compiles it.
pub fn portable(v: &mut Value, input: bool) {
    match v {
        Value::Object(m) => {
            if m.get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| NONSTANDARD_FORMATS.contains(&f))
            {
                m.remove("format");
            }
            if !input
                && let Some(Value::Array(types)) = m.get("type")
                && types.len() > 1
            {
                let types = types.clone();
                m.remove("type");
                // What describes the field stays on it; the rest belongs to
                // the branches that are not null.
                let shared = ["description", "title", "default", "examples"];
                let own: serde_json::Map<String, Value> = m
                    .iter()
                    .filter(|(k, _)| !shared.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                m.retain(|k, _| shared.contains(&k.as_str()));
                let branches: Vec<Value> = types
                    .into_iter()
                    .map(|t| {
                        let mut b = serde_json::Map::new();
                        if t != "null" {
                            b.extend(own.clone());
                        }
                        b.insert("type".into(), t);
                        Value::Object(b)
                    })
                    .collect();
                m.insert("anyOf".into(), Value::Array(branches));
            }
            if input {
                if let Some(Value::Array(types)) = m.get_mut("type") {
                    types.retain(|t| t != "null");
                    if let [one] = types.as_slice() {
                        let one = one.clone();
                        m.insert("type".into(), one);
                    }
                }
                for key in ["anyOf", "oneOf"] {
                    let Some(Value::Array(branches)) = m.get(key) else {
                        continue;
                    };
                    let rest: Vec<Value> = (branches.iter())
                        .filter(|b| b.get("type") != Some(&Value::String("null".into())))
                        .cloned()
                        .collect();
                    match <[Value; 1]>::try_from(rest) {
                        Ok([Value::Object(only)]) => {
                            m.remove(key);
                            for (k, v) in only {
                                m.entry(k).or_insert(v);
                            }
                        }
                        Ok([other]) => {
                            m.insert(key.into(), Value::Array(vec![other]));
                        }
                        Err(rest) => {
                            m.insert(key.into(), Value::Array(rest));
                        }
                    }
                }
                if m.get("default") == Some(&Value::Null) {
                    m.remove("default");
                }
                if let Some(Value::Array(values)) = m.get_mut("enum") {
                    values.retain(|v| !v.is_null());
                }
                one_of_to_enum_or_any_of(m);
                // A tag's one value: an enum of one (`const` is beyond
                // Gemini's subset).
                if let Some(Value::String(c)) = m.get("const").cloned() {
                    m.remove("const");
                    m.insert("enum".into(), Value::Array(vec![Value::String(c)]));
                    m.entry("type")
                        .or_insert_with(|| Value::String("string".into()));
                }
            }
            for child in m.values_mut() {
                portable(child, input);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| portable(c, input)),
        _ => {}
    }
}

/// An input's `oneOf` as providers take it: alternatives that are each one
/// constant string (schemars' form of a documented enum) become a string
/// `enum`, their descriptions joined into the field's; any other `oneOf`
/// becomes `anyOf` (its branches are disjoint, so the meaning holds), which
/// model providers' schema subsets have and `oneOf` they lack.
fn one_of_to_enum_or_any_of(m: &mut serde_json::Map<String, Value>) {
    let Some(Value::Array(branches)) = m.remove("oneOf") else {
        return;
    };
    let constants: Option<Vec<(String, Option<String>)>> = branches
        .iter()
        .map(|b| {
            let c = b.get("const")?.as_str()?.to_string();
            let d = b
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string);
            let only_these = b.as_object().is_some_and(|o| {
                o.keys()
                    .all(|k| ["const", "description", "type"].contains(&k.as_str()))
            });
            only_these.then_some((c, d))
        })
        .collect();
    match constants {
        Some(cs) if !cs.is_empty() => {
            let told: Vec<String> = cs
                .iter()
                .map(|(c, d)| match d {
                    Some(d) => format!("`{c}`: {}", d.trim_end_matches('.')),
                    None => format!("`{c}`"),
                })
                .collect();
            let mut description = m
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_default();
            if !description.is_empty() {
                description.push(' ');
            }
            description.push_str(&format!("One of: {}.", told.join("; ")));
            m.insert("type".into(), Value::String("string".into()));
            m.insert(
                "enum".into(),
                Value::Array(cs.into_iter().map(|(c, _)| Value::String(c)).collect()),
            );
            m.insert("description".into(), Value::String(description));
        }
        _ => {
            m.insert("anyOf".into(), Value::Array(branches));
        }
    }
}

/// `"type": ["integer", "null"]` → `"type": "integer"`.
fn not_null(property: &mut Value) {
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|t| t != "null");
        if let [one] = types.as_slice() {
            let one = one.clone();
            property["type"] = one;
        }
    }
}

/// Parse a tool's arguments into its `Args` type (`null` reads as `{}`),
/// naming the argument that is wrong.
pub fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T> {
    let args = match args {
        Value::Null => Value::Object(serde_json::Map::new()),
        Value::Object(_) => args,
        other => {
            return Err(invalid(format!(
                "arguments must be a JSON object, got {other}"
            )));
        }
    };
    // The common case pays for no path tracking; a refusal is parsed again
    // to name the argument.
    if let Ok(t) = T::deserialize(&args) {
        return Ok(t);
    }
    let e = match serde_path_to_error::deserialize::<_, T>(&args) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let path = e.path().to_string();
    let inner = e.into_inner().to_string();
    let what = if path == "." {
        inner
    } else if inner.starts_with("invalid type") {
        format!("argument `{path}` has the wrong type ({inner})")
    } else {
        format!("argument `{path}`: {inner}")
    };
    Err(invalid(format!("invalid {tool} arguments: {what}")))
}

/// A result's JSON Schema: an object with these properties, these required.
pub fn result_schema(mut properties: Value, required: &[&str]) -> Value {
    if let Some(p) = properties.as_object_mut() {
        p.insert(
            "recordings".into(),
            serde_json::json!({
                "type": "array", "items": {"type": "string"},
                "description": "Recordings of the browser work this call made ([recording] in idpool.toml; an admin reads them at GET /api/v1/recordings/{id})."
            }),
        );
    }
    serde_json::json!({"type": "object", "properties": properties, "required": required})
}

// The arguments of a tool that takes none.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A caller's argument is wrong: not worth retrying as it is.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message).retryable(false)
}

/// `#[serde(default = "super::spec::yes")]`: an argument that is on unless
/// turned off.
pub(super) fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn portable_schemas_have_no_null_in_inputs_and_no_made_up_formats() {
        let mut s = json!({"type": "object", "properties": {
            "n": {"type": ["integer", "null"], "format": "uint64", "minimum": 0},
            "o": {"anyOf": [{"type": "object", "properties": {"x": {"type": ["number", "null"], "format": "double"}}}, {"type": "null"}], "default": null},
            "e": {"type": "string", "format": "uri"},
        }});
        let mut out = s.clone();
        portable(&mut s, true);
        assert_eq!(
            s,
            json!({"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 0},
                "o": {"type": "object", "properties": {"x": {"type": "number"}}},
                "e": {"type": "string", "format": "uri"},
            }})
        );
        portable(&mut out, false);
        assert_eq!(
            out["properties"]["n"],
            json!({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
        );
        let mut list = json!({"type": ["array", "null"], "description": "d", "items": {"type": ["string", "null"]}});
        portable(&mut list, false);
        assert_eq!(
            list,
            json!({"description": "d", "anyOf": [
                {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                {"type": "null"}]})
        );
        assert!(
            out["properties"]["o"]["anyOf"].is_array(),
            "outputs keep their null branch"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    struct Args {
        #[allow(dead_code)]
        item: String,
        #[serde(default)]
        #[allow(dead_code)]
        page: u64,
        #[serde(flatten)]
        #[allow(dead_code)]
        rest: serde_json::Map<String, Value>,
    }

    #[test]
    fn wrong_arguments_are_named() {
        let e = parse::<Args>("t", json!({"item": "x", "page": "two"})).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.to_string()
                .starts_with("invalid t arguments: argument `page` has the wrong type"),
            "{e}"
        );
        let e = parse::<Args>("t", json!({"page": 2})).unwrap_err();
        assert!(e.to_string().contains("missing field `item`"), "{e}");
        let e = parse::<Args>("t", json!([1])).unwrap_err();
        assert!(e.to_string().contains("must be a JSON object"), "{e}");
        assert!(parse::<NoArgs>("t", Value::Null).is_ok());
        let e = parse::<NoArgs>("t", json!({"x": 1})).unwrap_err();
        assert!(e.to_string().contains("unknown field `x`"), "{e}");
    }
}
