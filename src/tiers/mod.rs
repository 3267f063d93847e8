//! The cascade: run one operation through tier 1 → 2 → 3 on a slot, remembering
//! which tiers a (slot, strategy) saw hard-blocked, moving to another slot within
//! the retry budget, and recording every attempt.
//!
//! - A tier that hard-blocked this (slot, strategy) within `tier_cooldown_secs` is
//!   skipped; after that the cheaper tier is probed again.
//! - A challenge jumps straight to tier 3 on the same slot.
//! - A hard block on every tier tried on a slot is one breaker failure; the call
//!   moves on to another slot after a full-jitter backoff.
//! - Network errors, timeouts and 5xx move on to another slot, no breaker failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::browser::BrowserRequest;
use crate::error::{Error, ErrorKind, Result};
use crate::http::{FetchRequest, RequestKind};
use crate::pool::Pool;
use crate::strategy::extract::Extracted;
use crate::strategy::operation::{Operation, Tier, render, render_json};
use crate::strategy::{Body, Outcome, Strategy};

/// One tier tried on one slot.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub slot: usize,
    pub tier: u8,
    /// `ok`, `empty`, `hard_block`, `challenge`, `failed`, or `skipped`.
    pub outcome: String,
    pub status: Option<u16>,
    pub ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A successful run.
#[derive(Debug, Clone, Serialize)]
pub struct CascadeResult {
    pub slot: usize,
    pub tier: u8,
    pub degraded: bool,
    pub attempts: Vec<Attempt>,
    #[serde(skip)]
    pub extracted: Extracted,
    pub status: u16,
    pub final_url: String,
}

/// Limits a caller may put on one run, and where progress goes.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Only these tiers (testing and debugging); `None`: all.
    pub only_tiers: Option<Vec<u8>>,
    /// Use this slot only.
    pub slot: Option<usize>,
    /// Told about every tier attempt and every page (MCP progress notifications).
    pub progress: Option<Progress>,
}

impl RunOptions {
    /// Tell the progress listener, if any (the message is only made for one).
    pub fn report(&self, message: impl FnOnce() -> String) {
        if let Some(p) = &self.progress {
            (p.0)(message());
        }
    }
}

