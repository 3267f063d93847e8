//! One page through the cascade (`scrape`, a crawl's pages): tier 2 over
//! HTTP, then tier 3 in the same slot's browser when the answer needs it
//! (a challenge, or content without what the caller waits for; never a
//! block), across
//! slots like an operation (`slots.rs`): slot retry, tier memory (a tier
//! that tier-blocked this slot lately is skipped), the call's request
//! budget, stickiness, and the breaker's verdict per slot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::slots::{Work, on_slots};
use super::types::{failed_on, skipped};
use super::{Attempt, RunOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::{BrowseOptions, Call, Fetched, Lease};
use crate::request::FetchRequest;
use crate::strategy::{Body, Outcome};

/// Which tiers a page may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageMode {
    /// Tier 2, and tier 3 when the answer needs the browser.
    Auto,
    /// Tier 2 only.
    Http,
    /// Tier 3 only.
    Browser,
}

/// What to fetch and how.
#[derive(Debug, Clone)]
pub struct PagePlan {
    pub url: url::Url,
    /// Extra request headers for tier 2.
    pub headers: Vec<(String, String)>,
    pub browse: BrowseOptions,
    pub mode: PageMode,
}

/// A page the cascade fetched, and every tier it tried on the way.
#[derive(Debug)]
pub struct Paged {
    pub fetched: Fetched,
    pub attempts: Vec<Attempt>,
}

/// Fetch one page on `call`'s identity through the cascade.
pub async fn page(call: &mut Call, plan: &PagePlan, opts: &RunOptions) -> Result<Paged> {
    let leases = call.leases().clone();
    let name = match leases.strategy_for(&plan.url) {
        Some(s) => s.name().to_string(),
        None => {
            // A scheme or host the guard refuses, said in its words.
            leases.guard().check_static(&plan.url)?;
            let host = (plan.url.host_str()).ok_or_else(|| Error::refused("URL has no host"))?;
            crate::routing::web_key(host)
        }
    };
    let cfg = leases.config().cascade;
    let run = PageRun {
        name,
        plan,
        opts,
        budget: cfg.max_requests_per_call.max(1),
        spent: AtomicUsize::new(0),
    };
    on_slots(&run, call, cfg).await
}

struct PageRun<'a> {
    name: String,
    plan: &'a PagePlan,
    opts: &'a RunOptions,
    budget: usize,
    spent: AtomicUsize,
}

/// How one tier ended on the slot.
enum Step {
    Done(Box<Fetched>),
    /// On to the browser, same slot.
    Browser,
    /// The slot is done with this verdict.
    Slot(Outcome),
}

