//! The router: which slot a call gets. Round-robin per strategy over slots
//! whose breaker admits traffic and whose politeness interval has passed;
//! when no breaker admits, the identities resting and how long until the
//! first admits again. It owns the per-(slot, strategy) site state
//! (breaker, politeness, tier memory, login) and decides on it alone: the
//! pool holds it behind one lock, asks it, and turns its answer into a lease
//! (or a wait, or an error).

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::breaker::{Admission, Breaker, BreakerState, Cause};
use super::budget::Budget;
use super::grants::{Identity, Place, Scope};
use super::site::Site;
use crate::config::BreakerConfig;
use crate::error::{Error, ErrorKind};
use crate::strategy::Politeness;

/// Hosts no strategy covers (the open web, `security.allowed_hosts`) are
/// routed each under its own key, `web:<host>`: its own breakers,
/// politeness (`[web]`) and budget. Metrics label them all `web`.
pub const WEB: &str = "web";

/// The routing key of a host no strategy covers.
pub fn web_key(host: &str) -> String {
    format!("{WEB}:{}", host.trim_end_matches('.').to_ascii_lowercase())
}

/// Whether `strategy` is an open-web host's key ([`web_key`]).
pub fn is_web_key(strategy: &str) -> bool {
    strategy
        .strip_prefix(WEB)
        .is_some_and(|r| r.starts_with(':'))
}

#[derive(Default)]
pub struct Router {
    cursor: HashMap<String, usize>,
    /// Strategy → slot → its site state (looked up by `&str`: no key is
    /// allocated on the per-call path).
    pub sites: HashMap<String, HashMap<usize, Site>>,
    in_flight: HashMap<String, usize>,
    /// Strategy → its request budget across all slots.
    budgets: HashMap<String, Budget>,
    /// (MCP session, strategy) → the slot that served its last call.
    sessions: HashMap<(String, String), usize>,
}

/// Sessions remembered for stickiness; past this the memory starts over.
const MAX_SESSIONS: usize = 4096;

/// Open-web hosts whose routing state is kept; past this, hosts idle for
/// [`WEB_IDLE`] are forgotten (a rested breaker, nothing in flight).
const MAX_WEB_HOSTS: usize = 512;
const WEB_IDLE: Duration = Duration::from_secs(600);

impl Router {
    /// A lease of (slot, strategy) ends: one fewer in flight, and its
    /// half-open trial handed back when it never finished.
    pub fn release(
        &mut self,
        slot: usize,
        strategy: &str,
        cfg: BreakerConfig,
        unfinished: Option<Admission>,
    ) {
        let site = self.site(slot, strategy, cfg);
        site.in_flight = site.in_flight.saturating_sub(1);
        if let Some(a) = unfinished {
            site.breaker.release(a);
        }
        if let Some(n) = self.in_flight.get_mut(strategy) {
            *n = n.saturating_sub(1);
        }
    }

    /// Every strategy's budget that exists yet.
    pub fn budgets(&self) -> impl Iterator<Item = (&String, &Budget)> {
        self.budgets.iter()
    }

    pub fn budget(&mut self, strategy: &str, pol: &Politeness) -> &mut Budget {
        if !self.budgets.contains_key(strategy) {
            self.budgets.insert(strategy.to_string(), Budget::new(pol));
        }
        self.budgets
            .get_mut(strategy)
            .unwrap_or_else(|| unreachable!("inserted above"))
    }

    pub fn site(&mut self, slot: usize, strategy: &str, cfg: BreakerConfig) -> &mut Site {
        if !self.sites.contains_key(strategy) {
            if is_web_key(strategy) {
                self.forget_idle_web_hosts(Instant::now());
            }
            self.sites.insert(strategy.to_string(), HashMap::new());
        }
        self.sites
            .get_mut(strategy)
            .map(|m| {
                m.entry(slot)
                    .or_insert_with(|| Site::new(Breaker::new(cfg)))
            })
            .unwrap_or_else(|| unreachable!("inserted above"))
    }
}

