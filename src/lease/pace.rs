//! A lease's place in its strategy's request budget: the pool's own
//! (`budget.rs`), and in a fleet the fleet's, reserved in Redis.

use std::time::Duration;

use tokio::time::Instant;

use super::Lease;
use crate::error::{Error, ErrorKind, Result};

impl Lease {
    /// Wait for this request's turn in the strategy's request budget, or
    /// fail when it does not come within `http.max_queue_wait_secs`.
    pub(super) async fn pace(&self) -> Result<()> {
        let now = Instant::now();
        let at = {
            let mut router = self.leases.router.lock();
            let budget = router.budget(&self.strategy, &self.politeness);
            // The budget's report only for the refusal's message.
            let rate = budget.report(&self.politeness).requests_per_minute;
            budget
                .reserve(now, self.leases.cfg.max_wait)
                .map(|at| (at, rate))
                .map_err(|wait| (wait, rate))
        };
        match at {
            Ok((at, rate)) => {
                tokio::time::sleep_until(at).await;
                match (rate, self.leases.fleet.as_ref()) {
                    (Some(rate), Some(f)) => self.pace_fleet(f, rate).await,
                    _ => Ok(()),
                }
            }
            Err((wait, rate)) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "`{}` is held to {:.1} requests a minute (the site pushed back) and has no room within {} s; retry after {:.1} s",
                    self.strategy,
                    rate.unwrap_or_default(),
                    self.leases.cfg.max_wait.as_secs(),
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
    async fn pace_fleet(&self, f: &crate::cluster::Fleet, rate: f64) -> Result<()> {
        let interval = Duration::from_secs_f64(60.0 / rate.max(0.01));
        let c = f.cluster();
        if !c.is_up() {
            // Degraded: only the heartbeat asks Redis until it is back, so
            // calls never wait for its timeouts.
            return Ok(());
        }
        match c.pace(&self.strategy, interval, self.leases.cfg.max_wait).await {
            Ok(Ok(wait)) => {
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Ok(Err(wait)) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "`{}` is held to {:.1} requests a minute across the fleet and has no room within {} s; retry after {:.1} s",
                    self.strategy,
                    rate,
                    self.leases.cfg.max_wait.as_secs(),
                    wait.as_secs_f64()
                ),
            )
            .retryable(false)
            .with_retry_after(wait)),
            Err(_) => Ok(()),
        }
    }

    /// In a fleet, take a place in the strategy's fleet-wide in-flight
    /// bound (`global_max_in_flight` across every daemon); `false` when all
    /// are taken. Redis away: the local bound alone.
    pub(super) async fn enter_fleet(&mut self, pol: &crate::strategy::Politeness) -> bool {
        let Some(f) = self.leases.fleet.as_ref() else {
            return true;
        };
        let c = f.cluster().clone();
        if !c.is_up() {
            return true;
        }
        let token = uuid::Uuid::new_v4().simple().to_string();
        // A daemon that dies mid-call holds its place this long at most.
        let ttl = self.leases.cfg.max_wait + Duration::from_secs(120);
        match c
            .enter(&self.strategy, pol.global_max_in_flight, &token, ttl)
            .await
        {
            Ok(true) => {
                self.fleet_token = Some(token);
                true
            }
            Ok(false) => false,
            Err(_) => true,
        }
    }
}
