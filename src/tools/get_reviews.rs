//! `get_reviews`: reviews of an item through its strategy's `reviews` operation,
//! one or several pages per call.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use super::{Output, Provenance};
use crate::error::Result;
use crate::lease::Leases;
use crate::lease::cascade::{self, RunOptions};
use crate::strategy::Strategy;
use crate::strategy::web::{self, answer::Trust};

pub const SPEC: Spec = Spec::new(
    "get_reviews",
    Role::Operator,
    "Get reviews of an item",
    "",
    Run::Leases(|leases, args, opts| Box::pin(run(leases, args, opts.clone()))),
)
.described_by(|registry| {
    let with_reviews: Vec<String> = registry
        .iter()
        .filter(|s| s.operations().contains_key("reviews"))
        .map(|s| s.name().to_string())
        .collect();
    format!(
        "Reviews of an item through a strategy's `reviews` operation, one or more pages, \
         via the cheapest tier that works (1: AJAX endpoint, 2: HTML page, 3: real \
         browser). Strategies with reviews: {}. Extra arguments are the operation's own \
         filters (see list_strategies). On any other shop, give the product page's URL as \
         `item`: the generic strategy `web` reads its structured data (JSON-LD, microdata, \
         RDFa) or its review markup, follows its next-page links, and says each review's \
         `source`.",
        with_reviews.join(", ")
    )
})
.input(|| {
    let mut schema = input_schema::<Args>();
    // The operation's own filters come as extra arguments.
    schema["additionalProperties"] = Value::Bool(true);
    schema
})
.output(|| {
    result_schema(
        json!({
            "strategy": {"type": "string"}, "item": {"type": "string"},
            "count": {"type": "integer"},
            "reviews": {"type": "array", "items": {"type": "object"}},
            "has_more": {"type": "boolean"},
            "masked": {"type": "array", "items": {"type": "string"}, "description": "Fields masked as personal data (pii = true) for a caller below security.pii_role."},
            "warnings": {"type": "array", "items": {"type": "string"}, "description": "Fields or the operation drifting (often empty against their own history: the site's markup may have changed), and the operation's expect rules that did not hold."},
            "fallback": {"type": "object", "description": "Present when the operation needs a signed-in identity, none was, and its fallback_operation ran instead.", "properties": {
                "operation": {"type": "string"}, "instead_of": {"type": "string"}, "reason": {"type": "string"}}},
            "slot": {"type": "integer", "description": "The one slot that served every page (absent when the call moved)."},
            "pages": {"type": "array", "items": {"type": "object", "properties": {
                "page": {"type": "integer"}, "count": {"type": "integer"},
                "url": {"type": "string", "description": "The page read (the generic strategy, which follows the site's links)."},
                "source": {"type": "string", "enum": ["json-ld", "microdata", "rdfa", "page"], "description": "Where the generic strategy read this page's reviews: structured data, or the page's review markup."},
                "slot": {"type": "integer"}, "tier": {"type": "integer"},
                "trial": {"type": "boolean"}, "attempts": super::attempts_schema(),
                "requests": {"type": "integer", "description": "Requests sent to the site for this page."},
            }}},
        }),
        &["strategy", "item", "count", "reviews", "pages"],
    )
})
.annotations(Annotations::READS_SITES)
.strategy_enum()
.progress()
.route(route);

/// At most this many pages per call.
pub const MAX_PAGES: u64 = 20;

fn one() -> u64 {
    1
}

/// The arguments `get_reviews` reads itself; any other is a filter of the
/// operation (checked there). Every field of [`Args`], in this list.
const OWN_ARGS: [&str; 6] = ["item", "strategy", "page", "pages", "slot", "sticky"];

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {
    /// Item id, or the item's URL (then `strategy` may be omitted; on a
    /// host no strategy covers, the generic strategy `web` reads it).
    item: String,
    /// The strategy whose `reviews` operation runs (`web`: the generic one).
    strategy: Option<String>,
    /// First page.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    page: u64,
    /// How many pages, from `page` on.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = MAX_PAGES))]
    pages: u64,
    /// Use only this slot (identity).
    slot: Option<usize>,
    /// Stay on one identity for every page (and for this MCP session's next
    /// calls) while the site admits it; `false`: round-robin.
    #[serde(default = "super::spec::yes")]
    sticky: bool,
}

