//! The pool's identities by number, for what is done to one outside a
//! site's work: an operator's commands (its browser closed, its cookies
//! counted, its calibration run), the reports (`pool_status`, `/metrics`)
//! and the daemon's start and end. The slots stay in the lease: this hands
//! out numbers, reports and plain facts, never a slot.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::state::Leases;
use crate::error::{Error, ErrorKind, Result};
use crate::identity::browser::{BrowserFacts, SlotBrowser};
use crate::identity::jar::Jar;
use crate::identity::profile::{Profile, ProxyUrl};
use crate::identity::slot::{CalibrationStatus, PersonHold, Slot, SlotIdentity};
use crate::wire::egress::EgressFacts;

/// The pool's identities, by number (see [`Leases::identities`]).
pub struct Identities<'a> {
    leases: &'a Leases,
}

/// What `/metrics` shows of one identity: plain facts, read once.
pub struct Facts {
    pub browser: BrowserFacts,
    pub cookies: usize,
    pub last_success: Option<SystemTime>,
    pub egress: EgressFacts,
    pub proxy_down: bool,
    pub generation: u64,
    pub calibration: CalibrationStatus,
}

/// What a status report of an identity takes from outside it: the
/// strategies to report breakers for, those with accounts (login states),
/// the browser sessions open (id, slot) and the installed Chromium.
pub struct View<'a> {
    pub strategies: &'a [String],
    pub with_accounts: &'a [String],
    pub sessions: &'a [(String, usize)],
    pub chromium: Option<u32>,
}

impl Leases {
    /// The identities by number.
    pub fn identities(&self) -> Identities<'_> {
        Identities { leases: self }
    }
}

