//! `keyword_rank`: where given items rank for a keyword. It runs a
//! strategy's search operation page by page (one identity, sticky) until
//! every item is found, the pages run out, or `max_pages`; per item its page,
//! position on the page, organic rank (among results not sponsored, across
//! pages) and every sponsored placement.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use super::{Output, Provenance};
use crate::error::Result;
use crate::lease::Leases;
use crate::lease::cascade::{self, RunOptions};
use std::sync::Arc;

/// Most items one call looks for, and most pages it reads.
pub const MAX_ITEMS: usize = 20;
pub const MAX_PAGES: usize = 20;

pub const SPEC: Spec = Spec::new(
    "keyword_rank",
    Role::Operator,
    "Rank of items for a keyword",
    "Where up to 20 items (e.g. ASINs) rank for a search keyword: reads the strategy's \
         search operation page by page until every item is found or max_pages, and returns per \
         item its page, position on the page, organic rank (among non-sponsored results across \
         pages) and its sponsored placements; items not found are listed as missing.",
    Run::Leases(|leases, args, opts| Box::pin(run(leases, args, opts.clone()))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "strategy": {"type": "string"}, "keyword": {"type": "string"},
            "found": {"type": "object", "description": "Per item id: page, position, organic_rank (null when it only appears sponsored), sponsored (list of {page, position})."},
            "missing": {"type": "array", "items": {"type": "string"}},
            "pages": {"type": "integer", "description": "Pages read."},
            "results": {"type": "integer", "description": "Results seen on them."},
            "warnings": {"type": "array", "items": {"type": "string"}},
        }),
        &["strategy", "keyword", "found", "missing", "pages"],
    )
})
.annotations(Annotations::READS_SITES)
.strategy_enum()
.progress()
.route(route);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The search keyword.
    keyword: String,
    /// The item ids to find (ASINs for amazon), 1 to 20.
    items: Vec<String>,
    /// The strategy (default amazon).
    #[serde(default = "default_strategy")]
    strategy: String,
    /// Its search operation: parameters `keyword` and `page`; items with an
    /// id field and `sponsored` (default search).
    #[serde(default = "default_operation")]
    operation: String,
    /// The item field holding the id (default asin).
    #[serde(default = "default_id")]
    id_field: String,
    /// Most pages to read, 1 to 20 (default 5).
    #[serde(default = "default_pages")]
    max_pages: usize,
    /// Use only this slot (identity).
    slot: Option<usize>,
    /// The strategy's marketplace (e.g. amazon.de; default: its first).
    marketplace: Option<String>,
}

fn default_strategy() -> String {
    "amazon".into()
}
const DEFAULT_OPERATION: &str = "search";
fn default_operation() -> String {
    DEFAULT_OPERATION.into()
}
fn default_id() -> String {
    "asin".into()
}
fn default_pages() -> usize {
    5
}

/// Where each wanted id was seen over the pages so far.
#[derive(Debug, Default)]
pub struct Ranks {
    organic_seen: usize,
    results: usize,
    found: BTreeMap<String, Value>,
}

impl Ranks {
    /// Count one page's results (in page order) for the `wanted` ids.
    pub fn page(
        &mut self,
        page: usize,
        items: &[Map<String, Value>],
        id_field: &str,
        wanted: &[String],
    ) {
        for (i, item) in items.iter().enumerate() {
            self.results += 1;
            let sponsored = item
                .get("sponsored")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if !sponsored {
                self.organic_seen += 1;
            }
            let Some(id) = item.get(id_field).and_then(Value::as_str) else {
                continue;
            };
            if !wanted.iter().any(|w| w == id) {
                continue;
            }
            let position = item
                .get("position")
                .and_then(Value::as_u64)
                .unwrap_or(i as u64 + 1);
            let entry = self.found.entry(id.to_string()).or_insert_with(
                || json!({"page": null, "position": null, "organic_rank": null, "sponsored": []}),
            );
            if sponsored {
                if let Some(list) = entry["sponsored"].as_array_mut() {
                    list.push(json!({"page": page, "position": position}));
                }
            } else if entry["organic_rank"].is_null() {
                entry["page"] = json!(page);
                entry["position"] = json!(position);
                entry["organic_rank"] = json!(self.organic_seen);
            }
        }
    }

    /// Every wanted id found organically.
    pub fn done(&self, wanted: &[String]) -> bool {
        wanted.iter().all(|w| {
            self.found
                .get(w)
                .is_some_and(|f| !f["organic_rank"].is_null())
        })
    }

    /// `(found, missing)`.
    pub fn report(self, wanted: &[String]) -> (Value, Vec<String>) {
        let missing = wanted
            .iter()
            .filter(|w| !self.found.contains_key(*w))
            .cloned()
            .collect();
        (json!(self.found), missing)
    }
}

/// The search operation's strategy on the marketplace it names.
fn route(leases: &Leases, args: &Value) -> Option<super::Route> {
    let name = args["strategy"]
        .as_str()
        .map_or_else(default_strategy, str::to_string);
    let strategy = leases
        .registry()
        .pick(&name, args["marketplace"].as_str(), None)
        .ok()?;
    let op = args["operation"].as_str().unwrap_or(DEFAULT_OPERATION);
    Some(super::spec::route_to(strategy.as_ref(), op))
}

pub async fn run(leases: &Arc<Leases>, args: Value, opts: RunOptions) -> Result<Output> {
    let a: Args = parse("keyword_rank", args)?;
    if a.items.is_empty() || a.items.len() > MAX_ITEMS {
        return Err(invalid(format!(
            "argument `items` must hold 1 to {MAX_ITEMS} ids"
        )));
    }
    if a.max_pages == 0 || a.max_pages > MAX_PAGES {
        return Err(invalid(format!(
            "argument `max_pages` must be between 1 and {MAX_PAGES}"
        )));
    }
    let strategy = leases
        .registry()
        .pick(&a.strategy, a.marketplace.as_deref(), None)
        .map_err(invalid)?;
    let op = strategy.operations().get(&a.operation).ok_or_else(|| {
        invalid(format!(
            "strategy `{}` has no operation `{}`",
            a.strategy, a.operation
        ))
    })?;
    let opts = RunOptions {
        slot: a.slot.or(opts.slot),
        ..opts
    };
    let mut ranks = Ranks::default();
    let mut warnings: Vec<String> = Vec::new();
    let mut pages = 0;
    let mut served: Option<Provenance> = None;
    // One call holds one identity for every page, while the site lets it.
    let mut call = crate::lease::Call::new(leases, None, opts.scope.clone());
    for page in 1..=a.max_pages {
        let mut params = Map::new();
        params.insert("keyword".into(), json!(a.keyword));
        params.insert("page".into(), json!(page));
        let r = cascade::run(&mut call, &strategy, op, &op.bind(params)?, &opts).await?;
        served = Some(Provenance::of(&r).after(served));
        // One person reads the result pages, as a shopper would.
        pages = page;
        ranks.page(page, &r.extracted.items, &a.id_field, &a.items);
        super::get_reviews::merge(&mut warnings, r.warnings);
        opts.report(|| format!("page {page}: {} results", r.extracted.items.len()));
        if ranks.done(&a.items) || !r.extracted.has_more {
            break;
        }
    }
    let results = ranks.results;
    let (found, missing) = ranks.report(&a.items);
    let mut out = json!({
        "strategy": a.strategy, "keyword": a.keyword, "found": found, "missing": missing,
        "pages": pages, "results": results,
    });
    if !warnings.is_empty() {
        out["warnings"] = json!(warnings);
    }
    Ok(Output {
        body: out,
        provenance: served,
        text: None,
    })
}
