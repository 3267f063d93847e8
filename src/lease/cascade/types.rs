//! What a cascade run takes (its options, where progress goes) and gives back
//! (the result and every attempt).

use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, ErrorKind};
use crate::lease::Lease;
use crate::strategy::Outcome;
use crate::strategy::extract::Extracted;

/// One tier tried on one slot.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub slot: usize,
    pub tier: u8,
    /// `ok`, `empty`, `hard_block`, `tier_block`, `rate_limited`,
    /// `challenge`, `failed`, or `skipped`.
    pub outcome: Outcome,
    pub status: Option<u16>,
    pub ms: u64,
    /// What went wrong: the network error, the timeout, the extraction's complaint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the site's answer was judged so: the marker that matched
    /// (`[block] body has "validateCaptcha"`), or the status of a failed answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What the page asked for and the browser's egress refused
    /// (`host:port: reason`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// A successful run.
#[derive(Debug, Clone, Serialize)]
pub struct CascadeResult {
    pub slot: usize,
    pub tier: u8,
    /// This call was its slot's half-open trial (one request).
    pub trial: bool,
    pub attempts: Vec<Attempt>,
    /// Requests this call sent to the site (`cascade.max_requests_per_call`).
    pub requests: usize,
    #[serde(skip)]
    pub extracted: Extracted,
    pub status: u16,
    pub final_url: String,
    /// The operation's `fallback_operation` ran instead (no signed-in slot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// Fields masked as personal data for this caller (`pii = true`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<String>,
    /// Fields or the operation drifting (the site's markup may have
    /// changed), and the operation's `expect` rules that did not hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Limits a caller may put on one run, and where progress goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Only these tiers (testing and debugging); `None`: all.
    pub only_tiers: Option<Vec<u8>>,
    /// Use this slot only.
    pub slot: Option<usize>,
    /// The MCP session: its consecutive calls for one strategy stay on the
    /// slot that served the last one, like a call's pages.
    pub session: Option<String>,
    /// Round-robin, no stickiness (the tools' `sticky: false`).
    pub rotate: bool,
    /// Told about every tier attempt and every page (MCP progress notifications).
    pub progress: Option<Progress>,
    /// The caller's key (its name), for what is bound to it (browser
    /// sessions, crawl jobs).
    pub caller: Option<String>,
    /// The caller's role: an admin sees every key's crawl jobs.
    pub caller_role: Option<crate::config::Role>,
    /// The caller is below `security.pii_role`: `pii = true` fields are
    /// masked with this.
    pub mask_pii: Option<crate::strategy::pii::PiiMask>,
    /// Keep every answer the run gets (`idpool strategy record`).
    pub record: Option<Recorder>,
    /// The caller's grants for this tool: the identities it may use
    /// (`None`: any).
    pub scope: Option<Arc<crate::routing::Scope>>,
    /// The caller's answer budget for tools that cut their own answers
    /// (`scrape`, `crawl`, the browser's snapshots) when the call sets no
    /// `max_chars`: `server.max_answer_chars`.
    pub answer_chars: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            only_tiers: None,
            slot: None,
            session: None,
            rotate: false,
            progress: None,
            caller: None,
            caller_role: None,
            mask_pii: None,
            record: None,
            scope: None,
            answer_chars: crate::config::DEFAULT_MAX_ANSWER_CHARS,
        }
    }
}

/// Every answer a run got, in order, kept for `idpool strategy record`.
#[derive(Debug, Clone, Default)]
pub struct Recorder(pub Arc<parking_lot::Mutex<Vec<Recorded>>>);

/// One answer as a fixture keeps it (headers without `set-cookie`).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub tier: u8,
    pub status: u16,
    pub final_url: String,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
}

impl Recorder {
    pub(super) fn keep(&self, tier: u8, f: &crate::lease::Fetched) {
        let r = &f.response;
        let headers = r
            .headers
            .iter()
            .filter(|(k, _)| *k != http::header::SET_COOKIE)
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        self.0.lock().push(Recorded {
            tier,
            status: r.status,
            final_url: r.final_url.to_string(),
            headers,
            body: r.body.clone(),
        });
    }

    /// The last answer (the one the run ended on).
    pub fn last(&self) -> Option<Recorded> {
        self.0.lock().last().cloned()
    }
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

/// The result came from the fallback operation.
#[derive(Debug, Clone, Serialize)]
pub struct Fallback {
    /// The operation that ran instead.
    pub operation: String,
    /// The one asked for.
    pub instead_of: String,
    /// Why: no signed-in identity.
    pub reason: String,
}

/// A tier not tried on this slot, and why.
pub(super) fn skipped(lease: &Lease, tier: u8, why: &str) -> Attempt {
    Attempt {
        slot: lease.slot(),
        tier,
        outcome: Outcome::Skipped,
        status: None,
        ms: 0,
        error: None,
        detail: Some(why.into()),
        refused: Vec::new(),
    }
}

/// `what` failed on every slot tried: the error lists each attempt.
pub(super) fn failed_on(
    what: &str,
    tried: &[usize],
    attempts: &[Attempt],
    spent: usize,
    budget: usize,
) -> Error {
    let list: Vec<String> = attempts
        .iter()
        .map(|a| {
            let status = a.status.map(|s| format!(" ({s})")).unwrap_or_default();
            let why = match (&a.error, &a.detail) {
                (Some(e), _) => format!(": {e}"),
                (None, Some(d)) if a.outcome != Outcome::Skipped => format!(", {d}"),
                _ => String::new(),
            };
            format!(
                "slot {} tier {}: {}{status}{why}",
                a.slot,
                a.tier,
                a.outcome.as_str()
            )
        })
        .collect();
    let spent = if spent >= budget {
        format!(" (its budget of {budget} requests spent)")
    } else {
        String::new()
    };
    Error::new(
        ErrorKind::Refused,
        format!(
            "{what} failed on {} slot(s){spent}: {}",
            tried.len(),
            list.join("; ")
        ),
    )
    .retryable(false)
}
