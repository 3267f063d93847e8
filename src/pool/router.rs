//! The router: which slot a call gets. Round-robin per strategy over slots
//! whose breaker admits traffic and whose politeness interval has passed.
//! When no breaker admits, the call fails at once without a request, naming
//! the strategy, the identities resting and `retry_after` (or, with
//! `breaker.when_all_open = "wait"`, waits for the earliest admission). It
//! owns the per-(slot, strategy) site state (breaker, politeness, tier
//! memory) behind one lock.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::budget::{Budget, BudgetReport};
use super::circuit::{Admission, Breaker, BreakerState, Cause};
use super::politeness::Site;
use super::{Lease, Pool};
use crate::config::{BreakerConfig, WhenAllOpen};
use crate::error::{Error, ErrorKind, Result};
use crate::strategy::Politeness;

/// Hosts no strategy covers (the open web, `security.allowed_hosts`) are
/// routed each under its own key, `web:<host>`: its own breakers,
/// politeness (`[web]`) and budget. Metrics label them all `web`.
pub const WEB: &str = "web";

/// The routing key of a host no strategy covers.
pub fn web_key(host: &str) -> String {
    format!("{WEB}:{}", host.trim_end_matches('.').to_ascii_lowercase())
}

/// Whether `strategy` is an open-web host's key ([`web_key`]).
pub fn is_web_key(strategy: &str) -> bool {
    strategy
        .strip_prefix(WEB)
        .is_some_and(|r| r.starts_with(':'))
}

#[derive(Default)]
pub(super) struct Router {
    cursor: HashMap<String, usize>,
    /// Strategy → slot → its site state (looked up by `&str`: no key is
    /// allocated on the per-call path).
    pub(super) sites: HashMap<String, HashMap<usize, Site>>,
    in_flight: HashMap<String, usize>,
    /// Strategy → its request budget across all slots.
    budgets: HashMap<String, Budget>,
    /// (MCP session, strategy) → the slot that served its last call.
    sessions: HashMap<(String, String), usize>,
}

/// Sessions remembered for stickiness; past this the memory starts over.
const MAX_SESSIONS: usize = 4096;

/// Open-web hosts whose routing state is kept; past this, hosts idle for
/// [`WEB_IDLE`] are forgotten (a rested breaker, nothing in flight).
const MAX_WEB_HOSTS: usize = 512;
const WEB_IDLE: Duration = Duration::from_secs(600);

impl Router {
    /// A lease of (slot, strategy) ends: one fewer in flight, and its
    /// half-open trial handed back when it never finished.
    pub(super) fn release(
        &mut self,
        slot: usize,
        strategy: &str,
        cfg: BreakerConfig,
        unfinished: Option<Admission>,
    ) {
        let site = self.site(slot, strategy, cfg);
        site.in_flight = site.in_flight.saturating_sub(1);
        if let Some(a) = unfinished {
            site.breaker.release(a);
        }
        if let Some(n) = self.in_flight.get_mut(strategy) {
            *n = n.saturating_sub(1);
        }
    }

    pub(super) fn budget(&mut self, strategy: &str, pol: &Politeness) -> &mut Budget {
        if !self.budgets.contains_key(strategy) {
            self.budgets.insert(strategy.to_string(), Budget::new(pol));
        }
        self.budgets
            .get_mut(strategy)
            .unwrap_or_else(|| unreachable!("inserted above"))
    }

    pub(super) fn site(&mut self, slot: usize, strategy: &str, cfg: BreakerConfig) -> &mut Site {
        if !self.sites.contains_key(strategy) {
            if is_web_key(strategy) {
                self.forget_idle_web_hosts(Instant::now());
            }
            self.sites.insert(strategy.to_string(), HashMap::new());
        }
        self.sites
            .get_mut(strategy)
            .map(|m| {
                m.entry(slot)
                    .or_insert_with(|| Site::new(Breaker::new(cfg)))
            })
            .unwrap_or_else(|| unreachable!("inserted above"))
    }
}

impl Router {
    /// Past [`MAX_WEB_HOSTS`] open-web hosts, drop those no one used for
    /// [`WEB_IDLE`] whose breakers are closed and hold nothing in flight.
    fn forget_idle_web_hosts(&mut self, now: Instant) {
        let web = self.sites.keys().filter(|k| is_web_key(k)).count();
        if web < MAX_WEB_HOSTS {
            return;
        }
        let idle = |sites: &mut HashMap<usize, Site>| {
            sites.values_mut().all(|s| {
                s.in_flight == 0
                    && s.breaker.state(now) == BreakerState::Closed
                    && s.retry_after_until.is_none_or(|t| t <= now)
                    && s.last_start
                        .is_none_or(|t| now.duration_since(t) >= WEB_IDLE)
            })
        };
        let gone: Vec<String> = (self.sites.iter_mut())
            .filter_map(|(k, v)| (is_web_key(k) && idle(v)).then_some(k))
            .cloned()
            .collect();
        for k in gone {
            self.sites.remove(&k);
            self.cursor.remove(&k);
            self.budgets.remove(&k);
            self.in_flight.remove(&k);
        }
    }
}

