//! The circuit breaker of one (slot, strategy): whether the site lets this
//! identity in, and when to ask again.
//!
//! - `closed` → `open` after `threshold` consecutive hard blocks; that open
//!   lasts the cooldown, which doubles on every re-open up to the cap.
//! - A rate limit opens it at once, to rest: for the site's `Retry-After`,
//!   else for `rest_secs`, doubling on every rate limit in a row up to the cap.
//! - Then `half_open` admits exactly one trial: success closes (and resets
//!   both backoffs), a hard block or a rate limit re-opens.
//! - A request admitted before the breaker opened decides nothing when it
//!   comes back; empty pages and network errors are neutral.
//!
//! Time is tokio's, so tests drive it with paused time.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::config::BreakerConfig;

/// Breaker state, named exactly as in metrics, JSON and docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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
    /// The site says this identity goes too fast (with its `Retry-After`).
    RateLimited(Option<Duration>),
    /// Empty page, network error, timeout, 5xx, challenge: changes nothing.
    Neutral,
}

/// Why a breaker is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Hard blocks (`threshold` in a row, or a failed trial).
    Blocked,
    /// A rate limit: the identity rests.
    RateLimited,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Blocked => "blocked",
            Cause::RateLimited => "rate_limited",
        }
    }
}

/// One (slot, strategy) breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    cfg: BreakerConfig,
    state: BreakerState,
    /// Consecutive hard blocks while closed.
    failures: u32,
    /// Times opened by blocks since the last close; drives the doubling.
    opens: u32,
    /// Rate limits since the last close; drives the rest's doubling.
    rests: u32,
    /// Why it is (or was last) open.
    cause: Cause,
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
            rests: 0,
            cause: Cause::Blocked,
            open_until: None,
            trial_out: false,
        }
    }

    /// Why the breaker is open or half-open (`None` when closed).
    pub fn cause(&mut self, now: Instant) -> Option<Cause> {
        (self.state(now) != BreakerState::Closed).then_some(self.cause)
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

    /// Record the verdict of a request that was admitted. Only a request
    /// admitted while closed, or the half-open trial, speaks for the
    /// identity now; one admitted before the breaker opened may still
    /// lengthen a rest, nothing more.
    pub fn record(&mut self, admission: Admission, verdict: Verdict, now: Instant) {
        if admission.trial {
            self.trial_out = false;
        }
        let state = self.state(now);
        let current = admission.trial || state == BreakerState::Closed;
        match verdict {
            Verdict::Neutral => {}
            Verdict::Success if current => {
                self.state = BreakerState::Closed;
                self.failures = 0;
                self.opens = 0;
                self.rests = 0;
                self.open_until = None;
            }
            Verdict::Success => {}
            Verdict::HardBlock if state == BreakerState::Closed => {
                self.failures += 1;
                if self.failures >= self.cfg.threshold.max(1) {
                    self.open(now);
                }
            }
            // A failed trial re-opens with a doubled cooldown.
            Verdict::HardBlock if admission.trial => self.open(now),
            Verdict::HardBlock => {}
            Verdict::RateLimited(asked) => {
                if current {
                    self.rests += 1;
                }
                let until = now + asked.unwrap_or_else(|| self.rest(self.rests.max(1)));
                if state == BreakerState::Open && self.open_until.is_some_and(|t| t >= until) {
                    return; // already resting at least that long
                }
                self.state = BreakerState::Open;
                self.cause = Cause::RateLimited;
                self.trial_out = false;
                self.open_until = Some(until);
            }
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
        self.cause = Cause::Blocked;
        self.trial_out = false;
        self.open_until = Some(now + self.cooldown(self.opens));
    }

    /// Cooldown for the `n`th open in a row: base × 2^(n-1), capped.
    pub fn cooldown(&self, n: u32) -> Duration {
        let base = self.cfg.cooldown_secs;
        let secs = base.saturating_mul(1u64 << (n.saturating_sub(1)).min(32));
        Duration::from_secs(secs.min(self.cfg.max_cooldown_secs.max(base)))
    }

    /// The rest after the `n`th rate limit in a row without `Retry-After`:
    /// `rest_secs` × 2^(n-1), capped like the cooldown.
    pub fn rest(&self, n: u32) -> Duration {
        let base = self.cfg.rest_secs.max(1);
        let secs = base.saturating_mul(1u64 << (n.saturating_sub(1)).min(32));
        Duration::from_secs(secs.min(self.cfg.max_cooldown_secs.max(base)))
    }
}

/// A breaker as the fleet stores it: its counters, and how long it stays
/// open from the moment it was written (clocks of other daemons do not
/// matter, only elapsed time).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct BreakerSnap {
    pub state: BreakerState,
    pub failures: u32,
    pub opens: u32,
    pub rests: u32,
    pub cause: Cause,
    /// Milliseconds an open breaker stays open.
    pub open_for_ms: Option<u64>,
}

