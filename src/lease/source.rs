//! Leasing a slot: the pool asks its router (`crate::routing`) which slot a
//! call gets, waits as it says (politeness, a release, the fleet's in-flight
//! bound, bounded by `http.max_queue_wait_secs`), and hands out the lease.
//! When no breaker admits, the call fails at once without a request, naming
//! the strategy, the identities resting and `retry_after` (or, with
//! `breaker.when_all_open = "wait"`, waits for the earliest admission).

use std::time::Duration;

use tokio::time::Instant;

use std::sync::Arc;

use super::{Lease, Leases};
use crate::config::WhenAllOpen;
use crate::error::{Error, ErrorKind, Result};
use crate::routing::router::{TRIAL_OUT, politeness_of};
use crate::routing::{Admission, Ask, Pick, Scope, SlotNow};
use crate::strategy::Politeness;

impl Leases {
    /// The strategy's politeness here: in a fleet, this daemon's share of
    /// its `global_max_in_flight` (see [`crate::cluster::Fleet::share`]).
    pub(super) fn politeness(&self, strategy: &str) -> Politeness {
        let mut pol = politeness_of(self.strategy(strategy).as_deref(), &self.cfg.web);
        if let Some(f) = &self.fleet {
            pol.global_max_in_flight = f.share(pol.global_max_in_flight);
        }
        pol
    }

    /// Lease a slot for `strategy`, waiting for politeness (bounded by
    /// `http.max_queue_wait_secs`); for an open breaker only with
    /// `when_all_open = "wait"`, and only when it admits within that bound.
    /// `scope`: the caller's grants (`None`: any identity).
    pub async fn next_slot(
        self: &Arc<Self>,
        strategy: &str,
        pin: Option<usize>,
        scope: Option<&Scope>,
    ) -> Result<Lease> {
        self.next_slot_avoiding(strategy, pin, &[], scope).await
    }

    /// Like [`Leases::next_slot`], preferring slots not in `avoid` (a retry moves on
    /// to another identity); falls back to them when nothing else is left.
    pub async fn next_slot_avoiding(
        self: &Arc<Self>,
        strategy: &str,
        pin: Option<usize>,
        avoid: &[usize],
        scope: Option<&Scope>,
    ) -> Result<Lease> {
        if let Some(p) = pin {
            self.identities().check(p)?;
        }
        if self.slots.is_empty() {
            return Err(Error::config("the pool has no slots"));
        }
        let pol = self.politeness(strategy);
        // Device fingerprints only where the strategy routes by them.
        let devices: Vec<Option<String>> = if pol.distinct_devices {
            self.slots.iter().map(|s| s.device_fingerprint()).collect()
        } else {
            Vec::new()
        };
        let deadline = Instant::now() + self.cfg.max_wait;
        // The request budget's turn, once reserved, is kept across picks.
        let (mut paid, mut generation) = (false, 0);
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let all_avoided = (0..self.slots.len()).all(|s| avoid.contains(&s));
            let avoid = if all_avoided { &[][..] } else { avoid };
            let now = Instant::now();
            let ask = Ask {
                strategy,
                politeness: &pol,
                pin,
                avoid,
                slots: self.slots.len(),
                scope,
                labels: &self.labels,
                devices: &devices,
            };
            let pick = self
                .router
                .lock()
                .pick(&ask, self.cfg.breaker, now, |id| self.slot_now(id));
            let wait = match pick {
                Pick::Take { slot, admission } => {
                    let mut lease = self.lease(slot, strategy, admission);
                    lease.scope = scope.cloned().map(Arc::new);
                    let wait = if paid {
                        Duration::ZERO
                    } else {
                        let (wait, g) = self.reserve_start(strategy, &pol).await?;
                        generation = g;
                        wait
                    };
                    lease.paid.store(true, std::sync::atomic::Ordering::Release);
                    (lease.generation).store(generation, std::sync::atomic::Ordering::Release);
                    if wait.is_zero() {
                        return Ok(lease);
                    }
                    // Its turn is later: the place goes back to whoever can
                    // use it now, and this call picks again at its turn.
                    drop(lease);
                    paid = true;
                    tokio::time::sleep(wait).await;
                    continue;
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
                Pick::NotGranted => {
                    let key = scope.map_or("", |s| s.key.as_str());
                    let tool = scope.map_or("", |s| s.tool.as_str());
                    let what = match pin {
                        Some(p) => format!("slot {p} is not granted to key `{key}`"),
                        None => format!("key `{key}` is granted none of this daemon's identities"),
                    };
                    return Err(Error::new(
                        ErrorKind::NotGranted,
                        format!(
                            "{what} for `{tool}` on `{strategy}`; the call was not moved to another identity (`idpool keys list` shows its grants)"
                        ),
                    ));
                }
                Pick::Resting(r) => {
                    let admits = now + r.retry_after(now);
                    if self.cfg.breaker.when_all_open == WhenAllOpen::Fail || admits > deadline {
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
                        self.cfg.max_wait.as_secs()
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

    /// What this daemon may do with slot `id` now, for the router.
    fn slot_now(&self, id: usize) -> SlotNow {
        if !self.in_hand(id) {
            return SlotNow::NotHeld;
        }
        match self.slots.get(id) {
            Some(slot) if slot.proxy_down() => {
                SlotNow::ProxyDown(slot.egress().health().next_probe())
            }
            _ => SlotNow::Usable,
        }
    }

    fn lease(self: &Arc<Self>, slot: usize, strategy: &str, admission: Admission) -> Lease {
        Lease::new(self.clone(), slot, strategy, admission)
    }
}
