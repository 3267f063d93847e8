//! A request's turn in its strategy's request budget: the pool's own
//! (`crate::routing::budget`), and in a fleet the fleet's, reserved in Redis.
//! The router takes a slot first; a call whose turn is later gives its place
//! back while it waits, so waiting calls hold no in-flight place.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{Lease, Leases};
use crate::error::{Error, ErrorKind, Result};
use crate::strategy::Politeness;

impl Leases {
    /// Reserve the next start in `strategy`'s request budget: how long
    /// from now it is and the budget's generation it was reserved under,
    /// or a refusal when it is further than `http.max_queue_wait_secs`
    /// away (nothing reserved). In a fleet the budget is the fleet's (Redis
    /// away: the local one, degraded).
    pub(super) async fn reserve_start(
        &self,
        strategy: &str,
        pol: &Politeness,
    ) -> Result<(Duration, u64)> {
        // A fleet's budget is asked only while a rate is in force (the
        // strategy's fixed one, or a cut's): an unlimited call costs Redis
        // nothing; a cut reaches every daemon by its event.
        let limited = || {
            pol.max_requests_per_minute.is_some()
                || self.router.lock().budget(strategy, pol).rate().is_some()
        };
        if let Some(f) = self.fleet.as_ref().filter(|f| f.cluster().is_up())
            && limited()
            && let Some(turn) = self.reserve_fleet(f, strategy, pol).await?
        {
            return Ok(turn);
        }
        let now = Instant::now();
        let at = {
            let mut router = self.router.lock();
            let budget = router.budget(strategy, pol);
            // The rate only for the refusal's message (a report counts
            // the starts: not on every request).
            let rate = budget.rate();
            let generation = budget.generation();
            budget
                .reserve(now, self.cfg.max_wait)
                .map(|at| (at, generation))
                .map_err(|wait| (wait, rate))
        };
        at.map(|(at, generation)| (at.saturating_duration_since(now), generation))
            .map_err(|(wait, rate)| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "`{strategy}` is held to {:.1} requests a minute (the site pushed back) and has no room within {} s; retry after {:.1} s",
                        rate.unwrap_or_default(),
                        self.cfg.max_wait.as_secs(),
                        wait.as_secs_f64()
                    ),
                )
                .retryable(false)
                .with_retry_after(wait)
            })
    }

    /// The fleet's budget: one start every `60 / rate` seconds across every
    /// daemon, reserved by an atomic script in Redis that also hands on
    /// the growth this daemon's successes earned and answers the rate in
    /// force (mirrored into the local budget for reports), with its
    /// generation. `None`: Redis did not answer (the local budget paces
    /// this one).
    async fn reserve_fleet(
        &self,
        f: &crate::cluster::Fleet,
        strategy: &str,
        pol: &Politeness,
    ) -> Result<Option<(Duration, u64)>> {
        let heard = self.router.lock().budget(strategy, pol).take_reported();
        let ask = crate::cluster::PaceAsk {
            rate: pol.max_requests_per_minute,
            adaptive: pol.adaptive,
            grow: heard.grow,
            taken: heard.taken,
            refused: heard.refused,
            generation: heard.generation,
            cap: pol.max_requests_per_minute,
            max_wait: self.cfg.max_wait,
        };
        let Ok(paced) = f.cluster().pace(strategy, ask).await else {
            return Ok(None);
        };
        let now = Instant::now();
        {
            let mut router = self.router.lock();
            let budget = router.budget(strategy, pol);
            budget.set_generation(paced.generation);
            budget.set_fleet_rate(paced.rate);
            if let Ok(wait) = paced.turn {
                budget.note_sent(now, now + wait);
            }
        }
        match paced.turn {
            Ok(wait) => Ok(Some((wait, paced.generation))),
            Err(wait) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "`{strategy}` is held to {:.1} requests a minute across the fleet and has no room within {} s; retry after {:.1} s",
                    paced.rate.unwrap_or_default(),
                    self.cfg.max_wait.as_secs(),
                    wait.as_secs_f64()
                ),
            )
            .retryable(false)
            .with_retry_after(wait)),
        }
    }

    /// The site pushed back on `slot`: tell the fleet, which cuts its budget
    /// once pushbacks came from two of its identities within the window (in
    /// the background: `finish` does not wait for Redis), and say so when
    /// this daemon's pushback was the one that cut.
    pub(super) fn cut_fleet(
        self: &std::sync::Arc<Self>,
        f: &crate::cluster::Fleet,
        slot: usize,
        strategy: &str,
        pol: &Politeness,
        generation: u64,
    ) {
        let identity = f
            .fleet_id(slot)
            .unwrap_or_else(|| format!("{}/{slot}", f.cluster().node()));
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (c, leases) = (f.cluster().clone(), self.clone());
        let (strategy, pol) = (strategy.to_string(), pol.clone());
        // Before the fleet's first cut, the rate the site took is the sum
        // of what each daemon heard it take (the others' as they
        // registered it at their last beat, this daemon's now): one
        // daemon's share of a fleet's answers is too few to scale by once
        // the fleet has tens of daemons. Later cuts measure it in Redis.
        // A site that took nothing: the floor.
        let accepted = {
            let mut router = self.router.lock();
            let b = router.budget(&strategy, &pol);
            let mine = b.taken_per_minute(Instant::now());
            let others: f64 = (f.live().iter())
                .filter(|n| n.node != c.node())
                .filter_map(|n| n.taken.get(&strategy))
                .sum();
            (mine + others).max(0.001)
        };
        rt.spawn(async move {
            let ask = crate::cluster::CutAsk {
                identity,
                identities: crate::routing::budget::PUSHBACK_IDENTITIES,
                window: crate::routing::budget::PUSHBACK_WINDOW,
                accepted,
                floor: pol.min_requests_per_minute,
                cap: pol.max_requests_per_minute,
                generation,
                measuring: crate::routing::budget::MEASURING,
            };
            let Ok(cut) = c.cut(&strategy, &ask).await
            else {
                return;
            };
            let budget_to = {
                let mut router = leases.router.lock();
                let budget = router.budget(&strategy, &pol);
                budget.set_generation(cut.generation);
                if cut.cut {
                    budget.fleet_cut(cut.to);
                } else {
                    budget.set_fleet_rate(cut.to);
                }
                cut.to
            };
            if cut.cut || cut.measuring {
                leases.events.emit(
                    "budget",
                    None,
                    Some(&strategy),
                    serde_json::json!({"from": cut.from.filter(|r| *r < crate::routing::budget::MEASURING),
                        "to": budget_to.filter(|_| cut.cut),
                        "why": if cut.cut { "cut" } else { "measure" }, "scope": "fleet",
                        "measuring": cut.measuring,
                        "accepted": cut.accepted.map(|a| a.round()), "generation": cut.generation}),
                );
            }
        });
    }
}

impl Lease {
    /// Wait for this request's turn in the strategy's request budget, or
    /// fail when it does not come within `http.max_queue_wait_secs`. The
    /// lease's first request had its turn before the lease was handed out.
    pub(super) async fn pace(&self) -> Result<()> {
        if self.paid.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let (wait, generation) = (self.leases)
            .reserve_start(&self.strategy, &self.politeness)
            .await?;
        self.generation.store(generation, Ordering::Release);
        tokio::time::sleep(wait).await;
        Ok(())
    }
}
