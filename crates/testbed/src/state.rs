//! The testbed's switchable modes and its request counters.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Per-identity rate limit: more than `max` requests in `window_secs` earns a
/// captcha page for `block_secs`, with `status` (200: a page that only says
/// so) and, when set, `Retry-After: retry_after`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub max: u32,
    pub window_secs: u64,
    #[serde(default = "default_block")]
    pub block_secs: u64,
    #[serde(default = "default_limit_status")]
    pub status: u16,
    #[serde(default)]
    pub retry_after: Option<u64>,
}

impl RateLimit {
    /// More than `max` requests in `window_secs` earn a captcha page (status
    /// 200, no `Retry-After`) for `block_secs`.
    pub fn captcha(max: u32, window_secs: u64, block_secs: u64) -> Self {
        RateLimit {
            max,
            window_secs,
            block_secs,
            status: default_limit_status(),
            retry_after: None,
        }
    }
}

fn default_block() -> u64 {
    60
}

fn default_limit_status() -> u16 {
    200
}

/// Site-wide limit: past `max_per_sec` shop requests within one second, from
/// anyone, the rest of that second is answered 429 (with `Retry-After:
/// retry_after` when set).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SiteLimit {
    pub max_per_sec: u32,
    #[serde(default)]
    pub retry_after: Option<u64>,
}

/// How a limited request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub status: u16,
    pub retry_after: Option<u64>,
}

/// A fault to inject into shop responses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub kind: FaultKind,
    /// Only paths starting with this (default: every shop path).
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only the next N matching requests (default: until switched off).
    #[serde(default)]
    pub remaining: Option<u32>,
    /// `slow`: delay before answering.
    #[serde(default = "default_delay")]
    pub delay_ms: u64,
    /// `error`: the status to answer with.
    #[serde(default = "default_status")]
    pub status: u16,
    /// `huge`: body size in MiB.
    #[serde(default = "default_mb")]
    pub size_mb: usize,
}

impl Fault {
    /// A fault of `kind` on paths under `path_prefix` (all when `None`),
    /// until switched off; `error` faults answer `status`.
    pub fn of(kind: FaultKind, path_prefix: Option<&str>, status: u16) -> Fault {
        Fault {
            kind,
            path_prefix: path_prefix.map(str::to_string),
            remaining: None,
            delay_ms: 0,
            status,
            size_mb: 0,
        }
    }
}

fn default_delay() -> u64 {
    5000
}
fn default_status() -> u16 {
    503
}
fn default_mb() -> usize {
    20
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Slow,
    Error,
    Reset,
    Truncate,
    Huge,
    RedirectLoop,
}

/// Everything the control endpoint can switch.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Modes {
    /// Block non-browser TLS fingerprints.
    pub gate: bool,
    /// Require the JS challenge's clearance cookie.
    pub challenge: bool,
    /// Bind a clearance cookie to what the browser that earned it presented
    /// (User-Agent, header order, HTTP/2 fingerprint, JA4 part b, per request
    /// kind: navigation or XHR); a replay that differs is refused.
    #[serde(default)]
    pub consistency: bool,
    /// A markup change: the review rating's class is `review-stars` instead
    /// of `review-rating` on every page and AJAX answer (selector drift).
    #[serde(default)]
    pub layout_change: bool,
    /// The main-world probe in every HTML page of the shop
    /// ([`super::detect::inject_probe`]).
    #[serde(default)]
    pub probe: bool,
    /// A robot check a person solves on every shop page until the visitor
    /// has passed it ([`super::robot_check`]).
    #[serde(default)]
    pub robot_check: bool,
    /// Search engines (`duckduckgo`, `bing`) that answer every query with
    /// their block page ([`super::engines`]).
    #[serde(default)]
    pub engines_blocked: Vec<String>,
    pub rate_limit: Option<RateLimit>,
    #[serde(default)]
    pub site_limit: Option<SiteLimit>,
    pub fault: Option<Fault>,
}

/// What a client presented with a clearance cookie, compared by the
/// consistency mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Presented {
    pub user_agent: String,
    /// Header names in order, without the ones that belong to one request's
    /// context (referer, origin, body headers, reload and user-activation
    /// headers).
    pub order: Vec<String>,
    /// Akamai HTTP/2 fingerprint (`None` over HTTP/1.1).
    pub h2: Option<String>,
    pub ja4_b: String,
}

/// Headers a browser adds or drops with the context of one request.
pub const CONTEXT_HEADERS: [&str; 9] = [
    "referer",
    "origin",
    "content-length",
    "content-type",
    "cache-control",
    "pragma",
    "sec-fetch-user",
    "sec-purpose",
    "purpose",
];

