//! Whether a slot's upstream proxy works: `up` until `threshold` failures in
//! a row to reach it (from either tier), then `down` (the router leaves the
//! slot alone) until a probe reaches it again. Health is flipped only after
//! several results in a row, as pingora's health checks do.

use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

/// `up` or `down`, as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyState {
    Up,
    Down,
}

impl ProxyState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyState::Up => "up",
            ProxyState::Down => "down",
        }
    }
}

#[derive(Debug)]
struct State {
    state: ProxyState,
    /// Failures in a row.
    failures: u32,
    since: Instant,
    last_error: Option<String>,
    /// When a down proxy is probed next.
    probe_at: Option<Instant>,
}

/// One slot's upstream proxy health.
#[derive(Debug)]
pub struct UpstreamHealth {
    threshold: u32,
    probe_every: Duration,
    state: Mutex<State>,
}

/// A report for `pool_status`.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    pub state: ProxyState,
    pub failures: u32,
    /// Seconds in this state.
    pub for_secs: f64,
    pub last_error: Option<String>,
}

impl UpstreamHealth {
    /// `threshold` failures in a row make it `down`; a down proxy is probed
    /// every `probe_every`.
    pub fn new(threshold: u32, probe_every: Duration) -> Self {
        UpstreamHealth {
            threshold: threshold.max(1),
            probe_every,
            state: Mutex::new(State {
                state: ProxyState::Up,
                failures: 0,
                since: Instant::now(),
                last_error: None,
                probe_at: None,
            }),
        }
    }

    pub fn state(&self) -> ProxyState {
        self.state.lock().state
    }

    pub fn is_down(&self) -> bool {
        self.state() == ProxyState::Down
    }

    /// The proxy could not be reached (or refused us); `true` when this
    /// failure took it down.
    pub fn failed(&self, why: &str) -> bool {
        let now = Instant::now();
        let mut s = self.state.lock();
        s.failures = s.failures.saturating_add(1);
        // Viewers read it (`pool_status`): a proxy error may quote its URL.
        s.last_error = Some(crate::diag::error_line(&why));
        match s.state {
            ProxyState::Up if s.failures >= self.threshold => {
                s.state = ProxyState::Down;
                s.since = now;
                s.probe_at = Some(now + self.probe_every);
                true
            }
            ProxyState::Down => {
                s.probe_at = Some(now + self.probe_every);
                false
            }
            ProxyState::Up => false,
        }
    }

    /// A request went through the proxy; `true` when this brought it back up.
    pub fn succeeded(&self) -> bool {
        let mut s = self.state.lock();
        s.failures = 0;
        if s.state == ProxyState::Down {
            s.state = ProxyState::Up;
            s.since = Instant::now();
            s.probe_at = None;
            s.last_error = None;
            return true;
        }
        false
    }

    /// A down proxy whose probe is due (the caller probes it now).
    pub fn probe_due(&self) -> bool {
        let s = self.state.lock();
        s.state == ProxyState::Down && s.probe_at.is_some_and(|t| Instant::now() >= t)
    }

    /// When a down proxy is probed next (for a caller's `retry_after`).
    pub fn next_probe(&self) -> Option<Instant> {
        self.state.lock().probe_at
    }

    pub fn report(&self) -> HealthReport {
        let s = self.state.lock();
        HealthReport {
            state: s.state,
            failures: s.failures,
            for_secs: (s.since.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            last_error: s.last_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn down_after_failures_in_a_row_probed_then_up() {
        let h = UpstreamHealth::new(3, Duration::from_secs(10));
        assert!(!h.failed("refused"));
        assert!(!h.failed("refused"));
        assert!(!h.succeeded(), "a success resets the count");
        assert!(!h.failed("refused"));
        assert!(!h.failed("refused"));
        assert_eq!(h.state(), ProxyState::Up);
        assert!(h.failed("refused"), "the third in a row takes it down");
        assert!(h.is_down());
        assert!(!h.probe_due());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(h.probe_due());
        assert!(!h.failed("still refused"), "a failed probe keeps it down");
        assert!(!h.probe_due(), "and waits for the next probe");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(h.probe_due());
        assert!(h.succeeded(), "a probe that gets through brings it up");
        assert_eq!(h.report().state, ProxyState::Up);
        assert_eq!(h.report().failures, 0);
    }
}
