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
/// The rate a fleet's budget paces by while it measures what the site takes
/// (after the site's first word, before its first cut): requests a minute,
/// high enough to pace nothing. Reports show no rate while it is in force.
pub const MEASURING: f64 = 1_000_000.0;
/// How far back the answers the site took are counted (what a fleet's first
/// cut sums over its daemons: the rate the site accepted, not the rate sent).
pub const OUTCOME_WINDOW: Duration = Duration::from_secs(5);

/// One strategy's request budget.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Requests per minute allowed now; `None`: no limit in force.
    rate: Option<f64>,
    next_free: Option<Instant>,
    /// Recent pushbacks: which slot, when.
    pushbacks: Vec<(usize, Instant)>,
    /// Request starts within [`MEASURE_WINDOW`].
    sent: Starts,
    cuts: u64,
    /// Requests a minute successes earned since the fleet last heard.
    growth: f64,
    /// Answers within [`OUTCOME_WINDOW`]: when, and whether the site took it.
    outcomes: VecDeque<(Instant, bool)>,
    /// Answers since the fleet last heard: taken, refused (a fleet's budget
    /// measures what the site took from them).
    answers: (u64, u64),
    /// In a fleet: the fleet budget's cuts so far as this daemon last heard
    /// (its generation). Only answers to requests reserved under it are
    /// handed on, and only their pushbacks are news: an answer to one paced
    /// by the rate before the last cut says nothing about the rate after it.
    generation: u64,
}

/// What a daemon hands on to the fleet's budget with its next reservation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reported {
    /// Requests a minute its successes earned.
    pub grow: f64,
    /// Answers the site took, and refused (blocks and rate limits).
    pub taken: u64,
    pub refused: u64,
    /// The fleet budget's generation those answers' requests were reserved
    /// under.
    pub generation: u64,
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
    /// Times the site's pushback cut it (in a fleet: this daemon's cuts of
    /// the fleet's budget).
    pub cuts: u64,
    /// `fleet`: the rate is the fleet's, shared by every daemon; `local`.
    pub scope: &'static str,
    /// Requests a minute this daemon started over the last 10 s: its use
    /// of the budget.
    pub sent_per_minute: f64,
    /// Requests this daemon may have in flight at the site at once: the
    /// strategy's `global_max_in_flight` (in a fleet: this daemon's share).
    pub in_flight: usize,
}

/// Request starts over [`MEASURE_WINDOW`], counted in buckets of
/// [`Starts::BUCKET`]: noting one and reading the count cost the same at
/// 10 requests a second as at 10,000 (a list of every start was scanned on
/// each request's pacing: 40 % of a tier-1 call's CPU at 7,900 calls/s).
#[derive(Debug, Clone, Default)]
struct Starts {
    /// (first start in the bucket, starts in it), oldest first.
    buckets: VecDeque<(Instant, u32)>,
}

impl Starts {
    const BUCKET: Duration = Duration::from_millis(250);

    fn note(&mut self, now: Instant, at: Instant) {
        while self
            .buckets
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > MEASURE_WINDOW)
        {
            self.buckets.pop_front();
        }
        match self.buckets.back_mut() {
            // A start before the newest bucket's (a pace reset) counts there.
            Some((first, n)) if at < *first + Self::BUCKET => *n += 1,
            _ => self.buckets.push_back((at, 1)),
        }
    }

    /// Starts within the window at `now`.
    fn within(&self, now: Instant) -> usize {
        (self.buckets.iter())
            .filter(|(t, _)| now.saturating_duration_since(*t) <= MEASURE_WINDOW)
            .map(|(_, n)| *n as usize)
            .sum()
    }

    /// Every start kept (those of the window at the last one noted).
    fn all(&self) -> usize {
        self.buckets.iter().map(|(_, n)| *n as usize).sum()
    }
}