impl Router {
    /// Past [`MAX_WEB_HOSTS`] open-web hosts, drop those no one used for
    /// [`WEB_IDLE`] whose breakers are closed and hold nothing in flight.
    fn forget_idle_web_hosts(&mut self, now: Instant) {
        let web = self.sites.keys().filter(|k| is_web_key(k)).count();
        if web < MAX_WEB_HOSTS {
            return;
        }
        let idle = |sites: &mut HashMap<usize, Site>| {
            sites.values_mut().all(|s| {
                s.in_flight == 0
                    && s.breaker.state(now) == BreakerState::Closed
                    && s.retry_after_until.is_none_or(|t| t <= now)
                    && s.last_start
                        .is_none_or(|t| now.duration_since(t) >= WEB_IDLE)
            })
        };
        let gone: Vec<String> = (self.sites.iter_mut())
            .filter_map(|(k, v)| (is_web_key(k) && idle(v)).then_some(k))
            .cloned()
            .collect();
        for k in gone {
            self.sites.remove(&k);
            self.cursor.remove(&k);
            self.budgets.remove(&k);
            self.in_flight.remove(&k);
        }
    }
}

/// One more in flight for `strategy` (its key allocated only the first time).
fn bump(counts: &mut HashMap<String, usize>, strategy: &str) {
    match counts.get_mut(strategy) {
        Some(n) => *n += 1,
        None => {
            counts.insert(strategy.to_string(), 1);
        }
    }
}

/// The router's answer to "which slot?".
pub enum Pick {
    /// This slot, admitted so (counted in flight, its start noted).
    Take { slot: usize, admission: Admission },
    /// Nothing free now: wait until this instant (politeness) or a release.
    Wait(Option<Instant>),
    /// No breaker admits: the identities resting, and when the first one
    /// will admit again (or `None`: when its trial comes back).
    Resting(Resting),
    /// This daemon holds no identity now (a fleet daemon whose identities
    /// another one holds).
    NoneHeld,
    /// The caller's key may use none of the identities here.
    NotGranted,
}

/// What a caller is told to wait for a half-open trial that is out.
pub const TRIAL_OUT: Duration = Duration::from_secs(1);

/// Every slot a call could use refuses it for now.
pub struct Resting {
    slots: usize,
    /// Identities skipped because the caller's key may not use them.
    not_granted: usize,
    rate_limited: usize,
    proxy_down: usize,
    until: Option<Instant>,
}

impl Resting {
    fn new() -> Self {
        Resting {
            slots: 0,
            not_granted: 0,
            rate_limited: 0,
            proxy_down: 0,
            until: None,
        }
    }

    /// Count a slot whose upstream proxy is down (probed again at `probe`).
    fn note_proxy_down(&mut self, probe: Option<Instant>, now: Instant) {
        self.slots += 1;
        self.proxy_down += 1;
        let at = probe.filter(|t| *t > now).unwrap_or(now + TRIAL_OUT);
        self.until = Some(self.until.map_or(at, |u| u.min(at)));
    }

    /// Count a slot whose breaker does not admit now.
    fn note(&mut self, site: &mut Site, now: Instant) {
        self.slots += 1;
        if site.breaker.cause(now) == Some(Cause::RateLimited) {
            self.rate_limited += 1;
        }
        // Open: it admits a trial then; half-open with its trial out: when
        // that trial comes back (say, in a second).
        let at = site
            .breaker
            .open_until()
            .filter(|t| *t > now)
            .unwrap_or(now + TRIAL_OUT);
        self.until = Some(self.until.map_or(at, |u| u.min(at)));
    }

    /// How long until the earliest admission.
    pub fn retry_after(&self, now: Instant) -> Duration {
        self.until
            .map_or(TRIAL_OUT, |t| t.saturating_duration_since(now))
            .max(Duration::from_millis(100))
    }