impl<'a> Identities<'a> {
    fn slots(&self) -> &'a [std::sync::Arc<Slot>] {
        &self.leases.slots
    }

    /// How many identities the pool has (spares included).
    pub fn len(&self) -> usize {
        self.slots().len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots().is_empty()
    }

    /// `id` if the pool has it, else an invalid argument naming how many it
    /// has.
    pub fn check(&self, id: usize) -> Result<usize> {
        if id < self.len() {
            return Ok(id);
        }
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "slot {id} does not exist (the pool has {} slots)",
                self.len()
            ),
        )
        .retryable(false))
    }

    /// `one` (checked), or every identity.
    pub fn chosen(&self, one: Option<usize>) -> Result<Vec<usize>> {
        match one {
            Some(id) => Ok(vec![self.check(id)?]),
            None => Ok((0..self.len()).collect()),
        }
    }

    fn slot(&self, id: usize) -> Result<&'a std::sync::Arc<Slot>> {
        let id = self.check(id)?;
        Ok(&self.slots()[id])
    }

    /// Close `id`'s browser (it relaunches on next use with the same
    /// profile and cookies); whether one was running.
    pub async fn close_browser(&self, id: usize) -> Result<bool> {
        let slot = self.slot(id)?;
        let was_running = slot.browser_facts().running;
        slot.browser().close().await;
        Ok(was_running)
    }

    /// How many cookies `id`'s jar holds for `domain` (and its subdomains).
    pub fn cookies_for(&self, id: usize, domain: &str) -> usize {
        self.slots()
            .get(id)
            .map_or(0, |s| s.jar().export_for_domain(domain).len())
    }

    /// Calibrate `id`'s HTTP tier against its browser now: the record.
    pub async fn calibrate(&self, id: usize) -> Result<Value> {
        let record = self.slot(id)?.calibrate_now().await?;
        Ok(json!(record))
    }

    /// The profile `id` was opened with.
    pub fn profile(&self, id: usize) -> Option<&'a Profile> {
        self.slots().get(id).map(|s| &s.profile)
    }

    /// [`Identities::profile`], or an invalid argument.
    pub fn profile_of(&self, id: usize) -> Result<&'a Profile> {
        Ok(&self.slot(id)?.profile)
    }

    /// `id`'s browser (launched on first use), for work on it outside a
    /// site's request: a browsing session's tab, a session file's storage.
    pub fn browser(&self, id: usize) -> Result<&'a SlotBrowser> {
        Ok(self.slot(id)?.browser())
    }

    /// `id`'s cookie jar.
    pub fn jar(&self, id: usize) -> Result<&'a std::sync::Arc<Jar>> {
        Ok(self.slot(id)?.jar())
    }

    /// Save `id`'s jar if it changed (a failure is logged).
    pub async fn save_jar(&self, id: usize) {
        if let Ok(slot) = self.slot(id) {
            slot.save_jar().await;
        }
    }

    /// `id`'s folder (`<data_dir>/slots/<id>`).
    pub fn dir(&self, id: usize) -> Result<&'a std::path::Path> {
        Ok(&self.slot(id)?.dir)
    }

    /// `id`'s record now: session, generation, birth, persona.
    pub fn record(&self, id: usize) -> Result<SlotIdentity> {
        Ok(self.slot(id)?.identity())
    }

    /// Make `id` the identity `new` (an adopted or imported one): its
    /// session renders the proxy for both tiers.
    pub fn take_identity(&self, id: usize, new: &SlotIdentity) -> Result<()> {
        self.slot(id)?.take_identity(new)
    }

    /// The upstream proxy `id` goes through now (credentials inside:
    /// display it redacted).
    pub fn upstream(&self, id: usize) -> Result<Option<ProxyUrl>> {
        Ok(self.slot(id)?.upstream())
    }

    /// `id`'s last calibration record, as JSON (`None` before one).
    pub fn calibration_record(&self, id: usize) -> Result<Option<Value>> {
        let record = self.slot(id)?.calibration_record();
        Ok(record.and_then(|r| serde_json::to_value(r).ok()))
    }

    /// Apply a calibration record carried by a bundle, when it was made
    /// with this browser and profile; whether it applied.
    pub fn adopt_calibration(&self, id: usize, record: Value) -> Result<bool> {
        self.slot(id)?.adopt_calibration(record)
    }

    /// Hand `id` to a person (a live view): `None` while one has it.
    pub fn hold_for_person(&self, id: usize) -> Result<Option<PersonHold>> {
        Ok(self.slot(id)?.hold_for_person())
    }

    /// A page `id`'s browser loaded outside a lease's request (a person's
    /// navigation) counts as its request too.
    pub fn count_page(&self, id: usize) {
        if let Some(s) = self.slots().get(id) {
            s.count_page();
        }
    }

    /// Every identity's browser facts, in order.
    pub fn browser_facts(&self) -> Vec<BrowserFacts> {
        self.slots().iter().map(|s| s.browser_facts()).collect()
    }

    /// Browser operations of every identity so far (moves when any browser
    /// is used).
    pub fn browser_uses(&self) -> u64 {
        self.slots().iter().map(|s| s.browser_uses()).sum()
    }

    /// Close the browsers nobody used for `idle`.
    pub async fn close_idle_browsers(&self, idle: std::time::Duration) {
        for slot in self.slots() {
            slot.browser().close_if_idle(idle).await;
        }
    }

    /// Whether any identity goes through an upstream proxy.
    pub fn proxied(&self) -> bool {
        self.slots().iter().any(|s| s.egress().has_upstream())
    }

    /// Probe the upstream proxies whose probe is due (those marked down);
    /// then each identity's proxy state: down, with its last error and
    /// failures.
    pub async fn probe_proxies(&self) -> Vec<(bool, Option<String>, u32)> {
        for slot in self.slots() {
            if slot.egress().health().probe_due() {
                slot.egress().probe_upstream().await;
            }
        }
        (self.slots().iter())
            .map(|s| {
                let r = s.egress().health().report();
                (s.proxy_down(), r.last_error, r.failures)
            })
            .collect()
    }

    /// Whether `id`'s browser may be launched ahead of need: no person
    /// holds it, its proxy is up and it does not run.
    pub fn may_warm(&self, id: usize) -> bool {
        self.slots()
            .get(id)
            .is_some_and(|s| !(s.held_by_person() || s.proxy_down() || s.browser_facts().running))
    }

    /// Launch `id`'s browser ahead of need (`browser.standby`) if it
    /// [may](Self::may_warm): whether it launched now.
    pub async fn warm_browser(&self, id: usize) -> Result<bool> {
        let slot = self.slot(id)?;
        if !self.may_warm(id) {
            return Ok(false);
        }
        slot.warm_browser().await
    }

    /// What `/metrics` shows of `id`.
    pub fn facts(&self, id: usize) -> Option<Facts> {
        let s = self.slots().get(id)?;
        Some(Facts {
            browser: s.browser_facts(),
            cookies: s.jar().count(),
            last_success: s.health().last_success,
            egress: s.egress_facts(),
            proxy_down: s.proxy_down(),
            generation: s.identity().generation,
            calibration: s.calibration_status(),
        })
    }

    /// A count that moves whenever any identity does something a report
    /// shows (see `Slot::activity`).
    pub fn activity(&self) -> u64 {
        (self.slots().iter()).fold(0u64, |a, s| a.wrapping_add(s.activity()))
    }

    /// End Chromium left behind by an earlier run of any identity (at
    /// start-up): each slot and the pid ended.
    pub async fn end_stale_browsers(&self) -> Vec<(usize, u32)> {
        let mut ended = Vec::new();
        for slot in self.slots() {
            if let Some(pid) = slot.browser().end_stale().await {
                ended.push((slot.id, pid));
            }
        }
        ended
    }

    /// Close every browser for good, reaping each Chromium: whatever still
    /// runs (a calibration, a call being cancelled) launches none again.
    pub async fn close_browsers(&self) {
        let slots = self.slots();
        futures_util::future::join_all(slots.iter().map(|s| s.browser().close_for_good())).await;
    }

    /// The linkage report ([`crate::identity::persona::linkage::report`])
    /// over every slot measured at calibration, with `signed_in_sharing`:
    /// per strategy, the pairs of its signed-in identities that are one
    /// device to a fingerprinting library.
    pub fn linkage(&self) -> serde_json::Value {
        use crate::identity::persona::linkage;
        let measured: Vec<(usize, linkage::Components)> = self
            .slots()
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
        let devices: Vec<Option<String>> = self
            .slots()
            .iter()
            .map(|s| s.device_fingerprint())
            .collect();
        let registry = self.leases.registry();
        let sites = self.leases.sites();
        let mut out = std::collections::BTreeMap::new();
        for strategy in registry.all().filter(|s| s.login().is_some()) {
            let name = strategy.name();
            let mut pairs = Vec::new();
            for (a, da) in devices.iter().enumerate() {
                for (b, db) in devices.iter().enumerate().skip(a + 1) {
                    if da.is_some()
                        && da == db
                        && sites.signed_in(a, name)
                        && sites.signed_in(b, name)
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

    /// Standby browsers waiting for a call (launched ahead of need, not
    /// used since).
    pub fn standby_ready(&self) -> usize {
        (self.slots().iter())
            .filter(|s| {
                let f = s.browser_facts();
                f.running && f.standby
            })
            .count()
    }

    /// Save every jar that changed.
    pub async fn save_jars(&self) {
        for slot in self.slots() {
            slot.save_jar().await;
        }
    }

    /// `id` as `pool_status` reports it.
    pub fn report(&self, id: usize, view: &View<'_>) -> Value {
        let Some(slot) = self.slots().get(id) else {
            return Value::Null;
        };
        let leases = self.leases;
        let mut breakers = Map::new();
        for name in view.strategies {
            let b = leases.sites().breaker(id, name);
            let tiers: Map<String, Value> = (leases.sites().tier_memory(id, name).into_iter())
                .map(|(t, ago)| (t.to_string(), json!({"blocked_secs_ago": round1(ago)})))
                .collect();
            breakers.insert(
                name.clone(),
                json!({
                    "state": b.state.as_str(),
                    "cause": b.cause.map(|c| c.as_str()),
                    "failures": b.failures,
                    "open_for_secs": b.open_for_secs.map(round1),
                    "tiers_blocked": tiers,
                }),
            );
        }
        let login: Map<String, Value> = (view.with_accounts.iter())
            .map(|name| (name.clone(), json!(leases.sites().login(id, name))))
            .collect();
        let health = slot.health();
        let facts = slot.browser_facts();
        let fleet = leases.fleet();
        let calibration = slot.calibration_status();
        let profile = &slot.profile;
        json!({
            "slot": id,
            "fleet_id": fleet.and_then(|f| f.fleet_id(id)),
            "held": leases.in_hand(id),
            "spare": fleet.is_some_and(|f| f.is_spare(id)),
            "profile": profile.name,
            "emulation": profile.emulation.name(),
            "user_agent": profile.user_agent,
            "proxy": slot.upstream().map(|p| p.redacted()),
            "proxy_health": slot.upstream().map(|_| slot.egress().health().report()),
            "identity": slot.identity(),
            "breakers": breakers,
            "login": login,
            "browser": facts,
            "browser_sessions": view.sessions.iter().filter(|(_, s)| *s == id).count(),
            "egress": slot.egress_facts(),
            "versions": versions(slot, &facts, view.chromium),
            "calibration": calibration,
            "fidelity": { "browser": calibration.browser },
            "device": slot.device_fingerprint(),
            "pretend_os": profile.pretend_os.then(|| format!(
                "profile `{}` claims {} on a {} machine (pretend_os): its fonts, voices and WebGL are the machine's",
                profile.name,
                profile.hints_platform(),
                std::env::consts::OS
            )),
            "cookies": {
                "count": slot.jar().count(),
                "last_saved": slot.jar().last_saved(),
                "save_error": slot.jar().save_error(),
            },
            "requests": health.requests,
            "last_success": health.last_success.map(unix),
            "last_error": health.last_error,
        })
    }
}

/// The Chromium the slot runs (or would launch: `installed`), the version
/// its user agent claims, its HTTP tier's emulation, and the gap between
/// the browser and that emulation (calibration covers what the gap
/// changes).
fn versions(slot: &Slot, facts: &BrowserFacts, installed: Option<u32>) -> Value {
    let chromium = (facts.version.as_deref())
        .and_then(crate::identity::browser::launcher::major_of)
        .or(installed);
    let emulation = slot.profile.emulation_major();
    json!({
        "chromium": chromium,
        "user_agent": slot.profile.user_agent_major(),
        "user_agent_pinned": slot.profile.user_agent_pinned,
        "emulation": slot.profile.emulation.name(),
        "emulation_gap": chromium.zip(emulation).map(|(c, e)| i64::from(c) - i64::from(e)),
    })
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