impl Presented {
    /// The parts that differ from `bound`, by name.
    pub fn differences(&self, bound: &Presented) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.user_agent != bound.user_agent {
            out.push("user-agent");
        }
        if self.order != bound.order {
            out.push("header order");
        }
        if self.h2 != bound.h2 {
            out.push("HTTP/2 fingerprint");
        }
        if self.ja4_b != bound.ja4_b {
            out.push("JA4 part b");
        }
        out
    }
}

/// A clearance cookie's bound presentations.
#[derive(Debug, Clone, Default)]
struct Binding {
    navigation: Option<Presented>,
    xhr: Option<Presented>,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Ja4Stat {
    pub count: u64,
    pub family: String,
    pub blocked: u64,
}

/// Request counts, for tests and benchmarks.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Stats {
    pub total: u64,
    pub by_ja4: BTreeMap<String, Ja4Stat>,
    pub by_path: BTreeMap<String, u64>,
    pub captchas: u64,
    pub challenges: u64,
    /// Clearance replays refused by the consistency mode.
    pub inconsistent: u64,
    /// Shop requests per second since the testbed started (the last
    /// [`PER_SECOND_KEPT`] seconds), by second.
    pub per_second: BTreeMap<u64, u64>,
    /// Requests answered by the site-wide limit.
    pub site_limited: u64,
}

/// How many seconds of `Stats::per_second` are kept.
pub const PER_SECOND_KEPT: u64 = 600;

/// One request as the testbed saw it (the per-request log).
#[derive(Debug, Clone, Serialize)]
pub struct LogEntry {
    /// Path and query.
    pub path: String,
    /// `h2` or `http/1.1`, when the connection was tapped.
    pub protocol: Option<String>,
    /// The connection's Akamai HTTP/2 fingerprint.
    pub akamai: Option<String>,
    /// This request's HTTP/2 HEADERS priority (`weight:exclusive:depends_on`).
    pub h2_priority: Option<String>,
    /// Every header as sent, in order (HTTP/2 pseudo-headers included).
    pub header_order: Vec<(String, String)>,
    /// HTTP/1.1: the head's lines exactly as sent, request line first.
    pub head_lines: Vec<String>,
    pub ja4: String,
    /// The ClientHello resumed a TLS session (`pre_shared_key`, which adds
    /// one extension to the JA4).
    pub resumed: bool,
    pub family: String,
    pub user_agent: Option<String>,
    pub accept_language: Option<String>,
    pub sec_ch_ua: Option<String>,
    pub sec_ch_ua_platform: Option<String>,
    pub cookie: Option<String>,
    pub status: u16,
    /// Milliseconds since the testbed started, when the request arrived...
    pub at_ms: u64,
    /// ...and when its response was ready.
    pub done_ms: u64,
}

/// Arrivals per second (of the testbed's life) of logged requests whose
/// path starts with `prefix`.
pub fn arrivals(
    log: &std::collections::VecDeque<LogEntry>,
    prefix: &str,
) -> std::collections::BTreeMap<u64, u32> {
    let mut out = std::collections::BTreeMap::new();
    for e in log.iter().filter(|e| e.path.starts_with(prefix)) {
        *out.entry(e.at_ms / 1000).or_insert(0) += 1;
    }
    out
}

/// How many log entries are kept.
pub const LOG_CAP: usize = 5000;

#[derive(Debug)]
struct Identity {
    window_start: Instant,
    count: u32,
    blocked_until: Option<Instant>,
}

/// Shared testbed state.
#[derive(Debug)]
pub struct Shared {
    pub modes: Mutex<Modes>,
    pub stats: Mutex<Stats>,
    pub log: Mutex<std::collections::VecDeque<LogEntry>>,
    pub started: Instant,
    identities: Mutex<HashMap<String, Identity>>,
    nonces: Mutex<HashSet<String>>,
    bindings: Mutex<HashMap<String, Binding>>,
    /// The shop's accounts and their sessions.
    pub accounts: super::accounts::Accounts,
    /// Who passed the robot check.
    pub robot_check: super::robot_check::RobotCheck,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            modes: Mutex::default(),
            stats: Mutex::default(),
            log: Mutex::default(),
            started: Instant::now(),
            identities: Mutex::default(),
            nonces: Mutex::default(),
            bindings: Mutex::default(),
            accounts: super::accounts::Accounts::default(),
            robot_check: Default::default(),
        }
    }
}

/// Work rounds of the challenge script: cheap for a browser, still real JS.
pub const CHALLENGE_ROUNDS: u32 = 20_000;

impl Shared {
    pub fn record(&self, ja4: &str, family: &str, path: &str, blocked: bool) {
        let mut s = self.stats.lock();
        s.total += 1;
        let e = s.by_ja4.entry(ja4.to_string()).or_default();
        e.count += 1;
        e.family = family.to_string();
        if blocked {
            e.blocked += 1;
        }
        *s.by_path.entry(path.to_string()).or_default() += 1;
    }

