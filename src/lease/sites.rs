//! Site state per (slot, strategy), as the router keeps it: breakers and
//! tier memory, rests, the site-wide request budget, login states
//! (`logged_in`, `logged_out` or `unknown`, with when and the marker that
//! showed it) and the sign-in walls a signed-out identity met, and which
//! slot served an MCP session last. Read by the cascade's routing and the
//! reports (`pool_status`, `idpool slots`, `/metrics`), set by the lease
//! and by operators; a change is an event. [`Leases::sites`] hands it out.

use std::time::Duration;

use tokio::time::Instant;

use super::Leases;
use crate::routing::{BreakerReport, BudgetReport, LoginRecord};
use crate::strategy::{LoginState, Politeness};

/// The site state of the pool's slots (see [`Leases::sites`]).
pub struct Sites<'a> {
    leases: &'a Leases,
}

impl Leases {
    /// The site state per (slot, strategy).
    pub fn sites(&self) -> Sites<'_> {
        Sites { leases: self }
    }
}

impl Sites<'_> {
    /// The request budget of `strategy` across all slots, as operators see it.
    pub fn budget(&self, strategy: &str) -> BudgetReport {
        let pol = self.leases.politeness(strategy);
        let mut report = self
            .leases
            .router
            .lock()
            .budget(strategy, &pol)
            .report(&pol);
        if self
            .leases
            .fleet
            .as_ref()
            .is_some_and(|f| f.cluster().is_up())
        {
            report.scope = "fleet";
        }
        report
    }

    /// Per strategy: requests a minute this daemon started over the last
    /// 10 s (what it registers in a fleet).
    pub fn sent_rates(&self) -> std::collections::BTreeMap<String, f64> {
        let router = self.leases.router.lock();
        router
            .budgets()
            .map(|(s, b)| (s.clone(), b.report(&Politeness::default()).sent_per_minute))
            .filter(|(_, r)| *r > 0.0)
            .collect()
    }

    /// Per strategy: answers the site took a minute over the last 5 s (what
    /// the fleet sums for its budget's first cut).
    pub fn taken_rates(&self) -> std::collections::BTreeMap<String, f64> {
        let router = self.leases.router.lock();
        let now = tokio::time::Instant::now();
        router
            .budgets()
            .map(|(s, b)| (s.clone(), b.taken_per_minute(now)))
            .filter(|(_, r)| *r > 0.0)
            .collect()
    }

    /// In a fleet: another daemon cut `strategy`'s budget to `rate` (its
    /// event, relayed), its generation now `generation`: pace by it from
    /// the next request.
    pub fn heard_fleet_cut(&self, strategy: &str, rate: Option<f64>, generation: u64) {
        if self.leases.strategy(strategy).is_none() {
            return;
        }
        let pol = self.leases.politeness(strategy);
        self.leases
            .router
            .lock()
            .budget(strategy, &pol)
            .heard_fleet_cut(rate, generation);
    }

    /// Whether `slot` would be admitted for `strategy` now (its breaker
    /// admits, its proxy is up); takes nothing.
    pub fn admits(&self, slot: usize, strategy: &str) -> bool {
        let Some(s) = self.leases.slots.get(slot) else {
            return false;
        };
        if s.proxy_down() || !self.leases.in_hand(slot) {
            return false;
        }
        let cfg = self.leases.cfg.breaker;
        let mut router = self.leases.router.lock();
        router
            .site(slot, strategy, cfg)
            .breaker
            .admits(Instant::now())
    }

    /// Remember that `slot` served `session`'s last call for `strategy`.
    pub fn remember(&self, session: &str, strategy: &str, slot: usize) {
        self.leases.router.lock().remember(session, strategy, slot);
    }

    /// The slot that served `session`'s last call for `strategy`.
    pub fn remembered(&self, session: &str, strategy: &str) -> Option<usize> {
        self.leases.router.lock().remembered(session, strategy)
    }

    /// When no slot admits `strategy` now: how long until the first one does.
    pub fn all_resting(&self, strategy: &str) -> Option<Duration> {
        let held = (0..self.leases.slots.len()).filter(|id| self.leases.in_hand(*id));
        (self.leases.router.lock()).all_resting(
            strategy,
            self.leases.cfg.breaker,
            held,
            Instant::now(),
        )
    }

    /// The breaker of (slot, strategy) as operators see it.
    pub fn breaker(&self, slot: usize, strategy: &str) -> BreakerReport {
        let cfg = self.leases.cfg.breaker;
        self.leases
            .router
            .lock()
            .report(slot, strategy, cfg, Instant::now())
    }

    /// Tiers that hard-blocked (slot, strategy), with seconds since the block.
    pub fn tier_memory(&self, slot: usize, strategy: &str) -> Vec<(u8, f64)> {
        let cfg = self.leases.cfg.breaker;
        let mut router = self.leases.router.lock();
        router.tier_memory(slot, strategy, cfg, Instant::now())
    }

    /// Close the breakers of `slot` (all strategies, or one) and forget its tier blocks.
    pub fn reset_breakers(&self, slot: usize, strategy: Option<&str>) {
        self.leases.router.lock().reset(slot, strategy);
        self.leases.events.emit(
            "breaker_reset",
            Some(slot),
            strategy,
            serde_json::json!({"to": "closed"}),
        );
        self.leases.released.notify_waiters();
    }
    /// Whether `slot` is signed in (`logged_in`) on `strategy` now.
    pub fn signed_in(&self, slot: usize, strategy: &str) -> bool {
        self.login(slot, strategy).state == LoginState::LoggedIn
    }

    /// Slot `slot`'s login state for `strategy`.
    pub fn login(&self, slot: usize, strategy: &str) -> LoginRecord {
        let router = self.leases.router.lock();
        router
            .sites
            .get(strategy)
            .and_then(|m| m.get(&slot))
            .and_then(|s| s.login.clone())
            .unwrap_or_else(LoginRecord::unknown)
    }

    /// Record what an answer showed; a change is an event and moves the gauge.
    pub(crate) fn set_login(&self, slot: usize, strategy: &str, state: LoginState, evidence: &str) {
        let before = {
            let mut router = self.leases.router.lock();
            let site = router.site(slot, strategy, self.leases.cfg.breaker);
            let before = site.login.as_ref().map_or(LoginState::Unknown, |l| l.state);
            if before == state {
                // The evidence of the change is kept; nothing to write.
                return;
            }
            site.login = Some(LoginRecord {
                state,
                since: Some(unix_now()),
                evidence: Some(evidence.to_string()),
            });
            before
        };
        gauge(slot, strategy, state);
        tracing::info!(
            slot,
            strategy,
            from = before.as_str(),
            to = state.as_str(),
            evidence,
            "login state changed"
        );
        self.leases.events.emit(
            "login_state",
            Some(slot),
            Some(strategy),
            serde_json::json!({"from": before.as_str(), "to": state.as_str(), "evidence": evidence}),
        );
    }

    /// Forget every login state of `slot`, and the sign-in walls it met
    /// (a retired identity signs in, and asks, anew).
    pub(crate) fn forget_logins(&self, slot: usize) {
        let mut router = self.leases.router.lock();
        for (name, sites) in router.sites.iter_mut() {
            let Some(site) = sites.get_mut(&slot) else {
                continue;
            };
            site.walled.clear();
            if site.login.take().is_some() {
                gauge(slot, name, LoginState::Unknown);
            }
        }
    }

    /// Slots that may try `op` of `strategy` signed out (none may be signed
    /// in): in hand, and whose signed-out answer for it was not the sign-in
    /// wall within [`SIGNED_OUT_WALL_MEMORY`].
    pub fn may_try_signed_out(&self, strategy: &str, op: &str) -> Vec<usize> {
        let now = tokio::time::Instant::now();
        let router = self.leases.router.lock();
        let site = router.sites.get(strategy);
        (0..self.leases.slots().len())
            .filter(|s| self.leases.in_hand(*s))
            .filter(|s| {
                site.and_then(|m| m.get(s))
                    .is_none_or(|x| !x.walled_lately(op, now, SIGNED_OUT_WALL_MEMORY))
            })
            .collect()
    }

    /// Slots that may serve an operation that needs a signed-in identity
    /// for `strategy`: `logged_in` or `unknown` (a `logged_out` one cannot).
    pub fn may_be_signed_in(&self, strategy: &str) -> Vec<usize> {
        (0..self.leases.slots().len())
            .filter(|s| self.leases.in_hand(*s))
            .filter(|s| self.login(*s, strategy).state != LoginState::LoggedOut)
            .collect()
    }
}

/// How long a signed-out identity that met an operation's sign-in wall is
/// not sent to that page again signed out: the site's rule rarely changes
/// within the hour, and the call goes to the fallback at once meanwhile.
pub const SIGNED_OUT_WALL_MEMORY: std::time::Duration = std::time::Duration::from_secs(3600);

/// `idpool_slot_login_state{slot, strategy, state}`: 1 for the current state.
fn gauge(slot: usize, strategy: &str, state: LoginState) {
    for s in [
        LoginState::LoggedIn,
        LoginState::LoggedOut,
        LoginState::Unknown,
    ] {
        metrics::gauge!("idpool_slot_login_state",
            "slot" => slot.to_string(), "strategy" => strategy.to_string(), "state" => s.as_str())
        .set(if s == state { 1.0 } else { 0.0 });
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
