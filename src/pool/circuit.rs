//! The circuit breaker of one (slot, strategy).
//!
//! `closed` → `open` after `threshold` consecutive hard blocks; `open` lasts the
//! cooldown, which doubles on every re-open up to the cap; then `half_open` admits
//! exactly one trial: success closes (and resets the backoff), a hard block re-opens.
//! Only hard blocks count; empty pages and network errors are neutral.
//! Time is tokio's, so tests drive it with paused time.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::config::BreakerConfig;

/// Breaker state, named exactly as in metrics, JSON and docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// What a finished request tells the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Content.
    Success,
    /// The site refused this identity.
    HardBlock,
    /// Empty page, network error, timeout, 5xx, challenge: changes nothing.
    Neutral,
}

/// One (slot, strategy) breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    cfg: BreakerConfig,
    state: BreakerState,
    /// Consecutive hard blocks while closed.
    failures: u32,
    /// Times opened since the last close; drives the doubling.
    opens: u32,
    open_until: Option<Instant>,
    /// A half-open trial is out.
    trial_out: bool,
}

/// Permission to send one request, handed back with its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// This request is the half-open trial.
    pub trial: bool,
}

impl Breaker {
    pub fn new(cfg: BreakerConfig) -> Self {
        Breaker {
            cfg,
            state: BreakerState::Closed,
            failures: 0,
            opens: 0,
            open_until: None,
            trial_out: false,
        }
    }

    /// Current state; an expired `open` becomes `half_open` here.
    pub fn state(&mut self, now: Instant) -> BreakerState {
        if self.state == BreakerState::Open && self.open_until.is_some_and(|t| now >= t) {
            self.state = BreakerState::HalfOpen;
            self.trial_out = false;
        }
        self.state
    }

    /// Consecutive hard blocks counted so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// When an open breaker will admit a trial.
    pub fn open_until(&self) -> Option<Instant> {
        self.open_until
    }

    /// Whether a request would be admitted now (without taking the admission).
    pub fn admits(&mut self, now: Instant) -> bool {
        match self.state(now) {
            BreakerState::Closed => true,
            BreakerState::HalfOpen => !self.trial_out,
            BreakerState::Open => false,
        }
    }

    /// Take an admission; in `half_open` only the first caller gets one.
    pub fn try_admit(&mut self, now: Instant) -> Option<Admission> {
        match self.state(now) {
            BreakerState::Closed => Some(Admission { trial: false }),
            BreakerState::HalfOpen if !self.trial_out => {
                self.trial_out = true;
                Some(Admission { trial: true })
            }
            _ => None,
        }
    }

    /// Record the verdict of a request that was admitted (or sent degraded).
    pub fn record(&mut self, admission: Admission, verdict: Verdict, now: Instant) {
        if admission.trial {
            self.trial_out = false;
        }
        match verdict {
            Verdict::Neutral => {}
            Verdict::Success => {
                self.state = BreakerState::Closed;
                self.failures = 0;
                self.opens = 0;
                self.open_until = None;
            }
            Verdict::HardBlock => match self.state(now) {
                BreakerState::Closed => {
                    self.failures += 1;
                    if self.failures >= self.cfg.threshold.max(1) {
                        self.open(now);
                    }
                }
                // A failed trial re-opens with a doubled cooldown.
                BreakerState::HalfOpen if admission.trial => self.open(now),
                // Degraded traffic to an open breaker is already accounted for.
                _ => {}
            },
        }
    }

    /// A trial that ended without a verdict (cancelled, network error) frees the slot
    /// for another trial.
    pub fn release(&mut self, admission: Admission) {
        if admission.trial {
            self.trial_out = false;
        }
    }

    /// Force the breaker closed (operator reset).
    pub fn reset(&mut self) {
        *self = Breaker::new(self.cfg);
    }

    fn open(&mut self, now: Instant) {
        self.opens += 1;
        self.state = BreakerState::Open;
        self.trial_out = false;
        self.open_until = Some(now + self.cooldown(self.opens));
    }