impl Breaker {
    /// What the fleet stores of this breaker now.
    pub fn snapshot(&mut self, now: Instant) -> BreakerSnap {
        let state = self.state(now);
        BreakerSnap {
            state,
            failures: self.failures,
            opens: self.opens,
            rests: self.rests,
            cause: self.cause,
            open_for_ms: self
                .open_until
                .filter(|_| state == BreakerState::Open)
                .map(|t| t.saturating_duration_since(now).as_millis() as u64),
        }
    }

    /// A breaker taken over from the fleet, `elapsed` after it was stored.
    pub fn restore(cfg: BreakerConfig, s: &BreakerSnap, elapsed: Duration, now: Instant) -> Self {
        let mut b = Breaker::new(cfg);
        b.failures = s.failures;
        b.opens = s.opens;
        b.rests = s.rests;
        b.cause = s.cause;
        match (s.state, s.open_for_ms) {
            (BreakerState::Open, Some(ms)) => {
                b.state = BreakerState::Open;
                b.open_until = Some(now + Duration::from_millis(ms).saturating_sub(elapsed));
            }
            // A trial out elsewhere never comes back here: one is free.
            (BreakerState::HalfOpen, _) | (BreakerState::Open, None) => {
                b.state = BreakerState::HalfOpen;
            }
            (BreakerState::Closed, _) => {}
        }
        b
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
    async fn a_rate_limit_rests_at_once_and_doubles_until_a_success() {
        let mut b = breaker();
        b.record(T, Verdict::RateLimited(None), Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::Open);
        assert_eq!(b.cause(Instant::now()), Some(Cause::RateLimited));
        assert_eq!(b.failures(), 0, "a rate limit is not a block");
        // Requests that were already on their way do not stretch it.
        b.record(T, Verdict::RateLimited(None), Instant::now());
        let first = Duration::from_secs(30);
        assert_eq!(b.open_until(), Some(Instant::now() + first));
        let mut expected = first;
        for _ in 0..3 {
            advance(expected).await;
            let trial = b.try_admit(Instant::now()).expect("trial");
            assert!(b.try_admit(Instant::now()).is_none(), "one trial");
            b.record(trial, Verdict::RateLimited(None), Instant::now());
            expected *= 2;
            assert_eq!(b.open_until(), Some(Instant::now() + expected));
        }
        // The site's own word wins, and a success resets the doubling.
        advance(expected).await;
        let trial = b.try_admit(Instant::now()).expect("trial");
        b.record(
            trial,
            Verdict::RateLimited(Some(Duration::from_secs(7))),
            Instant::now(),
        );
        assert_eq!(
            b.open_until(),
            Some(Instant::now() + Duration::from_secs(7))
        );
        advance(Duration::from_secs(7)).await;
        let trial = b.try_admit(Instant::now()).expect("trial");
        b.record(trial, Verdict::Success, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::Closed);
        b.record(T, Verdict::RateLimited(None), Instant::now());
        assert_eq!(b.open_until(), Some(Instant::now() + first));
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_answer_from_before_the_open_decides_nothing() {
        let mut b = breaker();
        let early = b.try_admit(Instant::now()).expect("closed admits");
        open_it(&mut b);
        b.record(early, Verdict::Success, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::Open, "no free close");
        advance(Duration::from_secs(300)).await;
        b.record(early, Verdict::Success, Instant::now());
        assert_eq!(b.state(Instant::now()), BreakerState::HalfOpen);
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
