//! `get_reviews`: reviews of an item through its strategy's `reviews` operation,
//! one or several pages per call.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::pool::Pool;
use crate::strategy::Strategy;
use crate::tiers::{self, RunOptions};

/// At most this many pages per call.
pub const MAX_PAGES: u64 = 20;

/// Arguments: `item` (id or URL), `strategy` (optional with a URL), `page`
/// (default 1), `pages` (default 1), `slot`, plus the operation's own filters.
pub async fn run(pool: &Pool, args: Value, opts: RunOptions) -> Result<Value> {
    let mut args = super::object(args)?;
    let item: String = super::take(&mut args, "item")?
        .ok_or_else(|| bad("missing argument `item` (an item id or URL)"))?;
    let strategy_name: Option<String> = super::take(&mut args, "strategy")?;
    let first: u64 = super::take(&mut args, "page")?.unwrap_or(1).max(1);
    let pages: u64 = super::take(&mut args, "pages")?.unwrap_or(1);
    if pages == 0 || pages > MAX_PAGES {
        return Err(bad(&format!(
            "argument `pages` must be between 1 and {MAX_PAGES}"
        )));
    }
    let slot: Option<usize> = super::take(&mut args, "slot")?;
    let strategy = resolve(pool, strategy_name.as_deref(), &item)?;
    let op = strategy.operations().get("reviews").ok_or_else(|| {
        bad(&format!(
            "strategy `{}` has no `reviews` operation",
            strategy.name()
        ))
    })?;
    let item_id = if item.contains("://") {
        op.item_id_from(&item).ok_or_else(|| {
            bad(&format!(
                "no item id found in `{item}` for strategy `{}`",
                strategy.name()
            ))
        })?
    } else {
        item.clone()
    };
    let opts = RunOptions {
        slot: slot.or(opts.slot),
        ..opts
    };
    let mut reviews = Vec::new();
    let mut provenance = Vec::new();
    let mut has_more = false;
    for page in first..first + pages {
        let mut params = args.clone();
        params.insert("item".into(), json!(item_id));
        params.insert("page".into(), json!(page));
        let bound = op.bind(params)?;
        let r = tiers::run(pool, &strategy, op, &bound, &opts).await?;
        has_more = r.extracted.has_more;
        provenance.push(json!({
            "page": page, "count": r.extracted.items.len(), "slot": r.slot, "tier": r.tier,
            "degraded": r.degraded, "attempts": r.attempts,
        }));
        opts.report(|| {
            format!(
                "page {page}: {} reviews (slot {}, tier {})",
                r.extracted.items.len(),
                r.slot,
                r.tier
            )
        });
        reviews.extend(r.extracted.items.into_iter().map(Value::Object));
        if !has_more {
            break;
        }
    }
    // Moved into place: `json!` would copy every review through serde.
    let mut out = serde_json::Map::new();
    out.insert("strategy".into(), json!(strategy.name()));
    out.insert("item".into(), Value::String(item_id));
    out.insert("count".into(), json!(reviews.len()));
    out.insert("reviews".into(), Value::Array(reviews));
    out.insert("has_more".into(), Value::Bool(has_more));
    out.insert("pages".into(), Value::Array(provenance));
    Ok(Value::Object(out))
}

fn resolve(pool: &Pool, name: Option<&str>, item: &str) -> Result<Arc<dyn Strategy>> {
    if let Some(n) = name {
        return pool
            .registry()
            .get(n)
            .cloned()
            .ok_or_else(|| bad(&format!("unknown strategy `{n}`")));
    }
    let url = url::Url::parse(item)
        .map_err(|_| bad("give `strategy`, or an item URL whose host picks one"))?;
    let host = url.host_str().unwrap_or_default();
    pool.registry()
        .for_host(host)
        .cloned()
        .ok_or_else(|| Error::refused(format!("no strategy covers host `{host}`")).retryable(false))
}

fn bad(msg: &str) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg.to_string()).retryable(false)
}