    /// Milliseconds since start.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn push_log(&self, entry: LogEntry) {
        let mut log = self.log.lock();
        if log.len() >= LOG_CAP {
            log.pop_front();
        }
        log.push_back(entry);
    }

    /// The fault for `path`, counting down `remaining`.
    pub fn take_fault(&self, path: &str) -> Option<Fault> {
        let mut modes = self.modes.lock();
        let fault = modes.fault.as_mut()?;
        if fault
            .path_prefix
            .as_deref()
            .is_some_and(|p| !path.starts_with(p))
        {
            return None;
        }
        let out = fault.clone();
        if let Some(n) = fault.remaining.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                modes.fault = None;
            }
        }
        Some(out)
    }

    /// Only a `reset` fault (handled below HTTP, by dropping the connection).
    pub fn take_reset(&self, path: &str) -> bool {
        let is_reset = {
            let modes = self.modes.lock();
            modes.fault.as_ref().is_some_and(|f| {
                f.kind == FaultKind::Reset
                    && f.path_prefix.as_deref().is_none_or(|p| path.starts_with(p))
            })
        };
        is_reset && self.take_fault(path).is_some()
    }

    pub fn issue_nonce(&self) -> String {
        let nonce = hex::encode(rand::random::<[u8; 8]>());
        let mut n = self.nonces.lock();
        if n.len() > 100_000 {
            n.clear();
        }
        n.insert(nonce.clone());
        nonce
    }

    /// Whether a `tb_clearance` cookie value is one we issued and correctly solved.
    pub fn clearance_ok(&self, value: &str) -> bool {
        let Some((nonce, answer)) = value.split_once('.') else {
            return false;
        };
        self.nonces.lock().contains(nonce)
            && super::html::challenge_answer(nonce, CHALLENGE_ROUNDS) == answer
    }

    /// Consistency mode: the first request of each kind (navigation, XHR)
    /// with `clearance` binds it (the challenge script makes the browser
    /// send both); later ones must present the same. `Err` names what
    /// differs.
    pub fn check_binding(
        &self,
        clearance: &str,
        xhr: bool,
        presented: Presented,
    ) -> Result<(), Vec<&'static str>> {
        let mut bindings = self.bindings.lock();
        let b = bindings.entry(clearance.to_string()).or_default();
        let slot = if xhr { &mut b.xhr } else { &mut b.navigation };
        match slot {
            None => {
                *slot = Some(presented);
                Ok(())
            }
            Some(bound) => {
                let diff = presented.differences(bound);
                if diff.is_empty() {
                    Ok(())
                } else {
                    self.stats.lock().inconsistent += 1;
                    Err(diff)
                }
            }
        }
    }

    /// Count one shop request in this second; past the site-wide limit, how
    /// to refuse it.
    pub fn site_limited(&self, now_ms: u64) -> Option<Limited> {
        let limit = self.modes.lock().site_limit;
        let second = now_ms / 1000;
        let mut stats = self.stats.lock();
        let n = {
            let n = stats.per_second.entry(second).or_insert(0);
            *n += 1;
            *n
        };
        if let Some(&oldest) = stats.per_second.keys().next()
            && second.saturating_sub(oldest) > PER_SECOND_KEPT
        {
            stats.per_second = stats.per_second.split_off(&(second - PER_SECOND_KEPT));
        }
        let limit = limit?;
        (n > u64::from(limit.max_per_sec)).then(|| {
            stats.site_limited += 1;
            Limited {
                status: 429,
                retry_after: limit.retry_after,
            }
        })
    }

    /// Count one request of `identity`; how to refuse it when it must see a
    /// captcha.
    pub fn rate_limited(&self, identity: &str, now: Instant) -> Option<Limited> {
        let limit = self.modes.lock().rate_limit?;
        let refuse = Limited {
            status: limit.status,
            retry_after: limit.retry_after,
        };
        let mut ids = self.identities.lock();
        let id = ids.entry(identity.to_string()).or_insert(Identity {
            window_start: now,
            count: 0,
            blocked_until: None,
        });
        if let Some(until) = id.blocked_until {
            if now < until {
                return Some(refuse);
            }
            id.blocked_until = None;
            id.window_start = now;
            id.count = 0;
        }
        if now.duration_since(id.window_start) >= Duration::from_secs(limit.window_secs) {
            id.window_start = now;
            id.count = 0;
        }
        id.count += 1;
        if id.count > limit.max {
            id.blocked_until = Some(now + Duration::from_secs(limit.block_secs));
            return Some(refuse);
        }
        None
    }

    /// Forget counters, identities and faults; modes other than the fault stay.
    pub fn reset(&self) {
        *self.stats.lock() = Stats::default();
        self.log.lock().clear();
        self.identities.lock().clear();
        self.modes.lock().fault = None;
    }
}