/// A progress listener: called with one human-readable line per step.
#[derive(Clone)]
pub struct Progress(pub Arc<dyn Fn(String) + Send + Sync>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

enum TierEnd {
    /// Items, or a page proven genuinely empty (`Extracted::empty`).
    Done(Extracted, u16, String),
    HardBlock,
    Challenge,
    /// Try the next tier on this slot (e.g. extraction found nothing usable).
    NextTier,
    /// Give up on this slot (network, timeout, 5xx).
    NextSlot,
}

/// Run `op` of `strategy` with already bound `args`.
pub async fn run(
    pool: &Pool,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
) -> Result<CascadeResult> {
    let cfg = pool.cascade_config();
    let cooldown = Duration::from_secs(cfg.tier_cooldown_secs);
    let mut vars = args.clone();
    if let Some(b) = &strategy.base_url() {
        vars.insert("base_url".into(), Value::String(b.to_string()));
    }
    let tiers: Vec<&Tier> = op
        .tiers
        .iter()
        .filter(|t| {
            opts.only_tiers
                .as_ref()
                .is_none_or(|only| only.contains(&t.number))
        })
        .collect();
    if tiers.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("operation `{}` has none of the requested tiers", op.name),
        )
        .retryable(false));
    }
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut tried: Vec<usize> = Vec::new();
    let budget = cfg.retry_slots.max(1);
    for round in 0..budget {
        if round > 0 {
            let cap = cfg
                .backoff_max_ms
                .min(cfg.backoff_base_ms.saturating_mul(1 << round.min(16)));
            if cap > 0 {
                tokio::time::sleep(Duration::from_millis(rand::random_range(0..cap))).await;
            }
        }
        let lease = pool
            .next_slot_avoiding(strategy.name(), opts.slot, &tried)
            .await?;
        let slot_id = lease.slot();
        let degraded = lease.degraded();
        tried.push(slot_id);
        // Skip tiers this identity was recently blocked on, unless that leaves none.
        let fresh: Vec<&Tier> = tiers
            .iter()
            .copied()
            .filter(|t| !pool.tier_blocked_recently(slot_id, strategy.name(), t.number, cooldown))
            .collect();
        let plan = if fresh.is_empty() {
            tiers.clone()
        } else {
            fresh
        };
        for t in tiers
            .iter()
            .filter(|t| !plan.iter().any(|p| p.number == t.number))
        {
            attempts.push(Attempt {
                slot: slot_id,
                tier: t.number,
                outcome: "skipped".into(),
                status: None,
                ms: 0,
                error: Some("hard-blocked recently on this slot".into()),
            });
        }
        let (mut tried_tiers, mut blocks, mut browser_only) = (0usize, 0usize, false);
        let mut give_up_slot = false;
        for tier in &plan {
            if browser_only && tier.number != 3 {
                continue;
            }
            tried_tiers += 1;
            let started = Instant::now();
            let (end, status, error) =
                run_tier(pool, slot_id, strategy.as_ref(), op, tier, &vars).await;
            let outcome = match &end {
                TierEnd::Done(ex, ..) if ex.items.is_empty() => "empty",
                TierEnd::Done(..) => "ok",
                TierEnd::HardBlock => "hard_block",
                TierEnd::Challenge => "challenge",
                TierEnd::NextTier | TierEnd::NextSlot => "failed",
            };
            let attempt = Attempt {
                slot: slot_id,
                tier: tier.number,
                outcome: outcome.into(),
                status,
                ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                error,
            };
            crate::pool::record_request(
                strategy.name(),
                attempt.tier,
                &attempt.outcome,
                started.elapsed(),
            );
            opts.report(|| {
                format!(
                    "{} of {}: slot {} tier {}: {}{}",
                    op.name,
                    strategy.name(),
                    attempt.slot,
                    attempt.tier,
                    attempt.outcome,
                    attempt
                        .status
                        .map(|s| format!(" (HTTP {s})"))
                        .unwrap_or_default()
                )
            });
            attempts.push(attempt);
            match end {
                TierEnd::Done(extracted, status, final_url) => {
                    // A genuinely empty page is a result too, and changes no breaker.
                    let outcome = if extracted.items.is_empty() {
                        Outcome::Empty
                    } else {
                        Outcome::Ok
                    };
                    lease.finish(outcome, None);
                    return Ok(CascadeResult {
                        slot: slot_id,
                        tier: tier.number,
                        degraded,
                        attempts,
                        extracted,
                        status,
                        final_url,
                    });
                }
                TierEnd::HardBlock => {
                    blocks += 1;
                    pool.mark_tier_blocked(slot_id, strategy.name(), tier.number);
                }
                TierEnd::Challenge => browser_only = true,
                TierEnd::NextTier => {}
                TierEnd::NextSlot => {
                    give_up_slot = true;
                    break;
                }
            }
        }
        let all_blocked = !give_up_slot && tried_tiers > 0 && blocks == tried_tiers;
        lease.finish(
            if all_blocked {
                Outcome::HardBlock
            } else {
                Outcome::Failed
            },
            None,
        );
    }
    let list: Vec<String> = attempts
        .iter()
        .map(|a| {
            let status = a.status.map(|s| format!(" ({s})")).unwrap_or_default();
            format!("slot {} tier {}: {}{status}", a.slot, a.tier, a.outcome)
        })
        .collect();
    Err(Error::new(
        ErrorKind::Refused,
        format!(
            "`{}` of `{}` failed on {} slot(s): {}",
            op.name,
            strategy.name(),
            tried.len(),
            list.join("; ")
        ),
    )
    .retryable(false))
}