/// The tool's own arguments, checked, and the operation's filters (no serde
/// `flatten`: it buffers every argument once more).
fn split_args(args: Value) -> Result<(Args, Map<String, Value>)> {
    let Value::Object(mut filters) = args else {
        return Err(invalid(format!(
            "arguments must be a JSON object, got {args}"
        )));
    };
    let own: Map<String, Value> = OWN_ARGS
        .iter()
        .filter_map(|k| filters.remove_entry(*k))
        .collect();
    Ok((parse("get_reviews", Value::Object(own))?, filters))
}

/// Arguments: `item` (id or URL), `strategy` (optional with a URL), `page`
/// (default 1), `pages` (default 1), `slot`, `sticky`, plus the operation's
/// own filters.
/// Add what `from` has and `into` lacks, in order.
pub(super) fn merge(into: &mut Vec<String>, from: Vec<String>) {
    for x in from {
        if !into.contains(&x) {
            into.push(x);
        }
    }
}

pub async fn run(leases: &Arc<Leases>, args: Value, opts: RunOptions) -> Result<Output> {
    let (own, filters) = split_args(args)?;
    let Args {
        item,
        strategy: strategy_name,
        page,
        pages,
        slot,
        sticky,
    } = own;
    let args = filters;
    let first = page.max(1);
    if pages == 0 || pages > MAX_PAGES {
        return Err(invalid(format!(
            "argument `pages` must be between 1 and {MAX_PAGES}"
        )));
    }
    let market = args.get("marketplace").and_then(Value::as_str);
    let strategy = resolve(leases, strategy_name.as_deref(), &item, market)?;
    let op = strategy.operations().get("reviews").ok_or_else(|| {
        invalid(format!(
            "strategy `{}` has no `reviews` operation",
            strategy.name()
        ))
    })?;
    // The generic strategy pages by the site's own links, from the URL given.
    let linked = strategy.family() == web::NAME;
    if linked && first != 1 {
        return Err(invalid(
            "the generic strategy follows a shop's own next-page links: give the URL of \
             the page to start from as `item`, without `page`",
        ));
    }
    let item_id = match linked {
        true => item.clone(),
        false => item_id(op, &item, strategy.name())?,
    };
    // The page to read next, as the URL parser writes it (so a page read
    // is known again whichever way a link spells it).
    let mut at = match linked {
        true => url::Url::parse(&item).ok().map(String::from),
        false => None,
    };
    let mut seen: Vec<String> = Vec::new();
    let opts = RunOptions {
        slot: slot.or(opts.slot),
        rotate: !sticky,
        ..opts
    };
    let mut slots_used: Vec<usize> = Vec::new();
    let mut reviews = Vec::new();
    let mut provenance = Vec::new();
    let mut served: Option<Provenance> = None;
    let mut has_more = false;
    let mut fallback = None;
    let mut masked: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    // One call holds one identity for every page, while the site lets it.
    let mut call = crate::lease::Call::new(leases, None, opts.scope.clone());
    for page in first..first + pages {
        let mut params = args.clone();
        let url = at.take();
        match &url {
            Some(u) => {
                params.insert(web::URL_PARAM.into(), json!(u));
                seen.push(u.clone());
            }
            None => {
                params.insert("item".into(), json!(item_id));
                params.insert("page".into(), json!(page));
            }
        }
        let bound = op.bind(params)?;
        let r = match cascade::run(&mut call, &strategy, op, &bound, &opts).await {
            Ok(r) => r,
            // A later page a shop's link led to failed: the pages read stand.
            Err(e) if linked && page > first => {
                let at = url.unwrap_or_default();
                warnings.push(format!("page {page} ({at}) was not read: {}", e.message()));
                has_more = true;
                break;
            }
            Err(e) => return Err(e),
        };
        has_more = r.extracted.has_more;
        if linked {
            // On to the page it links to next: on the same site (the same
            // routing key), never back to one read.
            at = (r.extracted.next_url.clone())
                .filter(|n| !seen.contains(n))
                .filter(|n| {
                    url::Url::parse(n)
                        .ok()
                        .and_then(|u| leases.site_key(&u))
                        .is_some_and(|k| k == strategy.name())
                });
            has_more = at.is_some();
        }
        let source = (r.extracted.items.first())
            .and_then(|i| i.get("source"))
            .cloned();
        served = Some(Provenance::of(&r).after(served));
        if !slots_used.contains(&r.slot) {
            slots_used.push(r.slot);
        }
        let mut this = json!({
            "page": page, "count": r.extracted.items.len(), "slot": r.slot, "tier": r.tier,
            "trial": r.trial, "attempts": r.attempts, "requests": r.requests,
        });
        if let Some(u) = url {
            this["url"] = json!(u);
        }
        if let Some(s) = source {
            this["source"] = s;
        }
        provenance.push(this);
        opts.report(|| {
            format!(
                "page {page}: {} reviews (slot {}, tier {})",
                r.extracted.items.len(),
                r.slot,
                r.tier
            )
        });
        merge(&mut masked, r.masked);
        merge(&mut warnings, r.warnings);
        reviews.extend(r.extracted.items.into_iter().map(Value::Object));
        // The fallback (say, a product page's top reviews) has no pages.
        if let Some(f) = r.fallback {
            fallback = Some(f);
            has_more = false;
        }
        if !has_more {
            break;
        }
    }
    let done = Done {
        strategy: strategy.as_ref(),
        item_id,
        reviews,
        has_more,
        masked,
        fallback,
        warnings,
        slots_used,
    };
    let mut out = done.into_map();
    out.insert("pages".into(), Value::Array(provenance));
    Ok(Output {
        body: Value::Object(out),
        provenance: served,
        text: None,
    })
}