impl Budget {
    pub fn new(p: &Politeness) -> Self {
        Budget {
            rate: p.max_requests_per_minute,
            next_free: None,
            pushbacks: Vec::new(),
            sent: Starts::default(),
            cuts: 0,
            growth: 0.0,
            outcomes: VecDeque::new(),
            answers: (0, 0),
            generation: 0,
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
        // Paced here, not by the fleet: nothing to hand on.
        self.growth = 0.0;
        self.answers = (0, 0);
        self.note_sent(now, at);
        Ok(at)
    }

    /// A start at `at` (reserved at `now`), for the rate measured.
    pub fn note_sent(&mut self, now: Instant, at: Instant) {
        self.sent.note(now, at);
    }

    /// In a fleet: the fleet's rate in force (its budget is the one that
    /// paces), mirrored here for reports and for knowing whether to ask.
    pub fn set_fleet_rate(&mut self, rate: Option<f64>) {
        self.rate = rate;
    }

    /// In a fleet: another daemon cut the fleet's budget to `rate` (its
    /// event, relayed).
    pub fn heard_fleet_cut(&mut self, rate: Option<f64>, generation: u64) {
        self.rate = rate;
        self.set_generation(generation);
    }

    /// Whether a pushback to a request reserved under `generation` is news
    /// to the fleet's budget: not when it was reserved before the last cut
    /// this daemon heard of (it was paced by the rate before it).
    pub fn pushback_is_news(&self, generation: u64) -> bool {
        generation >= self.generation
    }

    /// Requests a minute allowed now (`None`: no limit in force).
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// In a fleet: the fleet budget's generation (its cuts so far) heard
    /// from Redis; a newer one drops the answers to requests reserved
    /// under the one before.
    pub fn set_generation(&mut self, generation: u64) {
        if generation > self.generation {
            self.generation = generation;
            self.answers = (0, 0);
        }
    }

    /// The fleet budget's generation as this daemon last heard.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Answers the site took a minute over the last [`OUTCOME_WINDOW`]
    /// (what the fleet sums for the first cut of its budget).
    pub fn taken_per_minute(&self, now: Instant) -> f64 {
        let taken = (self.outcomes.iter())
            .filter(|(t, ok)| *ok && now.saturating_duration_since(*t) <= OUTCOME_WINDOW)
            .count();
        taken as f64 * 60.0 / OUTCOME_WINDOW.as_secs_f64()
    }

    /// An answer arrived to a request reserved under `generation`: whether
    /// the site took it (a block or rate limit did not).
    pub fn note_outcome(&mut self, now: Instant, accepted: bool, generation: u64) {
        while self
            .outcomes
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > OUTCOME_WINDOW)
        {
            self.outcomes.pop_front();
        }
        if self.outcomes.len() >= 4096 {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back((now, accepted));
        if generation != self.generation {
            return;
        }
        if accepted {
            self.answers.0 += 1;
        } else {
            self.answers.1 += 1;
        }
    }

    /// What this budget heard since the fleet last did: the growth its
    /// successes earned and the answers the site took and refused.
    pub fn take_reported(&mut self) -> Reported {
        let (taken, refused) = std::mem::take(&mut self.answers);
        Reported {
            grow: std::mem::take(&mut self.growth),
            taken,
            refused,
            generation: self.generation,
        }
    }

    /// In a fleet: this daemon's pushback cut the fleet's budget to `to`
    /// (its generation set from the cut's answer).
    pub fn fleet_cut(&mut self, to: Option<f64>) {
        self.rate = to;
        self.cuts += 1;
    }

    /// A block or rate limit reached `slot`: whether the site as a whole
    /// says slow down (pushbacks from [`PUSHBACK_IDENTITIES`] identities
    /// within [`PUSHBACK_WINDOW`]; they are spent by saying so).
    pub fn site_pushed_back(&mut self, p: &Politeness, slot: usize, now: Instant) -> bool {
        if !p.adaptive {
            return false;
        }
        self.pushbacks
            .retain(|(_, t)| now.saturating_duration_since(*t) <= PUSHBACK_WINDOW);
        self.pushbacks.push((slot, now));
        let mut who: Vec<usize> = self.pushbacks.iter().map(|(s, _)| *s).collect();
        who.sort_unstable();
        who.dedup();
        if who.len() < PUSHBACK_IDENTITIES {
            return false;
        }
        self.pushbacks.clear();
        true
    }

    /// A block or rate limit reached `slot`: maybe the site as a whole says
    /// slow down, and the budget halves.
    pub fn pushback(&mut self, p: &Politeness, slot: usize, now: Instant) -> Option<Change> {
        if !self.site_pushed_back(p, slot, now) {
            return None;
        }
        let from = self.rate;
        let base = self
            .rate
            .unwrap_or_else(|| self.sent.all() as f64 * 60.0 / MEASURE_WINDOW.as_secs_f64());
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
        if p.adaptive {
            self.growth += p.increase_per_success;
        }
        if let (Some(rate), true) = (self.rate, p.adaptive) {
            let grown = rate + p.increase_per_success;
            self.rate = Some(p.max_requests_per_minute.map_or(grown, |m| grown.min(m)));
        }
    }

    pub fn report(&self, p: &Politeness) -> BudgetReport {
        BudgetReport {
            requests_per_minute: (self.rate.filter(|r| *r < MEASURING))
                .map(|r| (r * 10.0).round() / 10.0),
            max_requests_per_minute: p.max_requests_per_minute,
            adaptive: p.adaptive,
            cuts: self.cuts,
            scope: "local",
            in_flight: p.global_max_in_flight,
            sent_per_minute: {
                let n = self.sent.within(Instant::now());
                (n as f64 * 60.0 / MEASURE_WINDOW.as_secs_f64() * 10.0).round() / 10.0
            },
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
    async fn the_rate_sent_is_counted_over_the_window_whatever_the_rate() {
        let p = politeness(None);
        let mut b = Budget::new(&p);
        // 40,000 starts within 0.8 s: a handful of buckets, not a list of starts.
        for _ in 0..40_000 {
            let now = Instant::now();
            b.reserve(now, Duration::from_secs(1)).unwrap();
            advance(Duration::from_micros(20)).await;
        }
        assert!(b.sent.buckets.len() <= 5, "{}", b.sent.buckets.len());
        assert_eq!(b.report(&p).sent_per_minute, 240_000.0);
        // A start 6 s later: both seconds count; 11 s after the first, only
        // the later one.
        advance(Duration::from_secs(6)).await;
        b.reserve(Instant::now(), Duration::from_secs(1)).unwrap();
        assert_eq!(b.sent.within(Instant::now()), 40_001);
        advance(Duration::from_secs(5)).await;
        assert_eq!(b.sent.within(Instant::now()), 1);
        b.reserve(Instant::now(), Duration::from_secs(1)).unwrap();
        assert_eq!(
            b.sent.all(),
            2,
            "the old bucket is dropped as a start is noted"
        );
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
    async fn what_the_site_took_is_measured_over_the_outcome_window() {
        let p = politeness(None);
        let mut b = Budget::new(&p);
        assert_eq!(b.taken_per_minute(Instant::now()), 0.0, "nothing heard yet");
        for k in 0..10 {
            b.note_outcome(Instant::now(), k % 4 != 0, 0);
        }
        assert_eq!(b.taken_per_minute(Instant::now()), 7.0 * 12.0);
        // 3 of 10 refused.
        advance(OUTCOME_WINDOW + Duration::from_secs(1)).await;
        b.note_outcome(Instant::now(), false, 0);
        assert_eq!(b.taken_per_minute(Instant::now()), 0.0);
        // Successes earn growth for the fleet, handed on once with the
        // answers heard since.
        b.success(&p);
        b.success(&p);
        let heard = Reported {
            grow: 20.0,
            taken: 7,
            refused: 4,
            generation: 0,
        };
        assert_eq!(b.take_reported(), heard);
        assert_eq!(b.take_reported(), Reported::default());
        // A newer generation: answers to requests reserved under the one
        // before are not handed on.
        b.note_outcome(Instant::now(), true, 0);
        b.set_generation(2);
        b.note_outcome(Instant::now(), false, 1);
        b.note_outcome(Instant::now(), true, 2);
        let heard = b.take_reported();
        assert_eq!((heard.taken, heard.refused, heard.generation), (1, 0, 2));
        b.set_generation(1);
        assert_eq!(b.generation(), 2, "never back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pushback_to_a_request_reserved_before_a_fleet_cut_is_old_news() {
        let p = politeness(None);
        let mut b = Budget::new(&p);
        let before = b.generation();
        assert!(b.pushback_is_news(before), "no cut heard yet");
        // A rate in force, first heard from a reservation: a cut.
        b.set_generation(1);
        b.set_fleet_rate(Some(600.0));
        let after = b.generation();
        assert!(!b.pushback_is_news(before));
        assert!(b.pushback_is_news(after));
        // Growth handed back by a reservation, even out of order, is none.
        b.set_fleet_rate(Some(620.0));
        b.set_fleet_rate(Some(590.0));
        assert!(b.pushback_is_news(after));
        // Another daemon's cut, relayed.
        b.heard_fleet_cut(Some(500.0), 2);
        assert!(!b.pushback_is_news(after));
        let after = b.generation();
        assert!(b.pushback_is_news(after));
        // This daemon's own cut (its generation from the cut's answer).
        b.set_generation(3);
        b.fleet_cut(Some(400.0));
        assert!(!b.pushback_is_news(after));
        assert!(b.pushback_is_news(b.generation()));
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
