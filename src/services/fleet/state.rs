//! What the fleet stores of an identity: its record (who it is: profile,
//! proxy session) and, per strategy, its site state (breaker, `Retry-After`
//! hold, tier memory, login state). Times are kept as "so long from when it
//! was written", so no two daemons' clocks need to agree.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::config::BreakerConfig;
use crate::identity::slot::SlotIdentity;
use crate::routing::LoginRecord;
use crate::routing::Site;
use crate::routing::breaker::{Breaker, BreakerSnap, BreakerState};

/// Who an identity is, wherever it runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdentityRecord {
    pub fleet_id: String,
    /// The node that owns it now, and the slot it sits in there.
    pub node: String,
    pub slot: usize,
    pub profile: String,
    /// Its proxy session and generation (the same IP wherever it runs).
    pub identity: SlotIdentity,
    /// The sites it is signed in to (an identity without a host that is
    /// signed in somewhere is adopted before others).
    #[serde(default)]
    pub signed_in: Vec<String>,
}

/// One (identity, strategy)'s site state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SiteSnap {
    pub breaker: BreakerSnap,
    /// Milliseconds the site's `Retry-After` still holds it back.
    pub retry_after_ms: Option<u64>,
    /// Milliseconds since each tier (index 1..=3) hard-blocked it.
    pub tier_blocked_ago_ms: [Option<u64>; 4],
    pub login: Option<LoginRecord>,
    pub hard_blocks: u64,
    pub successes: u64,
    /// Unix milliseconds when it was written.
    pub at_ms: u64,
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl SiteSnap {
    pub fn of(site: &mut Site, now: Instant) -> SiteSnap {
        SiteSnap {
            breaker: site.breaker.snapshot(now),
            retry_after_ms: site
                .retry_after_until
                .filter(|t| *t > now)
                .map(|t| (t - now).as_millis() as u64),
            tier_blocked_ago_ms: site
                .tier_blocked_at
                .map(|t| t.map(|t| now.saturating_duration_since(t).as_millis() as u64)),
            login: site.login.clone(),
            hard_blocks: site.hard_blocks,
            successes: site.successes,
            at_ms: unix_ms(),
        }
    }

    /// What a write of this state is for: the key changes when the breaker,
    /// a `Retry-After` hold, a tier's block, the login state or the hard
    /// blocks do, not with the clock or a success (`site` gives the
    /// instants the snapshot holds as "so long from now").
    pub fn change_key(&self, site: &Site) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let b = &self.breaker;
        serde_json::to_string(&(
            b.state,
            b.failures,
            b.opens,
            b.rests,
            b.cause,
            &self.login,
            self.hard_blocks,
        ))
        .unwrap_or_default()
        .hash(&mut h);
        site.breaker.open_until().hash(&mut h);
        site.retry_after_until.hash(&mut h);
        site.tier_blocked_at.hash(&mut h);
        h.finish()
    }

    /// How long ago it was written.
    fn age(&self) -> Duration {
        Duration::from_millis(unix_ms().saturating_sub(self.at_ms))
    }

    /// The site state it stands for, here and now.
    pub fn restore(&self, cfg: BreakerConfig, now: Instant) -> Site {
        let age = self.age();
        let mut site = Site::new(Breaker::restore(cfg, &self.breaker, age, now));
        site.retry_after_until = self
            .retry_after_ms
            .map(|ms| Duration::from_millis(ms).saturating_sub(age))
            .filter(|d| !d.is_zero())
            .map(|d| now + d);
        site.tier_blocked_at = self
            .tier_blocked_ago_ms
            .map(|ms| ms.and_then(|ms| now.checked_sub(Duration::from_millis(ms) + age)));
        site.login = self.login.clone();
        site.hard_blocks = self.hard_blocks;
        site.successes = self.successes;
        site
    }

    /// Whether this identity would be admitted for the strategy now (its
    /// breaker is closed, half-open, or open past its time).
    pub fn admits(&self) -> bool {
        match (self.breaker.state, self.breaker.open_for_ms) {
            (BreakerState::Open, Some(ms)) => Duration::from_millis(ms) <= self.age(),
            _ => true,
        }
    }

    /// The breaker state as it stands now (an open one past its time is
    /// half-open), and seconds it stays open.
    pub fn state_now(&self) -> (BreakerState, Option<f64>) {
        match (self.breaker.state, self.breaker.open_for_ms) {
            (BreakerState::Open, Some(ms)) => {
                let left = Duration::from_millis(ms).saturating_sub(self.age());
                if left.is_zero() {
                    (BreakerState::HalfOpen, None)
                } else {
                    (BreakerState::Open, Some(left.as_secs_f64()))
                }
            }
            (s, _) => (s, None),
        }
    }
}