/// One more in flight for `strategy` (its key allocated only the first time).
fn bump(counts: &mut HashMap<String, usize>, strategy: &str) {
    match counts.get_mut(strategy) {
        Some(n) => *n += 1,
        None => {
            counts.insert(strategy.to_string(), 1);
        }
    }
}

enum Pick {
    Lease(Lease),
    /// Nothing free now: wait until this instant (politeness) or a release.
    Wait(Option<Instant>),
    /// No breaker admits: the identities resting, and when the first one
    /// will admit again (or `None`: when its trial comes back).
    Resting(Resting),
    /// This daemon holds no identity now (a fleet daemon whose identities
    /// another one holds).
    NoneHeld,
}

/// How soon a lease refused by the fleet's in-flight bound asks again.
const FLEET_RETRY: Duration = Duration::from_millis(50);

/// What a caller is told to wait for a half-open trial that is out.
const TRIAL_OUT: Duration = Duration::from_secs(1);

/// Every slot a call could use refuses it for now.
struct Resting {
    slots: usize,
    rate_limited: usize,
    proxy_down: usize,
    until: Option<Instant>,
}

impl Resting {
    fn new() -> Self {
        Resting {
            slots: 0,
            rate_limited: 0,
            proxy_down: 0,
            until: None,
        }
    }

    /// Count a slot whose upstream proxy is down (probed again at `probe`).
    fn note_proxy_down(&mut self, probe: Option<Instant>, now: Instant) {
        self.slots += 1;
        self.proxy_down += 1;
        let at = probe.filter(|t| *t > now).unwrap_or(now + TRIAL_OUT);
        self.until = Some(self.until.map_or(at, |u| u.min(at)));
    }

    /// Count a slot whose breaker does not admit now.
    fn note(&mut self, site: &mut Site, now: Instant) {
        self.slots += 1;
        if site.breaker.cause(now) == Some(Cause::RateLimited) {
            self.rate_limited += 1;
        }
        // Open: it admits a trial then; half-open with its trial out: when
        // that trial comes back (say, in a second).
        let at = site
            .breaker
            .open_until()
            .filter(|t| *t > now)
            .unwrap_or(now + TRIAL_OUT);
        self.until = Some(self.until.map_or(at, |u| u.min(at)));
    }

    /// How long until the earliest admission.
    fn retry_after(&self, now: Instant) -> Duration {
        self.until
            .map_or(TRIAL_OUT, |t| t.saturating_duration_since(now))
            .max(Duration::from_millis(100))
    }

    fn error(&self, strategy: &str, pin: Option<usize>, now: Instant) -> Error {
        let after = self.retry_after(now);
        let blocked = self.slots - self.rate_limited - self.proxy_down;
        let who = match pin {
            Some(p) if self.proxy_down > 0 => format!("slot {p}'s proxy is down"),
            Some(p) => format!("slot {p} is resting for `{strategy}`"),
            None if self.proxy_down > 0 => format!(
                "every identity for `{strategy}` is resting ({} of {}: {} rate-limited, {} blocked, {} with its proxy down)",
                self.slots, self.slots, self.rate_limited, blocked, self.proxy_down
            ),
            None => format!(
                "every identity for `{strategy}` is resting ({} of {}: {} rate-limited, {} blocked)",
                self.slots, self.slots, self.rate_limited, blocked
            ),
        };
        let why = if self.proxy_down == self.slots {
            "no request was sent"
        } else {
            "the site pushed back; no request was sent"
        };
        Error::new(
            ErrorKind::Unavailable,
            format!("{who}; retry after {:.1} s ({why})", after.as_secs_f64()),
        )
        .retryable(false)
        .with_retry_after(after)
    }
}

/// A breaker as reported to operators.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerReport {
    pub state: BreakerState,
    pub failures: u32,
    /// Seconds until an open breaker admits a trial.
    pub open_for_secs: Option<f64>,
    /// Why it is open or half-open: `blocked` or `rate_limited`.
    pub cause: Option<Cause>,
}

/// The politeness of a strategy, or (`None`) of a host no strategy covers,
/// from `[web]`: per host, since each such host is its own routing key.
pub(super) fn politeness_of(
    rules: Option<&dyn crate::strategy::Strategy>,
    web: &crate::config::WebConfig,
) -> Politeness {
    match rules {
        Some(s) => s.politeness().clone(),
        None => Politeness {
            min_interval_ms: web.min_interval_ms,
            max_in_flight: web.max_in_flight,
            global_max_in_flight: web.global_max_in_flight,
            ..Politeness::default()
        },
    }
}

