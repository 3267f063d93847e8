//! `search`: a web search through an identity. It runs the `search`
//! operation of a search-engine strategy (`web.search_engines`, in order:
//! DuckDuckGo's HTML endpoint, then Bing) like any other operation (tiers,
//! markers, politeness, robots.txt, drift alarms), moves on to the next
//! engine when one blocks or cannot answer, and returns the ranked results
//! with the engine and identity that served them; `scrape_results: N` then
//! fetches the first N organic results as `scrape` would.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use super::{Output, Provenance};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Leases;
use crate::lease::cascade::{self, RunOptions};
use std::sync::Arc;

/// Most results one call returns, and most it scrapes.
pub const MAX_LIMIT: usize = 50;
pub const MAX_SCRAPED: usize = 10;

pub const SPEC: Spec = Spec::new(
    "search",
    Role::Operator,
    "Search the web",
    "Search the web through an identity: the ranked results (title, url, snippet, \
         position; sponsored: true for ads) of the first engine that answers (web.search_engines, \
         by default DuckDuckGo then Bing; a blocked engine hands over to the next), each saying \
         which engine and slot served it. `scrape_results: N` also fetches the first N organic \
         results as `scrape` does, in `format` (markdown by default).",
    Run::Leases(|leases, args, opts| Box::pin(run(leases, args, opts.clone()))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "query": {"type": "string"},
            "engine": {"type": "string", "description": "The engine that served the results."},
            "results": {"type": "array", "items": {"type": "object", "properties": {
                "position": {"type": "integer"}, "title": {"type": "string"},
                "url": {"type": "string"}, "snippet": {"type": ["string", "null"]},
                "display_url": {"type": ["string", "null"]},
                "sponsored": {"type": "boolean"}, "engine": {"type": "string"},
                "slot": {"type": "integer"},
                "page": {"type": "object", "description": "With scrape_results: the page as scrape returns it (url, status, title, content), or its error."},
            }}},
            "tried": {"type": "array", "description": "Engines that did not answer before this one, and why.", "items": {"type": "object", "properties": {
                "engine": {"type": "string"}, "error": {"type": "string"}, "kind": {"type": "string"}}}},
            "slot": {"type": "integer"}, "tier": {"type": "integer"},
            "attempts": super::attempts_schema(),
            "warnings": {"type": "array", "items": {"type": "string"}},
        }),
        &["query", "engine", "results"],
    )
})
.annotations(Annotations::READS_SITES)
.progress()
.also_runs(|args| {
    (args["scrape_results"].as_u64().is_some_and(|n| n > 0)).then_some("scrape")
});

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// What to search for.
    query: String,
    /// This engine only (a search-engine strategy: `duckduckgo`, `bing`);
    /// default: `web.search_engines` in order, the next on a block.
    engine: Option<String>,
    /// Results to return at most (default 10), from the engine's first
    /// results page.
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
    /// Also fetch the first N organic results (not ads), as `scrape` does.
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_SCRAPED))]
    scrape_results: usize,
    /// The scraped pages' format: markdown (default), text, html, links.
    format: Option<PageFormat>,
    /// Use only this slot (identity).
    slot: Option<usize>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum PageFormat {
    Markdown,
    Text,
    Html,
    Links,
}

impl PageFormat {
    fn name(self) -> &'static str {
        match self {
            PageFormat::Markdown => "markdown",
            PageFormat::Text => "text",
            PageFormat::Html => "html",
            PageFormat::Links => "links",
        }
    }
}

/// An engine's failure that the next engine may not share: it blocked or
/// rate-limited this pool, every identity for it is resting, it needs a
/// person, it timed out or the network failed, or robots.txt refused it.
fn hand_over(e: &Error) -> bool {
    !matches!(
        e.kind(),
        ErrorKind::InvalidArgument
            | ErrorKind::NotGranted
            | ErrorKind::Internal
            | ErrorKind::Config
    )
}