    /// What the caller is told: who rests, why, and when to try again.
    pub fn error(&self, strategy: &str, pin: Option<usize>, now: Instant) -> Error {
        let after = self.retry_after(now);
        let blocked = self.slots - self.rate_limited - self.proxy_down;
        let who = match pin {
            Some(p) if self.proxy_down > 0 => format!("slot {p}'s proxy is down"),
            Some(p) => format!("slot {p} is resting for `{strategy}`"),
            None if self.proxy_down > 0 => format!(
                "every identity for `{strategy}` is resting ({} of {}: {} rate-limited, {} blocked, {} with its proxy down)",
                self.slots, self.slots, self.rate_limited, blocked, self.proxy_down
            ),
            None => format!(
                "every identity for `{strategy}` is resting ({} of {}: {} rate-limited, {} blocked)",
                self.slots, self.slots, self.rate_limited, blocked
            ),
        };
        let why = if self.proxy_down == self.slots {
            "no request was sent"
        } else {
            "the site pushed back; no request was sent"
        };
        // The others could serve it, but the key may not use them: say so,
        // so the caller knows the call was not moved on.
        let (kind, who) = if self.not_granted > 0 {
            (
                ErrorKind::NotGranted,
                format!(
                    "{} (the identities this key may use; {} other identity(ies) are not granted to it)",
                    who.replacen("every identity", "every granted identity", 1),
                    self.not_granted
                ),
            )
        } else {
            (ErrorKind::Unavailable, who)
        };
        Error::new(
            kind,
            format!("{who}; retry after {:.1} s ({why})", after.as_secs_f64()),
        )
        .retryable(false)
        .with_retry_after(after)
    }
}

/// A breaker as reported to operators.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerReport {
    pub state: BreakerState,
    pub failures: u32,
    /// Seconds until an open breaker admits a trial.
    pub open_for_secs: Option<f64>,
    /// Why it is open or half-open: `blocked` or `rate_limited`.
    pub cause: Option<Cause>,
}

/// The politeness of a strategy, or (`None`) of a host no strategy covers,
/// from `[web]`: per host, since each such host is its own routing key.
pub fn politeness_of(
    rules: Option<&dyn crate::strategy::Strategy>,
    web: &crate::config::WebConfig,
) -> Politeness {
    match rules {
        Some(s) => s.politeness().clone(),
        None => Politeness {
            min_interval_ms: web.min_interval_ms,
            max_in_flight: web.max_in_flight,
            global_max_in_flight: web.global_max_in_flight,
            ..Politeness::default()
        },
    }
}

/// Whether this daemon may use a slot now, as the pool knows it.
pub enum SlotNow {
    Usable,
    /// A free spare, or held by another daemon of the fleet.
    NotHeld,
    /// Its upstream proxy is down (probed again then).
    ProxyDown(Option<Instant>),
}

/// What a pick asks for: the strategy under its politeness, a pinned slot,
/// slots to avoid (a retry moves on), and how many slots there are.
pub struct Ask<'a> {
    pub strategy: &'a str,
    pub politeness: &'a Politeness,
    pub pin: Option<usize>,
    pub avoid: &'a [usize],
    pub slots: usize,
    /// The caller's grants (`None`: every identity).
    pub scope: Option<&'a Scope>,
    /// Each slot's labels, for grants by label.
    pub labels: &'a [Vec<String>],
    /// Each slot's device fingerprint (`None`: not measured), read when
    /// the strategy asks for `distinct_devices`.
    pub devices: &'a [Option<String>],
}

impl Router {
    /// Whether slot `id` is signed in for `strategy` as the router has it.
    fn logged_in(&self, id: usize, strategy: &str) -> bool {
        self.sites
            .get(super::grants::login_key(strategy, Some(strategy)))
            .and_then(|m| m.get(&id))
            .and_then(|s| s.login.as_ref())
            .is_some_and(|l| l.state == crate::strategy::LoginState::LoggedIn)
    }

    /// Under `distinct_devices`, a signed-in slot that shares its device
    /// fingerprint with a lower-numbered signed-in slot of the same site
    /// stays out: the site never gets calls from both.
    fn same_device_as_another(&self, id: usize, ask: &Ask<'_>) -> bool {
        let Some(Some(device)) = ask.devices.get(id) else {
            return false;
        };
        ask.politeness.distinct_devices
            && self.logged_in(id, ask.strategy)
            && (0..id).any(|j| {
                ask.devices
                    .get(j)
                    .is_some_and(|d| d.as_ref() == Some(device))
                    && self.logged_in(j, ask.strategy)
            })
    }

