//! Login state per (slot, strategy): `logged_in`, `logged_out` or
//! `unknown`, with when it last changed and the marker that showed it. Set
//! by every answer of a strategy with a `[session]` table (through the
//! lease), read by the cascade's routing of operations that
//! `requires_login`, reported in `pool_status`, `idpool slots` and
//! `/metrics`; a change is a `login_state` event.

use super::Leases;
use crate::routing::LoginRecord;
use crate::strategy::LoginState;

impl Leases {
    /// Whether `slot` is signed in (`logged_in`) on `strategy` now.
    pub fn signed_in(&self, slot: usize, strategy: &str) -> bool {
        self.login(slot, strategy).state == LoginState::LoggedIn
    }

    /// Slot `slot`'s login state for `strategy`.
    pub fn login(&self, slot: usize, strategy: &str) -> LoginRecord {
        let router = self.router.lock();
        router
            .sites
            .get(strategy)
            .and_then(|m| m.get(&slot))
            .and_then(|s| s.login.clone())
            .unwrap_or_else(LoginRecord::unknown)
    }

    /// Record what an answer showed; a change is an event and moves the gauge.
    pub(crate) fn set_login(&self, slot: usize, strategy: &str, state: LoginState, evidence: &str) {
        let before = {
            let mut router = self.router.lock();
            let site = router.site(slot, strategy, self.cfg.breaker);
            let before = site.login.as_ref().map_or(LoginState::Unknown, |l| l.state);
            if before == state {
                // The evidence of the change is kept; nothing to write.
                return;
            }
            site.login = Some(LoginRecord {
                state,
                since: Some(unix_now()),
                evidence: Some(evidence.to_string()),
            });
            before
        };
        gauge(slot, strategy, state);
        tracing::info!(
            slot,
            strategy,
            from = before.as_str(),
            to = state.as_str(),
            evidence,
            "login state changed"
        );
        self.events.emit(
            "login_state",
            Some(slot),
            Some(strategy),
            serde_json::json!({"from": before.as_str(), "to": state.as_str(), "evidence": evidence}),
        );
    }

    /// Forget every login state of `slot`, and the sign-in walls it met
    /// (a retired identity signs in, and asks, anew).
    pub(crate) fn forget_logins(&self, slot: usize) {
        let mut router = self.router.lock();
        for (name, sites) in router.sites.iter_mut() {
            let Some(site) = sites.get_mut(&slot) else {
                continue;
            };
            site.walled.clear();
            if site.login.take().is_some() {
                gauge(slot, name, LoginState::Unknown);
            }
        }
    }

    /// Slots that may try `op` of `strategy` signed out (none may be signed
    /// in): in hand, and whose signed-out answer for it was not the sign-in
    /// wall within [`SIGNED_OUT_WALL_MEMORY`].
    pub fn may_try_signed_out(&self, strategy: &str, op: &str) -> Vec<usize> {
        let now = tokio::time::Instant::now();
        let router = self.router.lock();
        let site = router.sites.get(strategy);
        (0..self.slots().len())
            .filter(|s| self.in_hand(*s))
            .filter(|s| {
                site.and_then(|m| m.get(s))
                    .is_none_or(|x| !x.walled_lately(op, now, SIGNED_OUT_WALL_MEMORY))
            })
            .collect()
    }

    /// Slots that may serve an operation that needs a signed-in identity
    /// for `strategy`: `logged_in` or `unknown` (a `logged_out` one cannot).
    pub fn may_be_signed_in(&self, strategy: &str) -> Vec<usize> {
        (0..self.slots().len())
            .filter(|s| self.in_hand(*s))
            .filter(|s| self.login(*s, strategy).state != LoginState::LoggedOut)
            .collect()
    }
}

/// How long a signed-out identity that met an operation's sign-in wall is
/// not sent to that page again signed out: the site's rule rarely changes
/// within the hour, and the call goes to the fallback at once meanwhile.
pub const SIGNED_OUT_WALL_MEMORY: std::time::Duration = std::time::Duration::from_secs(3600);

/// `idpool_slot_login_state{slot, strategy, state}`: 1 for the current state.
fn gauge(slot: usize, strategy: &str, state: LoginState) {
    for s in [
        LoginState::LoggedIn,
        LoginState::LoggedOut,
        LoginState::Unknown,
    ] {
        metrics::gauge!("idpool_slot_login_state",
            "slot" => slot.to_string(), "strategy" => strategy.to_string(), "state" => s.as_str())
        .set(if s == state { 1.0 } else { 0.0 });
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Leases {
    /// The linkage report ([`crate::identity::persona::linkage::report`])
    /// over every slot measured at calibration, with `signed_in_sharing`:
    /// per strategy, the pairs of its signed-in identities that are one
    /// device to a fingerprinting library.
    pub fn linkage(&self) -> serde_json::Value {
        use crate::identity::persona::linkage;
        let measured: Vec<(usize, linkage::Components)> = self
            .slots
            .iter()
            .filter_map(|s| s.components().map(|c| (s.id, c)))
            .collect();
        let mut report = linkage::report(&measured);
        report["signed_in_sharing"] = serde_json::json!(self.signed_in_sharing());
        report
    }

    /// Per strategy with accounts: pairs of signed-in identities sharing a
    /// device fingerprint (what `doctor` warns about).
    pub fn signed_in_sharing(&self) -> std::collections::BTreeMap<String, Vec<[usize; 2]>> {
        let devices: Vec<Option<String>> =
            self.slots.iter().map(|s| s.device_fingerprint()).collect();
        let registry = self.registry();
        let mut out = std::collections::BTreeMap::new();
        for strategy in registry.all().filter(|s| s.login().is_some()) {
            let name = strategy.name();
            let mut pairs = Vec::new();
            for (a, da) in devices.iter().enumerate() {
                for (b, db) in devices.iter().enumerate().skip(a + 1) {
                    if da.is_some()
                        && da == db
                        && self.signed_in(a, name)
                        && self.signed_in(b, name)
                    {
                        pairs.push([a, b]);
                    }
                }
            }
            if !pairs.is_empty() {
                out.insert(name.to_string(), pairs);
            }
        }
        out
    }
}
