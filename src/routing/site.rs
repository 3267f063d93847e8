//! Per-(slot, strategy) routing state: the breaker plus politeness bookkeeping
//! (requests in flight, last start, a `Retry-After` the site asked for).

use std::time::Duration;

use tokio::time::Instant;

use super::breaker::Breaker;
use crate::strategy::Politeness;

/// Routing state of one slot for one strategy.
#[derive(Debug, Clone)]
pub struct Site {
    pub breaker: Breaker,
    pub in_flight: usize,
    pub last_start: Option<Instant>,
    /// The site asked this identity to wait until then.
    pub retry_after_until: Option<Instant>,
    pub hard_blocks: u64,
    pub successes: u64,
    /// When each tier (index 1..=3) last hard-blocked this (slot, strategy).
    pub tier_blocked_at: [Option<Instant>; 4],
    /// Signed in or out on this site, as its answers last showed.
    pub login: Option<super::login::LoginRecord>,
    /// Operations that `requires_login` whose page this identity, signed
    /// out, last found to be the sign-in wall, and when.
    pub walled: Vec<(String, Instant)>,
}

impl Site {
    pub fn new(breaker: Breaker) -> Self {
        Site {
            breaker,
            in_flight: 0,
            last_start: None,
            retry_after_until: None,
            hard_blocks: 0,
            successes: 0,
            tier_blocked_at: [None; 4],
            login: None,
            walled: Vec::new(),
        }
    }

    /// Whether `op`'s page was the sign-in wall for this identity within
    /// `memory` of `now`.
    pub fn walled_lately(&self, op: &str, now: Instant, memory: Duration) -> bool {
        self.walled
            .iter()
            .any(|(o, at)| o == op && now.duration_since(*at) < memory)
    }

    /// `op`'s page was the sign-in wall for this identity at `now`.
    pub fn note_walled(&mut self, op: &str, now: Instant) {
        match self.walled.iter_mut().find(|(o, _)| o == op) {
            Some((_, at)) => *at = now,
            None => self.walled.push((op.to_string(), now)),
        }
    }

    /// Earliest instant the politeness rules allow the next start (ignoring in-flight).
    pub fn ready_at(&self, p: &Politeness) -> Option<Instant> {
        let interval = self
            .last_start
            .map(|t| t + Duration::from_millis(p.min_interval_ms));
        match (interval, self.retry_after_until) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether another request may be in flight on this slot.
    pub fn has_room(&self, p: &Politeness) -> bool {
        self.in_flight < p.max_in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BreakerConfig;

    #[tokio::test(start_paused = true)]
    async fn a_wall_is_remembered_per_operation_for_its_memory() {
        let mut site = Site::new(Breaker::new(BreakerConfig::default()));
        let memory = Duration::from_secs(3600);
        assert!(!site.walled_lately("reviews", Instant::now(), memory));
        site.note_walled("reviews", Instant::now());
        assert!(site.walled_lately("reviews", Instant::now(), memory));
        assert!(!site.walled_lately("top_reviews", Instant::now(), memory));
        tokio::time::advance(Duration::from_secs(3599)).await;
        assert!(site.walled_lately("reviews", Instant::now(), memory));
        // Met again: the memory starts over from then.
        site.note_walled("reviews", Instant::now());
        tokio::time::advance(Duration::from_secs(3599)).await;
        assert!(site.walled_lately("reviews", Instant::now(), memory));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!site.walled_lately("reviews", Instant::now(), memory));
        assert_eq!(site.walled.len(), 1, "one entry per operation");
    }
}