    /// Whether `ask`'s grants let it use slot `id`: its number, labels and
    /// login states as the router has them.
    fn granted(&self, scope: &Scope, id: usize, ask: &Ask<'_>) -> bool {
        let signed_in = |strategy: &str| {
            self.sites
                .get(super::grants::login_key(strategy, Some(ask.strategy)))
                .and_then(|m| m.get(&id))
                .and_then(|s| s.login.as_ref())
                .is_some_and(|l| l.state == crate::strategy::LoginState::LoggedIn)
        };
        let who = Identity {
            slot: id,
            labels: ask.labels.get(id).map_or(&[], Vec::as_slice),
            signed_in: &signed_in,
        };
        scope.permits(
            &who,
            Some(Place {
                key: ask.strategy,
                host: None,
            }),
        )
    }

    /// Where `strategy`'s round robin starts its next pick.
    pub fn cursor(&self, strategy: &str) -> usize {
        self.cursor.get(strategy).copied().unwrap_or(0)
    }

    /// Pick a slot for `ask` now: round robin from the strategy's cursor
    /// over slots `now_of` calls usable whose breaker admits, with room and
    /// their politeness interval passed.
    pub fn pick(
        &mut self,
        ask: &Ask<'_>,
        cfg: BreakerConfig,
        now: Instant,
        now_of: impl Fn(usize) -> SlotNow,
    ) -> Pick {
        let (n, strategy, pol) = (ask.slots, ask.strategy, ask.politeness);
        let cursor = self.cursor.get(strategy).copied().unwrap_or(0);
        let order: Vec<usize> = match ask.pin {
            Some(p) => vec![p],
            None => (0..n)
                .map(|k| (cursor + k) % n)
                .filter(|s| !ask.avoid.contains(s))
                .collect(),
        };
        let global = self.in_flight.get(strategy).copied().unwrap_or(0);
        let mut any_admitted = false;
        let mut earliest: Option<Instant> = None;
        let mut resting = Resting::new();
        for &id in &order {
            if let Some(scope) = ask.scope
                && !self.granted(scope, id, ask)
            {
                resting.not_granted += 1;
                continue;
            }
            if self.same_device_as_another(id, ask) {
                resting.not_granted += 1;
                continue;
            }
            match now_of(id) {
                SlotNow::NotHeld => continue,
                SlotNow::ProxyDown(probe) => {
                    resting.note_proxy_down(probe, now);
                    continue;
                }
                SlotNow::Usable => {}
            }
            let site = self.site(id, strategy, cfg);
            if !site.breaker.admits(now) {
                resting.note(site, now);
                continue;
            }
            any_admitted = true;
            if !site.has_room(pol) || global >= pol.global_max_in_flight {
                continue; // woken by a release
            }
            if let Some(ready) = site.ready_at(pol).filter(|r| *r > now) {
                earliest = Some(earliest.map_or(ready, |e| e.min(ready)));
                continue;
            }
            let Some(admission) = site.breaker.try_admit(now) else {
                continue;
            };
            site.in_flight += 1;
            site.last_start = Some(now);
            bump(&mut self.in_flight, strategy);
            if ask.pin.is_none() {
                match self.cursor.get_mut(strategy) {
                    Some(c) => *c = (id + 1) % n,
                    None => {
                        self.cursor.insert(strategy.to_string(), (id + 1) % n);
                    }
                }
            }
            return Pick::Take {
                slot: id,
                admission,
            };
        }
        if any_admitted {
            Pick::Wait(earliest)
        } else if resting.slots == 0 && resting.not_granted > 0 {
            Pick::NotGranted
        } else if resting.slots == 0 {
            Pick::NoneHeld
        } else {
            Pick::Resting(resting)
        }
    }

    /// Remember that `slot` served `session`'s last call for `strategy`.
    pub fn remember(&mut self, session: &str, strategy: &str, slot: usize) {
        if self.sessions.len() >= MAX_SESSIONS {
            self.sessions.clear();
        }
        self.sessions
            .insert((session.to_string(), strategy.to_string()), slot);
    }

    /// The slot that served `session`'s last call for `strategy`.
    pub fn remembered(&self, session: &str, strategy: &str) -> Option<usize> {
        self.sessions
            .get(&(session.to_string(), strategy.to_string()))
            .copied()
    }

