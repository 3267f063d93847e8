//! A lease: permission to use one slot for one strategy, taken before the work,
//! moved into it, and released on drop (in-flight counts, half-open trials).
//! Its `fetch` / `fetch_browser` run one request on the slot and feed the outcome
//! back to the breaker.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Admission, Fetched, Inner, Verdict, Via};
use crate::error::{Error, ErrorKind, Result};
use crate::http::{FetchRequest, FetchResponse};
use crate::strategy::{self, Outcome};

/// Permission to use one slot for one strategy.
pub struct Lease {
    inner: Arc<Inner>,
    slot: usize,
    strategy: String,
    admission: Admission,
    degraded: bool,
    finished: bool,
}

impl Lease {
    pub(super) fn new(
        inner: Arc<Inner>,
        slot: usize,
        strategy: &str,
        admission: Admission,
        degraded: bool,
    ) -> Self {
        Lease {
            inner,
            slot,
            strategy: strategy.to_string(),
            admission,
            degraded,
            finished: false,
        }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("slot", &self.slot)
            .field("strategy", &self.strategy)
            .field("trial", &self.admission.trial)
            .field("degraded", &self.degraded)
            .finish()
    }
}

impl Lease {
    pub fn slot(&self) -> usize {
        self.slot
    }
    pub fn strategy(&self) -> &str {
        &self.strategy
    }
    /// Every breaker was open; this slot is the one that reopens first.
    pub fn degraded(&self) -> bool {
        self.degraded
    }
    /// This request is its breaker's half-open trial.
    pub fn is_trial(&self) -> bool {
        self.admission.trial
    }

    /// Record the outcome of the work done under this lease.
    pub fn finish(mut self, outcome: Outcome, retry_after: Option<Duration>) {
        // An empty page proves little about the identity either way (a captcha'd
        // identity can still be served an empty listing), so it leaves the breaker as it
        // is, like a network failure; only content closes, only hard blocks count.
        let verdict = match outcome {
            Outcome::Ok => Verdict::Success,
            Outcome::HardBlock => Verdict::HardBlock,
            Outcome::Empty | Outcome::Challenge | Outcome::Failed => Verdict::Neutral,
        };
        let now = Instant::now();
        let cfg = self.inner.breaker;
        let mut router = self.inner.router.lock();
        let site = router.site(self.slot, &self.strategy, cfg);
        let before = site.breaker.state(now);
        site.breaker.record(self.admission, verdict, now);
        let after = site.breaker.state(now);
        let failures = site.breaker.failures();
        match verdict {
            Verdict::HardBlock => site.hard_blocks += 1,
            Verdict::Success => site.successes += 1,
            Verdict::Neutral => {}
        }
        if let Some(d) = retry_after {
            site.retry_after_until = Some(now + d);
        }
        drop(router);
        if before != after {
            self.inner.events.emit(
                "breaker",
                Some(self.slot),
                Some(&self.strategy),
                serde_json::json!({"from": before.as_str(), "to": after.as_str(), "failures": failures}),
            );
        }
        self.finished = true;
    }

    /// Fetch `req` on this lease's slot and record the outcome.
    pub async fn fetch(self, req: FetchRequest) -> Result<Fetched> {
        let slot = self.inner.slots[self.slot].clone();
        let strategy = self.inner.registry.read().get(&self.strategy).cloned();
        let started = std::time::Instant::now();
        match slot.fetch(req).await {
            Ok(response) => {
                let outcome = {
                    let text = response.text_ref();
                    let body = strategy::Body::new(&text, response.content_type());
                    let (status, url) = (response.status, response.final_url.as_str());
                    match &strategy {
                        Some(s) => s.classify(status, url, &body),
                        None => {
                            strategy::classify(&strategy::Markers::generic(), status, url, &body)
                        }
                    }
                };
                let retry_after = if matches!(response.status, 429 | 503) {
                    strategy::outcome::retry_after(response.retry_after())
                } else {
                    None
                };
                let (slot_id, degraded, name) = (self.slot, self.degraded, self.strategy.clone());
                super::record_request(&name, 2, outcome.as_str(), started.elapsed());
                self.finish(outcome, retry_after);
                Ok(Fetched {
                    via: Via::Http,
                    slot: slot_id,
                    strategy: name,
                    degraded,
                    outcome,
                    response,
                })
            }
            Err(e) => {
                super::record_request(&self.strategy, 2, "failed", started.elapsed());
                self.finish(Outcome::Failed, None);
                Err(e)
            }
        }
    }
}