async fn run_tier(
    pool: &Pool,
    slot_id: usize,
    strategy: &dyn Strategy,
    op: &Operation,
    tier: &Tier,
    vars: &Map<String, Value>,
) -> (TierEnd, Option<u16>, Option<String>) {
    let Some(slot) = pool.slot(slot_id) else {
        return (TierEnd::NextSlot, None, Some("no such slot".into()));
    };
    let url_text = render(&tier.url, vars, true);
    let url = match url::Url::parse(&url_text) {
        Ok(u) => u,
        Err(e) => {
            return (
                TierEnd::NextTier,
                None,
                Some(format!("bad URL `{url_text}` ({e})")),
            );
        }
    };
    let (status, final_url, body, content_type, headers_ok) = if tier.number == 3 {
        let probe = |html: &str, url: &str, status: u16| strategy.page_state(html, url, status);
        let req = BrowserRequest {
            url: url.to_string(),
            wait_for: tier.wait_for.clone(),
            cookie_domain: Some(strategy.cookie_domain().to_string()),
        };
        let r = slot.browse(&req, &probe).await;
        slot.save_jar().await;
        match r {
            Ok(p) => {
                let final_url = url::Url::parse(&p.final_url).unwrap_or(url);
                let html = bytes::Bytes::from(p.html);
                (
                    p.status,
                    final_url,
                    html,
                    Some("text/html".to_string()),
                    p.wait_for_met,
                )
            }
            Err(e) => return (TierEnd::NextSlot, None, Some(e.to_string())),
        }
    } else {
        let mut req = FetchRequest::get(url.clone());
        req.method = tier.method.clone();
        if tier.number == 1 {
            // The page's own AJAX call: a calibrated slot sends its browser's
            // XHR headers, with the item's page (tier 2) as the referer.
            req.kind = RequestKind::Xhr;
            req.referer = op
                .tiers
                .iter()
                .find(|t| t.number == 2)
                .and_then(|t| url::Url::parse(&render(&t.url, vars, true)).ok());
        }
        for (k, v) in &tier.headers {
            req.headers.push((k.clone(), v.clone()));
        }
        if let Some(form) = &tier.form {
            let body: String = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(
                    form.iter()
                        .map(|(k, v)| (k.clone(), render(v, vars, false))),
                )
                .finish();
            req.headers.push((
                "content-type".into(),
                "application/x-www-form-urlencoded".into(),
            ));
            req.body = Some(body.into());
        } else if let Some(json) = &tier.json {
            req.headers
                .push(("content-type".into(), "application/json".into()));
            req.body = Some(render_json(json, vars).to_string().into());
        }
        match slot.fetch(req).await {
            Ok(r) => {
                let content_type = r.content_type().map(str::to_string);
                (r.status, r.final_url, r.body, content_type, true)
            }
            Err(e) => return (TierEnd::NextSlot, None, Some(e.to_string())),
        }
    };
    let text = crate::http::utf8_text(&body);
    judge(
        strategy,
        op,
        tier,
        status,
        final_url,
        &Body::new(&text, content_type.as_deref()),
        headers_ok,
    )
}

/// Classify a tier's response and extract its items, from one parse of it.
fn judge(
    strategy: &dyn Strategy,
    op: &Operation,
    tier: &Tier,
    status: u16,
    final_url: url::Url,
    body: &Body<'_>,
    headers_ok: bool,
) -> (TierEnd, Option<u16>, Option<String>) {
    let outcome = strategy.classify(status, final_url.as_str(), body);
    let status_some = Some(status);
    match outcome {
        Outcome::HardBlock => (TierEnd::HardBlock, status_some, None),
        Outcome::Challenge => (TierEnd::Challenge, status_some, None),
        Outcome::Failed => (TierEnd::NextSlot, status_some, None),
        Outcome::Empty => (
            TierEnd::Done(
                Extracted {
                    empty: true,
                    ..Default::default()
                },
                status,
                final_url.into(),
            ),
            status_some,
            None,
        ),
        Outcome::Ok if !headers_ok => (
            TierEnd::NextTier,
            status_some,
            Some(format!(
                "`{}` did not appear",
                tier.wait_for.clone().unwrap_or_default()
            )),
        ),
        Outcome::Ok => match strategy.extract(op, tier, body, &final_url) {
            Ok(ex) => (
                TierEnd::Done(ex, status, final_url.into()),
                status_some,
                None,
            ),
            Err(e) => (TierEnd::NextTier, status_some, Some(e)),
        },
    }
}