impl Pool {
    fn politeness(&self, strategy: &str) -> Politeness {
        politeness_of(
            self.inner.registry.read().get(strategy).map(|s| s.as_ref()),
            &self.inner.web,
        )
    }

    /// The request budget of `strategy` across all slots, as operators see it.
    pub fn budget(&self, strategy: &str) -> BudgetReport {
        let pol = self.politeness(strategy);
        self.inner.router.lock().budget(strategy, &pol).report(&pol)
    }

    /// Lease a slot for `strategy`, waiting for politeness (bounded by
    /// `http.max_queue_wait_secs`); for an open breaker only with
    /// `when_all_open = "wait"`, and only when it admits within that bound.
    pub async fn next_slot(&self, strategy: &str, pin: Option<usize>) -> Result<Lease> {
        self.next_slot_avoiding(strategy, pin, &[]).await
    }

    /// Like [`Pool::next_slot`], preferring slots not in `avoid` (a retry moves on
    /// to another identity); falls back to them when nothing else is left.
    pub async fn next_slot_avoiding(
        &self,
        strategy: &str,
        pin: Option<usize>,
        avoid: &[usize],
    ) -> Result<Lease> {
        if let Some(p) = pin
            && p >= self.inner.slots.len()
        {
            return Err(Error::not_found(format!(
                "slot {p} does not exist (the pool has {} slots)",
                self.inner.slots.len()
            )));
        }
        if self.inner.slots.is_empty() {
            return Err(Error::config("the pool has no slots"));
        }
        let pol = self.politeness(strategy);
        let deadline = Instant::now() + self.inner.max_wait;
        loop {
            let released = self.inner.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let all_avoided = (0..self.inner.slots.len()).all(|s| avoid.contains(&s));
            let avoid = if all_avoided { &[][..] } else { avoid };
            let now = Instant::now();
            let wait = match self.try_pick(strategy, &pol, pin, avoid, now) {
                Pick::Lease(mut lease) => {
                    if lease.enter_fleet(&pol).await {
                        return Ok(lease);
                    }
                    // The fleet's in-flight bound is full: ask again soon.
                    drop(lease);
                    Some(now + FLEET_RETRY)
                }
                Pick::Wait(until) => until,
                Pick::NoneHeld => {
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!("this daemon holds no identity for `{strategy}` now (the fleet's other daemons hold them); retry after 1.0 s"),
                    )
                    .retryable(false)
                    .with_retry_after(TRIAL_OUT));
                }
                Pick::Resting(r) => {
                    let admits = now + r.retry_after(now);
                    if self.inner.breaker.when_all_open == WhenAllOpen::Fail || admits > deadline {
                        return Err(r.error(strategy, pin, now));
                    }
                    Some(admits)
                }
            };
            if now >= deadline {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "no slot became free for strategy `{strategy}` within {}s (politeness limits)",
                        self.inner.max_wait.as_secs()
                    ),
                ));
            }
            let until = wait.map_or(deadline, |u| u.min(deadline));
            tokio::select! {
                _ = &mut released => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }

    fn try_pick(
        &self,
        strategy: &str,
        pol: &Politeness,
        pin: Option<usize>,
        avoid: &[usize],
        now: Instant,
    ) -> Pick {
        let n = self.inner.slots.len();
        let cfg = self.inner.breaker;
        let mut router = self.inner.router.lock();
        let router = &mut *router;
        let cursor = router.cursor.get(strategy).copied().unwrap_or(0);
        let order: Vec<usize> = match pin {
            Some(p) => vec![p],
            None => (0..n)
                .map(|k| (cursor + k) % n)
                .filter(|s| !avoid.contains(s))
                .collect(),
        };
        let global = router.in_flight.get(strategy).copied().unwrap_or(0);
        let mut any_admitted = false;
        let mut earliest: Option<Instant> = None;
        let mut resting = Resting::new();
        for &id in &order {
            if !self.in_hand(id) {
                continue; // a free spare, or held by another daemon
            }
            if let Some(slot) = self.inner.slots.get(id)
                && slot.proxy_down()
            {
                resting.note_proxy_down(slot.egress().health().next_probe(), now);
                continue;
            }
            let site = router.site(id, strategy, cfg);
            if !site.breaker.admits(now) {
                resting.note(site, now);
                continue;
            }
            any_admitted = true;
            if !site.has_room(pol) || global >= pol.global_max_in_flight {
                continue; // woken by a release
            }
            if let Some(ready) = site.ready_at(pol).filter(|r| *r > now) {
                earliest = Some(earliest.map_or(ready, |e| e.min(ready)));
                continue;
            }
            let Some(admission) = site.breaker.try_admit(now) else {
                continue;
            };
            site.in_flight += 1;
            site.last_start = Some(now);
            bump(&mut router.in_flight, strategy);
            if pin.is_none() {
                match router.cursor.get_mut(strategy) {
                    Some(c) => *c = (id + 1) % n,
                    None => {
                        router.cursor.insert(strategy.to_string(), (id + 1) % n);
                    }
                }
            }
            return Pick::Lease(self.lease(id, strategy, admission));
        }
        if any_admitted {
            Pick::Wait(earliest)
        } else if resting.slots == 0 {
            Pick::NoneHeld
        } else {
            Pick::Resting(resting)
        }
    }

    /// Whether this daemon may use slot `id` now: always without a fleet;
    /// in one, while it holds the slot's identity.
    pub fn in_hand(&self, id: usize) -> bool {
        self.inner.fleet.as_ref().is_none_or(|f| f.usable(id))
    }

    fn lease(&self, slot: usize, strategy: &str, admission: Admission) -> Lease {
        Lease::new(self.inner.clone(), slot, strategy, admission)
    }

    /// Whether `slot` would be admitted for `strategy` now (its breaker
    /// admits, its proxy is up); takes nothing.
    pub fn admits(&self, slot: usize, strategy: &str) -> bool {
        let Some(s) = self.inner.slots.get(slot) else {
            return false;
        };
        if s.proxy_down() || !self.in_hand(slot) {
            return false;
        }
        let cfg = self.inner.breaker;
        let mut router = self.inner.router.lock();
        router
            .site(slot, strategy, cfg)
            .breaker
            .admits(Instant::now())
    }

    /// Remember that `slot` served `session`'s last call for `strategy`.
    pub fn remember(&self, session: &str, strategy: &str, slot: usize) {
        let mut router = self.inner.router.lock();
        if router.sessions.len() >= MAX_SESSIONS {
            router.sessions.clear();
        }
        router
            .sessions
            .insert((session.to_string(), strategy.to_string()), slot);
    }

    /// The slot that served `session`'s last call for `strategy`.
    pub fn remembered(&self, session: &str, strategy: &str) -> Option<usize> {
        let router = self.inner.router.lock();
        router
            .sessions
            .get(&(session.to_string(), strategy.to_string()))
            .copied()
    }

    /// When no slot admits `strategy` now: how long until the first one does.
    pub fn all_resting(&self, strategy: &str) -> Option<Duration> {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let mut resting = Resting::new();
        for id in (0..self.inner.slots.len()).filter(|id| self.in_hand(*id)) {
            let site = router.site(id, strategy, self.inner.breaker);
            if site.breaker.admits(now) {
                return None;
            }
            resting.note(site, now);
        }
        Some(resting.retry_after(now))
    }

    /// The breaker of (slot, strategy) as operators see it.
    pub fn breaker(&self, slot: usize, strategy: &str) -> BreakerReport {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let site = router.site(slot, strategy, self.inner.breaker);
        let state = site.breaker.state(now);
        BreakerReport {
            state,
            failures: site.breaker.failures(),
            open_for_secs: site
                .breaker
                .open_until()
                .filter(|_| state == BreakerState::Open)
                .map(|t| t.saturating_duration_since(now).as_secs_f64()),
            cause: site.breaker.cause(now),
        }
    }

    /// Tiers that hard-blocked (slot, strategy), with seconds since the block.
    pub fn tier_memory(&self, slot: usize, strategy: &str) -> Vec<(u8, f64)> {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let site = router.site(slot, strategy, self.inner.breaker);
        site.tier_blocked_at
            .iter()
            .enumerate()
            .filter_map(|(tier, at)| at.map(|t| (tier as u8, now.duration_since(t).as_secs_f64())))
            .collect()
    }

    /// Close the breakers of `slot` (all strategies, or one) and forget its tier blocks.
    pub fn reset_breakers(&self, slot: usize, strategy: Option<&str>) {
        let mut router = self.inner.router.lock();
        for (name, sites) in router.sites.iter_mut() {
            let Some(site) = sites.get_mut(&slot) else {
                continue;
            };
            if strategy.is_none_or(|x| x == name) {
                site.breaker.reset();
                site.tier_blocked_at.iter_mut().for_each(|t| *t = None);
            }
        }
        drop(router);
        self.inner.events.emit(
            "breaker_reset",
            Some(slot),
            strategy,
            serde_json::json!({"to": "closed"}),
        );
        self.inner.released.notify_waiters();
    }
}