    /// Cooldown for the `n`th open in a row: base × 2^(n-1), capped.
    pub fn cooldown(&self, n: u32) -> Duration {
        let base = self.cfg.cooldown_secs;
        let secs = base.saturating_mul(1u64 << (n.saturating_sub(1)).min(32));
        Duration::from_secs(secs.min(self.cfg.max_cooldown_secs.max(base)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    const T: Admission = Admission { trial: false };

    fn breaker() -> Breaker {
        Breaker::new(BreakerConfig::default())
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_three_consecutive_hard_blocks() {
        let mut b = breaker();
        for _ in 0..2 {
            b.record(T, Verdict::HardBlock, Instant::now());
            assert_eq!(b.state(Instant::now()), BreakerState::Closed);
        }
        b.record(T, Verdict::HardBlock, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::Open);
        assert!(!b.admits(Instant::now()));
        assert_eq!(
            b.open_until(),
            Some(Instant::now() + Duration::from_secs(300))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn success_resets_the_consecutive_count() {
        let mut b = breaker();
        b.record(T, Verdict::HardBlock, Instant::now());
        b.record(T, Verdict::HardBlock, Instant::now());
        b.record(T, Verdict::Success, Instant::now());
        b.record(T, Verdict::HardBlock, Instant::now());
        b.record(T, Verdict::HardBlock, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::Closed);
        assert_eq!(b.failures(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn neutral_verdicts_never_count() {
        let mut b = breaker();
        for _ in 0..10 {
            b.record(T, Verdict::Neutral, Instant::now());
        }
        assert_eq!(b.state(Instant::now()), BreakerState::Closed);
        assert_eq!(b.failures(), 0);
    }

    fn open_it(b: &mut Breaker) {
        for _ in 0..3 {
            b.record(T, Verdict::HardBlock, Instant::now());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_admits_exactly_one_trial_and_success_closes() {
        let mut b = breaker();
        open_it(&mut b);
        advance(Duration::from_secs(299)).await;
        assert_eq!(b.state(Instant::now()), BreakerState::Open);
        advance(Duration::from_secs(1)).await;
        assert_eq!(b.state(Instant::now()), BreakerState::HalfOpen);
        let trial = b.try_admit(Instant::now()).unwrap();
        assert!(trial.trial);
        assert!(
            b.try_admit(Instant::now()).is_none(),
            "second trial admitted"
        );
        assert!(!b.admits(Instant::now()));
        b.record(trial, Verdict::Success, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::Closed);
        // Backoff was reset: the next open is the base cooldown again.
        open_it(&mut b);
        assert_eq!(
            b.open_until(),
            Some(Instant::now() + Duration::from_secs(300))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failed_trial_reopens_with_doubling_up_to_the_cap() {
        let mut b = breaker();
        open_it(&mut b);
        let mut expected = 300;
        for _ in 0..6 {
            advance(Duration::from_secs(expected)).await;
            let trial = b.try_admit(Instant::now()).unwrap();
            b.record(trial, Verdict::HardBlock, Instant::now());
            assert_eq!(b.state(Instant::now()), BreakerState::Open);
            expected = (expected * 2).min(3600);
            assert_eq!(
                b.open_until(),
                Some(Instant::now() + Duration::from_secs(expected))
            );
        }
        assert_eq!(expected, 3600);
    }

    #[tokio::test(start_paused = true)]
    async fn released_trial_lets_another_trial_in() {
        let mut b = breaker();
        open_it(&mut b);
        advance(Duration::from_secs(300)).await;
        let trial = b.try_admit(Instant::now()).unwrap();
        b.release(trial);
        assert!(b.try_admit(Instant::now()).is_some_and(|a| a.trial));
    }

    #[tokio::test(start_paused = true)]
    async fn neutral_trial_keeps_half_open() {
        let mut b = breaker();
        open_it(&mut b);
        advance(Duration::from_secs(300)).await;
        let trial = b.try_admit(Instant::now()).unwrap();
        b.record(trial, Verdict::Neutral, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::HalfOpen);
        assert!(b.admits(Instant::now()));
    }
}
