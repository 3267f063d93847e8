//! The site's word counts more than ours: a per-strategy request budget
//! across all slots, in requests per minute.
//!
//! Additive increase, multiplicative decrease (as TCP, Scrapy's AutoThrottle
//! and Crawlee's autoscaling do it in their own ways):
//! - When blocks or rate limits arrive from [`PUSHBACK_IDENTITIES`] different
//!   identities within [`PUSHBACK_WINDOW`], the budget halves (with none in
//!   force yet: half the rate actually sent over the last [`MEASURE_WINDOW`]).
//!   The pushbacks that led to a cut are spent by it.
//! - Every success adds `politeness.increase_per_success` requests per
//!   minute, up to `politeness.max_requests_per_minute` when the strategy
//!   sets one. Once cut, a budget stays in force: it only grows back.
//! - It never goes below `politeness.min_requests_per_minute`.
//!
//! Requests are paced, not bursted: each one reserves the next free start
//! `60 / budget` seconds after the previous one.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::strategy::Politeness;

/// Pushbacks from this many identities within [`PUSHBACK_WINDOW`] cut the
/// budget (a pool of one slot has its breaker and rests, and no budget to
/// adapt: it cannot tell the site from its one identity).
pub const PUSHBACK_IDENTITIES: usize = 2;
/// How far back pushbacks are counted.
pub const PUSHBACK_WINDOW: Duration = Duration::from_secs(30);
/// How far back the rate sent is measured when the first cut comes.
pub const MEASURE_WINDOW: Duration = Duration::from_secs(10);

/// One strategy's request budget.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Requests per minute allowed now; `None`: no limit in force.
    rate: Option<f64>,
    next_free: Option<Instant>,
    /// Recent pushbacks: which slot, when.
    pushbacks: Vec<(usize, Instant)>,
    /// Request starts within [`MEASURE_WINDOW`].
    sent: VecDeque<Instant>,
    cuts: u64,
}

/// A budget change, for events.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// Requests per minute before and after (`None`: no limit).
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// What changed it (`cut`: the site pushed back).
    pub why: &'static str,
}

/// A budget as operators see it.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetReport {
    /// Requests per minute allowed now across all slots; `null`: no limit.
    pub requests_per_minute: Option<f64>,
    /// The strategy's fixed `max_requests_per_minute`, if any.
    pub max_requests_per_minute: Option<f64>,
    pub adaptive: bool,
    /// Times the site's pushback halved it.
    pub cuts: u64,
}

impl Budget {
    pub fn new(p: &Politeness) -> Self {
        Budget {
            rate: p.max_requests_per_minute,
            next_free: None,
            pushbacks: Vec::new(),
            sent: VecDeque::new(),
            cuts: 0,
        }
    }