impl PageRun<'_> {
    fn attempt(
        &self,
        lease: &Lease,
        tier: u8,
        started: Instant,
        f: Result<&Fetched, &Error>,
    ) -> Attempt {
        let (outcome, status, error, detail, refused) = match f {
            Ok(f) => (
                f.outcome,
                Some(f.response.status),
                None,
                f.detail.clone(),
                f.refused.clone(),
            ),
            Err(e) => (Outcome::Failed, None, Some(e.to_string()), None, Vec::new()),
        };
        let a = Attempt {
            slot: lease.slot(),
            tier,
            outcome,
            status,
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            error,
            detail,
            refused,
        };
        self.opts.report(|| {
            format!(
                "slot {} via {}: {}{}{}",
                a.slot,
                if tier == 3 { "browser" } else { "http" },
                a.outcome.as_str(),
                a.status.map(|s| format!(" (HTTP {s})")).unwrap_or_default(),
                a.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )
        });
        a
    }

    /// Tier 2 on the lease's slot.
    async fn http(&self, lease: &Lease, attempts: &mut Vec<Attempt>) -> Result<Step> {
        let mut req = FetchRequest::get(self.plan.url.clone());
        req.headers = self.plan.headers.clone();
        let wait_for = self.plan.browse.wait_for.as_deref();
        // Whether the page needs the browser, judged from the body's one
        // parse: a challenge, or content without what the caller waits
        // for. Never on a half-open trial (one request), never in `http` mode.
        let may_escalate = self.plan.mode == PageMode::Auto && !lease.is_trial();
        let needs_browser = |f: &Fetched, body: &Body<'_>| {
            may_escalate
                && match f.outcome {
                    Outcome::Challenge => true,
                    Outcome::Ok | Outcome::Empty => {
                        wait_for.is_some_and(|sel| !selector_in(body, sel))
                    }
                    _ => false,
                }
        };
        let started = Instant::now();
        self.spent.fetch_add(1, Ordering::Relaxed);
        let (f, browser) = match lease.http(req, needs_browser).await {
            Ok(answer) => answer,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Refused | ErrorKind::Unavailable | ErrorKind::NotGranted
                ) =>
            {
                return Err(e);
            }
            Err(e) => {
                attempts.push(self.attempt(lease, 2, started, Err(&e)));
                return Ok(Step::Slot(Outcome::Failed));
            }
        };
        attempts.push(self.attempt(lease, 2, started, Ok(&f)));
        Ok(match f.outcome {
            _ if browser => Step::Browser,
            Outcome::Ok | Outcome::Empty => Step::Done(Box::new(f)),
            // No block takes a page to the browser (tier 3 is for
            // challenges); the slot's later pages skip tier 2 for a while.
            // Blocked on every tier tried: one breaker failure.
            Outcome::TierBlock => {
                lease.mark_tier_blocked(2, f.detail.as_deref());
                Step::Slot(Outcome::HardBlock)
            }
            other => Step::Slot(other),
        })
    }

    /// Tier 3 on the lease's slot; `http_blocked`: tier 2 was tier-blocked
    /// on it lately, so a block here too is one of the identity.
    async fn browser(
        &self,
        lease: &Lease,
        attempts: &mut Vec<Attempt>,
        http_blocked: bool,
    ) -> Result<std::result::Result<Fetched, Outcome>> {
        if lease.signing_in() {
            attempts.push(skipped(
                lease,
                3,
                "a person is signing this slot in (live view)",
            ));
            return Ok(Err(Outcome::Failed));
        }
        let started = Instant::now();
        self.spent.fetch_add(1, Ordering::Relaxed);
        let url = self.plan.url.clone();
        let f = match lease.browse_with(url, &self.plan.browse, |_, _| ()).await {
            Ok((f, ())) => f,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Refused | ErrorKind::Unavailable | ErrorKind::NotGranted
                ) =>
            {
                return Err(e);
            }
            Err(e) => {
                attempts.push(self.attempt(lease, 3, started, Err(&e)));
                return Ok(Err(Outcome::Failed));
            }
        };
        attempts.push(self.attempt(lease, 3, started, Ok(&f)));
        if let Some(sel) = f
            .wait_for_missed
            .as_deref()
            .filter(|_| !f.outcome.is_failure())
        {
            return Err(Error::new(
                ErrorKind::Timeout,
                format!("`{sel}` did not appear on {} in time", f.response.final_url),
            ));
        }
        Ok(match f.outcome {
            Outcome::Ok | Outcome::Empty => Ok(f),
            Outcome::TierBlock => {
                lease.mark_tier_blocked(3, f.detail.as_deref());
                // Blocked on every tier tried: one breaker failure.
                Err(if http_blocked {
                    Outcome::HardBlock
                } else {
                    Outcome::Failed
                })
            }
            other => Err(other),
        })
    }
}

impl Work for PageRun<'_> {
    type Done = Paged;

    fn name(&self) -> &str {
        &self.name
    }
    fn opts(&self) -> &RunOptions {
        self.opts
    }
    fn needs_login(&self) -> bool {
        false
    }
    fn spent(&self) -> usize {
        self.spent.load(Ordering::Relaxed)
    }
    fn budget(&self) -> usize {
        self.budget
    }

    async fn on_slot(
        &self,
        lease: Lease,
        attempts: &mut Vec<Attempt>,
    ) -> Result<Result<Paged, Outcome>> {
        let browser_only = self.plan.mode == PageMode::Browser
            || !self.plan.browse.actions.is_empty()
            || self.plan.browse.capture != Default::default();
        // Tier 2 tier-blocked this slot lately: straight to its browser.
        let skip_http = !browser_only && self.plan.mode == PageMode::Auto && lease.tier_blocked(2);
        if skip_http {
            attempts.push(skipped(
                &lease,
                2,
                "this tier was blocked lately on this slot",
            ));
        }
        let step = if browser_only || skip_http {
            Step::Browser
        } else {
            match self.http(&lease, attempts).await {
                Ok(s) => s,
                Err(e) => {
                    lease.finish(Outcome::Failed);
                    return Err(e);
                }
            }
        };
        let end = match step {
            Step::Done(f) => Ok(*f),
            Step::Slot(o) => Err(o),
            // The call is over: no breaker verdict.
            Step::Browser if self.spent() >= self.budget => Err(Outcome::Failed),
            Step::Browser => match self.browser(&lease, attempts, skip_http).await {
                Ok(end) => end,
                Err(e) => {
                    lease.finish(Outcome::Failed);
                    return Err(e);
                }
            },
        };
        lease.finish(match &end {
            Ok(f) => f.outcome,
            Err(o) => *o,
        });
        Ok(end.map(|fetched| Paged {
            fetched,
            attempts: std::mem::take(attempts),
        }))
    }

    fn exhausted(&self, tried: &[usize], attempts: &[Attempt]) -> Error {
        let what = format!("{} (`{}`)", self.plan.url, self.name);
        failed_on(&what, tried, attempts, self.spent(), self.budget)
    }
}

fn selector_in(body: &Body<'_>, selector: &str) -> bool {
    match crate::dom::selector::parse(selector) {
        Ok(sel) => body.html().select(&sel).next().is_some(),
        Err(_) => false,
    }
}
