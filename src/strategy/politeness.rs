//! How hard a strategy may use one identity, and the site as a whole.

use serde::Deserialize;

/// How hard a strategy may use one identity, and the site as a whole.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Politeness {
    /// Minimum gap between two request starts on one slot, in milliseconds.
    pub min_interval_ms: u64,
    /// Requests in flight at once on one slot.
    pub max_in_flight: usize,
    /// Requests in flight at once over the whole pool.
    pub global_max_in_flight: usize,
    /// A fixed request budget across all slots, per minute (none: only
    /// what the site's pushback sets).
    pub max_requests_per_minute: Option<f64>,
    /// Halve the budget when several identities are pushed back, grow it
    /// back on successes.
    pub adaptive: bool,
    /// The adaptive budget's floor, per minute.
    pub min_requests_per_minute: f64,
    /// Requests per minute each success adds back.
    pub increase_per_success: f64,
    /// `[routing] distinct_devices`: the site's signed-in identities never
    /// share a device fingerprint (of those that do, only the lowest
    /// numbered takes the site's calls). Set from the `[routing]` table,
    /// not `[politeness]`: it travels with the rules the router reads.
    #[serde(skip)]
    pub distinct_devices: bool,
}

impl Default for Politeness {
    fn default() -> Self {
        Politeness {
            min_interval_ms: 1000,
            max_in_flight: 1,
            global_max_in_flight: 8,
            max_requests_per_minute: None,
            adaptive: true,
            min_requests_per_minute: 6.0,
            increase_per_success: 1.0,
            distinct_devices: false,
        }
    }
}

impl Politeness {
    /// What is wrong with these numbers, if anything.
    pub(super) fn problem(&self) -> Option<&'static str> {
        let budget_ok = |x: f64| x.is_finite() && x > 0.0;
        if self.max_in_flight == 0 || self.global_max_in_flight == 0 {
            Some("politeness: max_in_flight and global_max_in_flight must be at least 1")
        } else if !budget_ok(self.min_requests_per_minute) {
            Some("politeness.min_requests_per_minute must be a positive number")
        } else if self.max_requests_per_minute.is_some_and(|m| !budget_ok(m)) {
            Some("politeness.max_requests_per_minute must be a positive number")
        } else if self
            .max_requests_per_minute
            .is_some_and(|m| m < self.min_requests_per_minute)
        {
            Some("politeness.max_requests_per_minute is below min_requests_per_minute")
        } else if !(self.increase_per_success.is_finite() && self.increase_per_success >= 0.0) {
            Some("politeness.increase_per_success must be zero or more")
        } else {
            None
        }
    }
}