    /// Reserve the next request's start: `Ok(at)` (now or later), or
    /// `Err(wait)` when that is further away than `max_wait` (nothing reserved).
    pub fn reserve(&mut self, now: Instant, max_wait: Duration) -> Result<Instant, Duration> {
        let at = match (self.rate, self.next_free) {
            (Some(rate), next) => {
                let at = next.map_or(now, |n| n.max(now));
                if at > now + max_wait {
                    return Err(at - now);
                }
                self.next_free = Some(at + Duration::from_secs_f64(60.0 / rate.max(0.01)));
                at
            }
            (None, _) => now,
        };
        while self
            .sent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > MEASURE_WINDOW)
        {
            self.sent.pop_front();
        }
        self.sent.push_back(at);
        Ok(at)
    }

    /// A block or rate limit reached `slot`: maybe the site as a whole says slow down.
    pub fn pushback(&mut self, p: &Politeness, slot: usize, now: Instant) -> Option<Change> {
        if !p.adaptive {
            return None;
        }
        self.pushbacks
            .retain(|(_, t)| now.saturating_duration_since(*t) <= PUSHBACK_WINDOW);
        self.pushbacks.push((slot, now));
        let mut who: Vec<usize> = self.pushbacks.iter().map(|(s, _)| *s).collect();
        who.sort_unstable();
        who.dedup();
        if who.len() < PUSHBACK_IDENTITIES {
            return None;
        }
        self.pushbacks.clear();
        let from = self.rate;
        let base = self
            .rate
            .unwrap_or_else(|| self.sent.len() as f64 * 60.0 / MEASURE_WINDOW.as_secs_f64());
        let floor = p.min_requests_per_minute;
        let to = (base / 2.0).max(floor);
        self.rate = Some(p.max_requests_per_minute.map_or(to, |m| to.min(m)));
        self.cuts += 1;
        Some(Change {
            from,
            to: self.rate,
            why: "cut",
        })
    }

    /// A success: the budget grows back additively.
    pub fn success(&mut self, p: &Politeness) {
        if let (Some(rate), true) = (self.rate, p.adaptive) {
            let grown = rate + p.increase_per_success;
            self.rate = Some(p.max_requests_per_minute.map_or(grown, |m| grown.min(m)));
        }
    }

    pub fn report(&self, p: &Politeness) -> BudgetReport {
        BudgetReport {
            requests_per_minute: self.rate.map(|r| (r * 10.0).round() / 10.0),
            max_requests_per_minute: p.max_requests_per_minute,
            adaptive: p.adaptive,
            cuts: self.cuts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    fn politeness(max: Option<f64>) -> Politeness {
        Politeness {
            max_requests_per_minute: max,
            increase_per_success: 10.0,
            ..Politeness::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn pushback_from_two_identities_halves_what_was_sent_and_successes_grow_it() {
        let p = politeness(None);
        let mut b = Budget::new(&p);
        for _ in 0..40 {
            assert_eq!(
                b.reserve(Instant::now(), Duration::ZERO),
                Ok(Instant::now())
            );
        }
        // One identity pushing back is that identity's business.
        assert_eq!(b.pushback(&p, 0, Instant::now()), None);
        assert_eq!(b.pushback(&p, 0, Instant::now()), None);
        // Two: the site's. 40 requests in 10 s = 240/min, halved.
        let c = b.pushback(&p, 1, Instant::now()).expect("cut");
        assert_eq!((c.from, c.to), (None, Some(120.0)));
        // Paced: one request every half second.
        let t0 = Instant::now();
        assert_eq!(b.reserve(t0, Duration::from_secs(5)), Ok(t0));
        assert_eq!(
            b.reserve(t0, Duration::from_secs(5)),
            Ok(t0 + Duration::from_millis(500))
        );
        assert_eq!(
            b.reserve(t0, Duration::from_millis(100)),
            Err(Duration::from_secs(1))
        );
        // The pushbacks were spent by the cut; new ones cut again.
        assert_eq!(b.pushback(&p, 1, Instant::now()), None);
        let c = b.pushback(&p, 0, Instant::now()).expect("second cut");
        assert_eq!(c.to, Some(60.0));
        // Old pushbacks expire.
        b.pushback(&p, 0, Instant::now());
        advance(PUSHBACK_WINDOW + Duration::from_secs(1)).await;
        assert_eq!(b.pushback(&p, 1, Instant::now()), None);
        // Additive growth: 60 + 18 × 10, and no cap without a fixed budget.
        for _ in 0..18 {
            b.success(&p);
        }
        assert_eq!(b.report(&p).requests_per_minute, Some(240.0));
        assert_eq!(b.report(&p).cuts, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fixed_budget_bounds_growth_and_the_floor_bounds_cuts() {
        let p = politeness(Some(30.0));
        let mut b = Budget::new(&p);
        assert_eq!(b.report(&p).requests_per_minute, Some(30.0));
        for k in 0..10 {
            b.pushback(&p, k % 2, Instant::now());
        }
        assert_eq!(b.report(&p).requests_per_minute, Some(6.0), "the floor");
        for _ in 0..10 {
            b.success(&p);
        }
        assert_eq!(b.report(&p).requests_per_minute, Some(30.0), "the cap");
        let fixed = Politeness {
            adaptive: false,
            ..p
        };
        assert_eq!(b.pushback(&fixed, 0, Instant::now()), None);
        assert_eq!(b.pushback(&fixed, 1, Instant::now()), None);
    }
}