impl Lease {
    /// Fetch `url` in this lease's slot's browser and record the outcome.
    pub async fn fetch_browser(self, url: url::Url, wait_for: Option<String>) -> Result<Fetched> {
        if let Err(e) = self.inner.guard.check(&url).await {
            self.finish(Outcome::Failed, None);
            return Err(e);
        }
        let slot = self.inner.slots[self.slot].clone();
        let strategy = self.inner.registry.read().get(&self.strategy).cloned();
        let markers = strategy
            .as_ref()
            .map(|s| s.markers().clone())
            .unwrap_or_else(strategy::Markers::generic);
        let cookie_domain = strategy
            .as_ref()
            .map(|s| s.cookie_domain().to_string())
            .or_else(|| url.host_str().map(str::to_string));
        let req = crate::browser::BrowserRequest {
            url: url.to_string(),
            wait_for: wait_for.clone(),
            cookie_domain,
        };
        let probe = |html: &str, url: &str, status: u16| match &strategy {
            Some(s) => s.page_state(html, url, status),
            None => markers.page_state(html, url, status),
        };
        let started = std::time::Instant::now();
        let result = slot.browse(&req, &probe).await;
        slot.save_jar().await;
        let page = match result {
            Ok(p) => p,
            Err(e) => {
                super::record_request(&self.strategy, 3, "failed", started.elapsed());
                self.finish(Outcome::Failed, None);
                return Err(e);
            }
        };
        // The browser follows redirects itself: refuse to hand back what it ended on
        // if the guard would not have let us go there.
        if let Ok(final_url) = url::Url::parse(&page.final_url)
            && final_url.scheme() != "about"
            && let Err(e) = self.inner.guard.check(&final_url).await
        {
            self.finish(Outcome::Failed, None);
            return Err(Error::refused(format!(
                "the browser was redirected to {final_url}: {}",
                e.message()
            ))
            .retryable(false));
        }
        let outcome = {
            let body = strategy::Body::html_page(&page.html);
            match &strategy {
                Some(s) => s.classify(page.status, &page.final_url, &body),
                None => strategy::classify(&markers, page.status, &page.final_url, &body),
            }
        };
        super::record_request(&self.strategy, 3, outcome.as_str(), started.elapsed());
        if !page.wait_for_met && !outcome.is_failure() {
            self.finish(Outcome::Failed, None);
            return Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "`{}` did not appear on {} in time",
                    wait_for.unwrap_or_default(),
                    page.final_url
                ),
            ));
        }
        let mut headers = http::HeaderMap::new();
        for (k, v) in &page.headers {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.as_bytes()),
                http::HeaderValue::from_str(v),
            ) {
                headers.append(k, v);
            }
        }
        let response = FetchResponse {
            status: page.status,
            final_url: url::Url::parse(&page.final_url).unwrap_or(url),
            headers,
            body: bytes::Bytes::from(page.html),
            cookies_set: page.cookies.iter().map(|c| c.name.clone()).collect(),
            elapsed: page.elapsed,
            http_version: "browser".into(),
        };
        let (slot_id, degraded, name) = (self.slot, self.degraded, self.strategy.clone());
        self.finish(outcome, None);
        Ok(Fetched {
            via: Via::Browser,
            slot: slot_id,
            strategy: name,
            degraded,
            outcome,
            response,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let cfg = self.inner.breaker;
        let mut router = self.inner.router.lock();
        let site = router.site(self.slot, &self.strategy, cfg);
        site.in_flight = site.in_flight.saturating_sub(1);
        if !self.finished {
            site.breaker.release(self.admission);
        }
        if let Some(n) = router.in_flight.get_mut(&self.strategy) {
            *n = n.saturating_sub(1);
        }
        drop(router);
        self.inner.released.notify_waiters();
    }
}
