//! The router: which slot a call gets. Round-robin per strategy over slots
//! whose breaker admits traffic and whose politeness interval has passed;
//! when every breaker is open, at once the slot that reopens first, flagged
//! `degraded`. It owns the per-(slot, strategy) site state (breaker,
//! politeness, tier memory) behind one lock.

use std::collections::HashMap;

use serde::Serialize;
use tokio::time::Instant;

use super::circuit::{Admission, Breaker, BreakerState};
use super::politeness::Site;
use super::{Lease, Pool};
use crate::config::BreakerConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::strategy::Politeness;

#[derive(Default)]
pub(super) struct Router {
    cursor: HashMap<String, usize>,
    /// Strategy → slot → its site state (looked up by `&str`: no key is
    /// allocated on the per-call path).
    sites: HashMap<String, HashMap<usize, Site>>,
    in_flight: HashMap<String, usize>,
}

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

    pub(super) fn site(&mut self, slot: usize, strategy: &str, cfg: BreakerConfig) -> &mut Site {
        if !self.sites.contains_key(strategy) {
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
}

/// A breaker as reported to operators.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerReport {
    pub state: BreakerState,
    pub failures: u32,
    /// Seconds until an open breaker admits a trial.
    pub open_for_secs: Option<f64>,
}

impl Pool {
    fn politeness(&self, strategy: &str) -> Politeness {
        match self.inner.registry.read().get(strategy) {
            Some(s) => s.politeness().clone(),
            None => Politeness {
                min_interval_ms: 0,
                max_in_flight: 4,
                global_max_in_flight: 16,
            },
        }
    }

    /// Lease a slot for `strategy`, waiting for politeness (bounded by
    /// `http.max_queue_wait_secs`) but never for an open breaker.
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
            let wait = match self.try_pick(strategy, &pol, pin, avoid, Instant::now()) {
                Pick::Lease(lease) => return Ok(lease),
                Pick::Wait(until) => until,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
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
        for &id in &order {
            let site = router.site(id, strategy, cfg);
            if !site.breaker.admits(now) {
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
            return Pick::Lease(self.lease(id, strategy, admission, false));
        }
        if any_admitted {
            return Pick::Wait(earliest);
        }
        // Every breaker refuses: never block, never panic. Answer with the slot whose
        // breaker reopens first, flagged degraded.
        let id = order
            .iter()
            .copied()
            .min_by_key(|&id| {
                router
                    .site(id, strategy, cfg)
                    .breaker
                    .open_until()
                    .unwrap_or(now)
            })
            .unwrap_or(0);
        let site = router.site(id, strategy, cfg);
        site.in_flight += 1;
        site.last_start = Some(now);
        bump(&mut router.in_flight, strategy);
        Pick::Lease(self.lease(id, strategy, Admission { trial: false }, true))
    }

    fn lease(&self, slot: usize, strategy: &str, admission: Admission, degraded: bool) -> Lease {
        Lease::new(self.inner.clone(), slot, strategy, admission, degraded)
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
