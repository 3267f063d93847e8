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
    /// from now it is, or a refusal when it is further than
    /// `http.max_queue_wait_secs` away (nothing reserved).
    pub(super) async fn reserve_start(&self, strategy: &str, pol: &Politeness) -> Result<Duration> {
        let now = Instant::now();
        let at = {
            let mut router = self.router.lock();
            let budget = router.budget(strategy, pol);
            // The budget's report only for the refusal's message.
            let rate = budget.report(pol).requests_per_minute;
            budget
                .reserve(now, self.cfg.max_wait)
                .map(|at| (at, rate))
                .map_err(|wait| (wait, rate))
        };
        match at {
            Ok((at, rate)) => {
                let local = at.saturating_duration_since(now);
                match (rate, self.fleet.as_ref()) {
                    (Some(rate), Some(f)) => {
                        let fleet = self.pace_fleet(f, strategy, rate).await?;
                        Ok(local.max(fleet))
                    }
                    _ => Ok(local),
                }
            }
            Err((wait, rate)) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "`{strategy}` is held to {:.1} requests a minute (the site pushed back) and has no room within {} s; retry after {:.1} s",
                    rate.unwrap_or_default(),
                    self.cfg.max_wait.as_secs(),
                    wait.as_secs_f64()
                ),
            )
            .retryable(false)
            .with_retry_after(wait)),
        }
    }

    /// In a fleet, the budget is the fleet's: one start every `60 / rate`
    /// seconds across every daemon, reserved by an atomic script in Redis.
    /// Redis away: the local budget alone (degraded).
    async fn pace_fleet(
        &self,
        f: &crate::cluster::Fleet,
        strategy: &str,
        rate: f64,
    ) -> Result<Duration> {
        let interval = Duration::from_secs_f64(60.0 / rate.max(0.01));
        let c = f.cluster();
        if !c.is_up() {
            // Degraded: only the heartbeat asks Redis until it is back, so
            // calls never wait for its timeouts.
            return Ok(Duration::ZERO);
        }
        match c.pace(strategy, interval, self.cfg.max_wait).await {
            Ok(Ok(wait)) => Ok(wait),
            Ok(Err(wait)) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "`{strategy}` is held to {rate:.1} requests a minute across the fleet and has no room within {} s; retry after {:.1} s",
                    self.cfg.max_wait.as_secs(),
                    wait.as_secs_f64()
                ),
            )
            .retryable(false)
            .with_retry_after(wait)),
            Err(_) => Ok(Duration::ZERO),
        }
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
        let wait = (self.leases)
            .reserve_start(&self.strategy, &self.politeness)
            .await?;
        tokio::time::sleep(wait).await;
        Ok(())
    }
}