pub async fn run(leases: &Arc<Leases>, args: Value, opts: RunOptions) -> Result<Output> {
    let a: Args = parse("search", args)?;
    let query = a.query.trim().to_string();
    if query.is_empty() {
        return Err(invalid("`query` is empty"));
    }
    if query.chars().count() > 500 {
        return Err(invalid("`query` is longer than 500 characters"));
    }
    let limit = a.limit.unwrap_or(10);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(invalid(format!("`limit` must be from 1 to {MAX_LIMIT}")));
    }
    if a.scrape_results > MAX_SCRAPED {
        return Err(invalid(format!(
            "`scrape_results` must be from 0 to {MAX_SCRAPED}"
        )));
    }
    let engines: Vec<String> = match &a.engine {
        Some(e) => vec![e.clone()],
        None => leases.config().web.search_engines.clone(),
    };
    let mut tried: Vec<Value> = Vec::new();
    let mut last: Option<Error> = None;
    for name in &engines {
        let Some(strategy) = leases.registry().get(name).cloned() else {
            if a.engine.is_some() {
                return Err(invalid(format!(
                    "no search engine `{name}` (its strategy is not loaded)"
                )));
            }
            tried.push(
                json!({"engine": name, "error": "its strategy is not loaded", "kind": "not_found"}),
            );
            continue;
        };
        let Some(op) = strategy.operations().get("search") else {
            return Err(invalid(format!(
                "strategy `{name}` has no `search` operation: it is not a search engine"
            )));
        };
        let mut params = Map::new();
        params.insert("q".into(), Value::String(query.clone()));
        let bound = op.bind(params)?;
        let run_opts = RunOptions {
            slot: a.slot.or(opts.slot),
            ..opts.clone()
        };
        let mut call = crate::lease::Call::new(leases, None, opts.scope.clone());
        match cascade::run(&mut call, &strategy, op, &bound, &run_opts).await {
            Ok(r) => {
                let by = Provenance::of(&r);
                let mut results: Vec<Value> = Vec::new();
                for item in r.extracted.items.into_iter() {
                    if results.len() >= limit {
                        break;
                    }
                    let Some(url) = item.get("url").and_then(Value::as_str) else {
                        continue;
                    };
                    results.push(json!({
                        "position": results.len() + 1,
                        "title": item.get("title").cloned().unwrap_or(Value::Null),
                        "url": url,
                        "snippet": item.get("snippet").cloned().unwrap_or(Value::Null),
                        "display_url": item.get("display_url").cloned().unwrap_or(Value::Null),
                        "sponsored": item.get("sponsored").and_then(Value::as_bool).unwrap_or(false),
                        "engine": strategy.family(),
                        "slot": r.slot,
                    }));
                }
                let mut out = json!({
                    "query": query,
                    "engine": strategy.family(),
                    "results": results,
                    "slot": r.slot,
                    "tier": r.tier,
                    "attempts": r.attempts,
                });
                if !tried.is_empty() {
                    out["tried"] = json!(tried);
                }
                if !r.warnings.is_empty() {
                    out["warnings"] = json!(r.warnings);
                }
                let mut scraped = 0;
                if a.scrape_results > 0 {
                    scraped = scrape_top(leases, &mut out, a.scrape_results, a.format, &opts).await;
                }
                let by = Provenance {
                    attempts: by.attempts + scraped,
                    ..by
                };
                return Ok(Output::served(out, by));
            }
            Err(e) if a.engine.is_none() && hand_over(&e) => {
                tracing::info!(engine = %name, error = %e.message(), "search: trying the next engine");
                if let Some(p) = &opts.progress {
                    (p.0)(format!(
                        "{name} did not answer ({}); trying the next engine",
                        e.message()
                    ));
                }
                tried
                    .push(json!({"engine": name, "error": e.message(), "kind": e.kind().as_str()}));
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    let why = tried
        .iter()
        .map(|t| {
            format!(
                "{}: {}",
                t["engine"].as_str().unwrap_or(""),
                t["error"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(match last {
        Some(e) => {
            let all = Error::new(e.kind(), format!("no search engine answered ({why})"));
            match e.retry_after() {
                Some(after) => all.with_retry_after(after),
                None => all,
            }
        }
        None => Error::new(
            ErrorKind::NotFound,
            format!(
                "no search engine is loaded (web.search_engines: {}; {why})",
                engines.join(", ")
            ),
        ),
    })
}

/// Fetch the first `n` organic results as `scrape` does, each into its
/// result's `page`; the pages fetched.
async fn scrape_top(
    leases: &Arc<Leases>,
    out: &mut Value,
    n: usize,
    format: Option<PageFormat>,
    opts: &RunOptions,
) -> usize {
    let format = format.unwrap_or(PageFormat::Markdown).name();
    // The pages share the answer's budget (each at least 1,000 characters;
    // `truncated` says a page was cut).
    let per_page = (opts.answer_chars / n.max(1)).max(1_000);
    let Some(results) = out["results"].as_array_mut() else {
        return 0;
    };
    let mut done = 0;
    for r in results
        .iter_mut()
        .filter(|r| r["sponsored"] != true)
        .take(n)
    {
        let Some(url) = r["url"].as_str().map(str::to_string) else {
            continue;
        };
        let args = json!({"url": url, "format": format, "max_chars": per_page});
        let page = match super::scrape::run(leases, args, opts).await {
            Ok(o) => {
                let b = o.body;
                json!({
                    "url": b["url"], "status": b["status"], "title": b["title"],
                    "format": format, "content": b["content"],
                    "truncated": b["next_start_index"].is_number(),
                    "slot": b["slot"], "tier": b["tier"],
                })
            }
            Err(e) => json!({"url": url, "error": e.message(), "kind": e.kind().as_str()}),
        };
        r["page"] = page;
        done += 1;
    }
    done
}