/// What the pages gave, for the result.
struct Done<'a> {
    strategy: &'a dyn Strategy,
    item_id: String,
    reviews: Vec<Value>,
    has_more: bool,
    masked: Vec<String>,
    fallback: Option<cascade::Fallback>,
    warnings: Vec<String>,
    slots_used: Vec<usize>,
}

impl Done<'_> {
    fn into_map(self) -> Map<String, Value> {
        let Done {
            strategy,
            item_id,
            reviews,
            has_more,
            mut masked,
            fallback,
            warnings,
            slots_used,
        } = self;
        // Moved into place: `json!` would copy every review through serde.
        let mut out = Map::new();
        out.insert("strategy".into(), json!(strategy.family()));
        if let Some(m) = strategy.marketplace() {
            out.insert("marketplace".into(), json!(m));
        }
        out.insert("item".into(), Value::String(item_id));
        out.insert("count".into(), json!(reviews.len()));
        out.insert("reviews".into(), Value::Array(reviews));
        out.insert("has_more".into(), Value::Bool(has_more));
        if !masked.is_empty() {
            masked.sort();
            out.insert("masked".into(), json!(masked));
        }
        if let Some(f) = fallback {
            out.insert("fallback".into(), json!(f));
        }
        if !warnings.is_empty() {
            out.insert("warnings".into(), json!(warnings));
        }
        // One identity served the whole call: say so once.
        if let [one] = slots_used[..] {
            out.insert("slot".into(), json!(one));
        }
        out
    }
}

/// The item id: `item` itself, or found in an item URL.
fn item_id(
    op: &crate::strategy::operation::Operation,
    item: &str,
    strategy: &str,
) -> Result<String> {
    if !item.contains("://") {
        return Ok(item.to_string());
    }
    op.item_id_from(item).ok_or_else(|| {
        invalid(format!(
            "no item id found in `{item}` for strategy `{strategy}`"
        ))
    })
}

/// The strategy its `item` (an id or an item URL), `strategy` and
/// `marketplace` pick, resolved as the run resolves them.
fn route(leases: &Leases, args: &Value) -> Option<super::Route> {
    let strategy = resolve(
        leases,
        args["strategy"].as_str(),
        args["item"].as_str()?,
        args["marketplace"].as_str(),
    )
    .ok()?;
    Some(super::spec::route_to(strategy.as_ref(), "reviews"))
}

/// The strategy (and marketplace) a call means: `name` on the `marketplace`
/// given or the one an item URL is on; without `name`, the URL's host.
fn resolve(
    leases: &Leases,
    name: Option<&str>,
    item: &str,
    marketplace: Option<&str>,
) -> Result<Arc<dyn Strategy>> {
    let url = item.contains("://").then_some(item);
    match name {
        Some(web::NAME) => return leases.generic_for(item, Trust::Structured),
        Some(n) => return leases.registry().pick(n, marketplace, url).map_err(invalid),
        None => {}
    }
    let url = url::Url::parse(item)
        .map_err(|_| invalid("give `strategy`, or an item URL whose host picks one"))?;
    let host = url.host_str().unwrap_or_default();
    let Some(found) = leases.registry().for_host(host).cloned() else {
        return leases.generic_for(item, Trust::Structured);
    };
    match marketplace {
        Some(_) => leases
            .registry()
            .pick(found.family(), marketplace, Some(item))
            .map_err(invalid),
        None => Ok(found),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_args_are_the_fields_of_args() {
        let schema = input_schema::<Args>();
        let mut fields: Vec<&str> = schema["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        fields.sort_unstable();
        let mut own = OWN_ARGS.to_vec();
        own.sort_unstable();
        assert_eq!(fields, own);
    }
}