    /// When none of `slots` admits `strategy` now: how long until the first
    /// one does.
    pub fn all_resting(
        &mut self,
        strategy: &str,
        cfg: BreakerConfig,
        slots: impl Iterator<Item = usize>,
        now: Instant,
    ) -> Option<Duration> {
        let mut resting = Resting::new();
        for id in slots {
            let site = self.site(id, strategy, cfg);
            if site.breaker.admits(now) {
                return None;
            }
            resting.note(site, now);
        }
        Some(resting.retry_after(now))
    }

    /// The breaker of (slot, strategy) as operators see it.
    pub fn report(
        &mut self,
        slot: usize,
        strategy: &str,
        cfg: BreakerConfig,
        now: Instant,
    ) -> BreakerReport {
        let site = self.site(slot, strategy, cfg);
        let state = site.breaker.state(now);
        BreakerReport {
            state,
            failures: site.breaker.failures(),
            open_for_secs: site
                .breaker
                .open_until()
                .filter(|_| state == BreakerState::Open)
                .map(|t| t.saturating_duration_since(now).as_secs_f64()),
            cause: site.breaker.cause(now),
        }
    }

    /// Tiers that hard-blocked (slot, strategy), with seconds since the block.
    pub fn tier_memory(
        &mut self,
        slot: usize,
        strategy: &str,
        cfg: BreakerConfig,
        now: Instant,
    ) -> Vec<(u8, f64)> {
        let site = self.site(slot, strategy, cfg);
        site.tier_blocked_at
            .iter()
            .enumerate()
            .filter_map(|(tier, at)| at.map(|t| (tier as u8, now.duration_since(t).as_secs_f64())))
            .collect()
    }

    /// Close the breakers of `slot` (all strategies, or one) and forget its
    /// tier blocks.
    pub fn reset(&mut self, slot: usize, strategy: Option<&str>) {
        for (name, sites) in self.sites.iter_mut() {
            let Some(site) = sites.get_mut(&slot) else {
                continue;
            };
            if strategy.is_none_or(|x| x == name) {
                site.breaker.reset();
                site.tier_blocked_at.iter_mut().for_each(|t| *t = None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_in(router: &mut Router, slot: usize, strategy: &str, cfg: BreakerConfig) {
        router.site(slot, strategy, cfg).login = Some(super::super::LoginRecord {
            state: crate::strategy::LoginState::LoggedIn,
            since: Some(1),
            evidence: None,
        });
    }

    /// `[routing] distinct_devices`: of two signed-in identities that are
    /// one device, only the lower numbered takes the site's calls; a
    /// signed-out one, another device, or the flag off changes nothing.
    #[test]
    fn signed_in_identities_on_one_device_never_both_take_the_site() {
        let cfg = BreakerConfig::default();
        let mut pol = Politeness {
            min_interval_ms: 0,
            max_in_flight: 10,
            ..Politeness::default()
        };
        pol.distinct_devices = true;
        let devices = vec![
            Some("d1".to_string()),
            Some("d1".to_string()),
            Some("d2".to_string()),
        ];
        let picks = |router: &mut Router, pol: &Politeness| -> Vec<usize> {
            let ask = Ask {
                strategy: "shop",
                politeness: pol,
                pin: None,
                avoid: &[],
                slots: 3,
                scope: None,
                labels: &[],
                devices: &devices,
            };
            (0..6)
                .filter_map(
                    |_| match router.pick(&ask, cfg, Instant::now(), |_| SlotNow::Usable) {
                        Pick::Take { slot, .. } => Some(slot),
                        _ => None,
                    },
                )
                .collect()
        };
        let mut router = Router::default();
        signed_in(&mut router, 0, "shop", cfg);
        assert!(
            picks(&mut router, &pol).contains(&1),
            "slot 1 is signed out: it takes calls"
        );
        let mut router = Router::default();
        for s in 0..3 {
            signed_in(&mut router, s, "shop", cfg);
        }
        let got = picks(&mut router, &pol);
        assert!(!got.contains(&1), "{got:?}");
        assert!(got.contains(&0) && got.contains(&2), "{got:?}");
        pol.distinct_devices = false;
        let mut router = Router::default();
        for s in 0..3 {
            signed_in(&mut router, s, "shop", cfg);
        }
        assert!(picks(&mut router, &pol).contains(&1));
    }
}
