//! The pool in a fleet (`[cluster]`): which slots hold which fleet
//! identities, and the two loops that keep the fleet's store true.
//!
//! **The beat**, every `lease_ttl / 4` on its own clock, ahead of any other
//! work of this daemon's, is one script (one round trip): it registers the
//! node (address, identities, free spares) for one lease TTL, checks and
//! takes back every lease this daemon holds or should hold (each lives as
//! long as the registration), and reads back the live daemons and the
//! identities without a host. A lease found held by another live daemon is
//! dropped here at once (never used by two); a daemon whose last beat is
//! older than two beats is counted out of the bounds' shares. Each beat's
//! time from when it was due to when Redis had it is kept for a minute:
//! the slowest is what `idpool doctor` holds against the TTL.
//!
//! **The sync**, every beat and whenever calls, breakers, logins or
//! retirements change something (coalesced):
//! 1. writes what changed of each held identity: its record, its jar, its
//!    site states (breakers, holds, tier memory, login states; a success
//!    count alone at most every 30 s); an unchanged identity costs nothing;
//! 2. seats identities that come back to this daemon (its own, held by
//!    another daemon that died);
//! 3. with `adopt = true`, adopts identities without a host into the room
//!    it has (free spares, configured slots whose identity another daemon
//!    holds, then `adopt_beyond_spares` while memory allows), signed-in
//!    ones first, then the longest waiting: same cookies, same proxy
//!    session, same site state, a fresh Chromium profile. An identity is
//!    without a host once its daemon's registration lapsed (one TTL
//!    without a beat), and adopted only a beat after that: a daemon whose
//!    beat was late, not missed, keeps what it holds.
//!
//! Redis away: nothing here blocks a call; the slots keep serving with
//! local state. Redis back: the next beat reconciles (leases re-taken,
//! everything written again), and adoption waits one lease TTL first so
//! every owner re-takes its own before anyone adopts.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use self::state::{IdentityRecord, SiteSnap};
use crate::cluster::{Fleet, NodeInfo};
use crate::lease::Leases;
use tokio_util::sync::CancellationToken;

mod adopt;
pub(crate) mod state;

/// The shortest gap between two heartbeats that calls woke.
const COALESCE: Duration = Duration::from_millis(200);

/// A site state whose only change is its success count is written at most
/// this often (an adopter may start with a count this stale).
const SUCCESSES_EVERY: Duration = Duration::from_secs(30);

/// The heartbeat that keeps the fleet's store true for this daemon's
/// identities, adoption, and the fleet's view.
pub struct FleetSync {
    leases: Arc<Leases>,
    fleet: Arc<Fleet>,
    stop: CancellationToken,
    /// Configured identities the beat found back in this daemon's hands,
    /// for the sync to seat (slot → fleet id).
    regains: parking_lot::Mutex<std::collections::BTreeMap<usize, String>>,
    /// `browser.max_rss_mb`: what a slot of `adopt_beyond_spares` needs free.
    browser_mb: u64,
}

impl FleetSync {
    /// The fleet side of `leases`, when `[cluster]` is on.
    pub fn new(
        leases: Arc<Leases>,
        stop: CancellationToken,
        browser_mb: u64,
    ) -> Option<Arc<FleetSync>> {
        let fleet = leases.fleet()?.clone();
        Some(Arc::new(FleetSync {
            leases,
            fleet,
            stop,
            regains: Default::default(),
            browser_mb,
        }))
    }

    /// The hold table the heartbeat keeps.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Wait (bounded by the commands' timeouts) until the first beat ran
    /// and the fleet has this daemon's identities: before the beat, this
    /// daemon does not know which of its identities another one adopted
    /// while it was away; before the write, a daemon that dies leaves
    /// nothing of them to adopt.
    pub async fn ready(&self) {
        let f = &self.fleet;
        let wait = async {
            loop {
                let n = f.ready_notify.notified();
                if f.written.load(Ordering::Acquire) {
                    return;
                }
                n.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
    }

    pub fn spawn(self: &Arc<Self>) {
        let (f, Ok(rt)) = (&self.fleet, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let stop = self.stop.clone();
        let every = f.cluster.beat_every();
        rt.spawn(crate::cluster::relay_events(
            f.cluster.clone(),
            f.remote.clone(),
            stop.clone(),
        ));
        self.spawn_event_publisher();
        self.spawn_budget_listener();
        // The beat, on its own clock: nothing else this daemon does delays it.
        let weak = Arc::downgrade(self);
        let beat_stop = stop.clone();
        rt.spawn(async move {
            let mut due = Instant::now();
            loop {
                let Some(sync) = weak.upgrade() else { return };
                sync.beat(due).await;
                drop(sync);
                due += every;
                // A beat that ran past the next one's time: the next now.
                due = due.max(Instant::now());
                tokio::select! {
                    () = beat_stop.cancelled() => return,
                    () = tokio::time::sleep_until(due) => {}
                }
            }
        });
        let weak = Arc::downgrade(self);
        let wake = f.push.clone();
        rt.spawn(async move {
            loop {
                let push = wake.notified();
                tokio::pin!(push);
                push.as_mut().enable();
                let Some(sync) = weak.upgrade() else { return };
                let at = Instant::now();
                sync.sync().await;
                drop(sync);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                    () = push => {
                        // Coalesce: a busy pool writes a few times a second,
                        // not once per call.
                        tokio::time::sleep_until(at + COALESCE).await;
                    }
                }
            }
        });
    }

    /// One beat, due at `due` (see the module's notes).
    async fn beat(&self, due: Instant) {
        let f = &self.fleet;
        let c = &f.cluster;
        if !c.is_up() {
            // Away (or not connected yet): once back, every owner gets one
            // lease TTL to take its own again before anyone adopts.
            *f.adopt_after.lock() = Instant::now() + c.lease_ttl();
        }
        let reconnects = c.reconnects();
        if f.seen_reconnects.swap(reconnects, Ordering::AcqRel) != reconnects {
            f.members
                .lock()
                .iter_mut()
                .for_each(|m| m.pushed = crate::cluster::Pushed::default());
            *f.holdings_sent.lock() = None;
            self.leases.events().emit(
                "fleet_reconciled",
                None,
                None,
                serde_json::json!({"node": c.node(), "identities": f.held().len()}),
            );
            f.push.notify_one();
        }
        // The leases to check: every one this daemon holds or should hold
        // (its configured identities), but, just after (re)connecting, not
        // one another daemon held: whoever held it takes it again first.
        let grace = Instant::now() < *f.adopt_after.lock();
        let mine: Vec<(usize, String)> = {
            let m = f.members.lock();
            m.iter()
                .enumerate()
                .filter(|(_, m)| m.owned || !m.spare)
                .filter(|(_, m)| !(m.lost && grace))
                .filter_map(|(i, m)| Some((i, m.fleet_id.clone()?)))
                .collect()
        };
        let check: Vec<String> = mine.iter().map(|(_, fid)| fid.clone()).collect();
        let info = NodeInfo {
            node: c.node().to_string(),
            advertise: c.advertise().to_string(),
            identities: f.held(),
            spare: f.spares_free(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            sent: self.leases.sites().sent_rates(),
            taken: self.leases.sites().taken_rates(),
            beat_ms: f.slowest_beat().as_millis() as u64,
            stale: false,
            silent_ms: 0,
        };
        let holdings = hash_of(&info.identities.join("\n"));
        let changed = *f.holdings_sent.lock() != Some(holdings);
        if let Ok(beat) = c.register(&info, &check, changed).await {
            let took = due.elapsed();
            f.beat_took(due, took);
            metrics::histogram!("idpool_fleet_beat_seconds").record(took.as_secs_f64());
            *f.holdings_sent.lock() = Some(holdings);
            let counted = |nodes: &[NodeInfo]| nodes.iter().filter(|n| !n.stale).count();
            let (before, after) = (counted(&f.view.lock()), counted(&beat.live));
            f.set_live(beat.live);
            if before != after {
                // This daemon's share of every fleet-wide bound moved: calls
                // waiting for a place look again now, not at their timer.
                self.leases.wake();
            }
            *f.unhosted.lock() = (beat.unhosted, beat.oldest_unhosted);
            self.take_owners(mine, beat.owners);
            if beat.unhosted > 0 && f.adopt {
                f.push.notify_one();
            }
        }
        if !f.ready.swap(true, Ordering::AcqRel) {
            // The sync writes this daemon's identities now.
            f.push.notify_one();
        }
    }

    /// What the beat found of the leases it checked: a lease this daemon
    /// holds is its own (one it had lost comes back through the sync); one
    /// held by another live daemon is dropped here at once.
    fn take_owners(&self, mine: Vec<(usize, String)>, owners: Vec<String>) {
        let f = &self.fleet;
        let me = f.cluster.node();
        for ((slot, fid), owner) in mine.into_iter().zip(owners) {
            let owned = owner == me;
            let (was, lost) = (
                f.usable(slot),
                f.members.lock().get(slot).is_some_and(|m| m.lost),
            );
            if owned && lost {
                // Back from the daemon that held it: the sync takes what
                // that daemon left.
                self.regains.lock().insert(slot, fid);
                f.push.notify_one();
                continue;
            }
            f.set(slot, Some(fid.clone()), owned);
            if !owned && let Some(m) = f.members.lock().get_mut(slot) {
                m.lost = true;
            }
            if was && !owned {
                tracing::warn!(slot, fleet_id = %fid, owner = %owner, "identity held by another daemon: no longer used here");
                self.leases.events().emit(
                    "identity_lost",
                    Some(slot),
                    None,
                    serde_json::json!({"fleet_id": fid, "owner": owner}),
                );
                let leases = self.leases.clone();
                tokio::spawn(async move {
                    let _ = leases.identities().close_browser(slot).await;
                });
            }
        }
    }

    /// The sync (see the module's notes).
    async fn sync(&self) {
        let f = &self.fleet;
        if !f.ready.load(Ordering::Acquire) {
            return;
        }
        let written = if f.cluster.is_up() {
            self.write_identities().await
        } else {
            Ok(())
        };
        if !f.written.swap(true, Ordering::AcqRel) {
            f.ready_notify.notify_waiters();
        }
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot write this daemon's identities to the fleet; the next beat tries again");
            return;
        }
        if !f.cluster.is_up() {
            return;
        }
        let regains: Vec<(usize, String)> = std::mem::take(&mut *self.regains.lock())
            .into_iter()
            .collect();
        for (slot, fid) in regains {
            self.regain(slot, &fid).await;
        }
        if f.adopt
            && f.unhosted().0 > 0
            && Instant::now() >= *f.adopt_after.lock()
            && let Err(e) = self.adopt_unhosted().await
        {
            tracing::debug!(error = %e, "adoption waits for the next beat");
        }
    }

    /// A configured identity comes back from the daemon that held it: its
    /// cookies, session and site states as that daemon left them.
    async fn regain(&self, slot: usize, fid: &str) {
        let f = &self.fleet;
        let record = match f.cluster.records(&[fid.to_string()]).await {
            Ok(mut r) => {
                (r.pop().flatten()).and_then(|j| serde_json::from_str::<IdentityRecord>(&j).ok())
            }
            Err(_) => return,
        };
        let result = match record {
            Some(r) => self.seat(slot, fid, &r).await.map(drop),
            None => {
                f.set(slot, Some(fid.to_string()), true);
                Ok(())
            }
        };
        match result {
            Ok(()) => {
                self.leases.events().emit(
                    "identity_regained",
                    Some(slot),
                    None,
                    serde_json::json!({"fleet_id": fid}),
                );
            }
            Err(e) => {
                tracing::warn!(slot, fleet_id = %fid, error = %e, "cannot take back an identity; the lease is given back");
                let _ = f.cluster.release(fid).await;
            }
        }
    }

    /// Write what changed of each identity this daemon holds: its record,
    /// its jar and each site state whose change key moved (a success count
    /// alone at most every [`SUCCESSES_EVERY`]). An identity that did not
    /// change costs Redis nothing; one that did, one pipelined round trip.
    pub async fn write_identities(&self) -> crate::error::Result<()> {
        let f = &self.fleet;
        let held: Vec<(usize, String)> = {
            let m = f.members.lock();
            m.iter()
                .enumerate()
                .filter(|(_, m)| m.owned)
                .filter_map(|(i, m)| Some((i, m.fleet_id.clone()?)))
                .collect()
        };
        let now = Instant::now();
        for (slot, fid) in held {
            let identities = self.leases.identities();
            let (Ok(profile), Ok(identity), Ok(jar)) = (
                identities.profile_of(slot),
                identities.record(slot),
                identities.jar(slot),
            ) else {
                continue;
            };
            let record = IdentityRecord {
                fleet_id: fid.clone(),
                node: f.cluster.node().to_string(),
                slot,
                profile: profile.name.clone(),
                identity,
                signed_in: self.signed_in(slot),
            };
            let record = serde_json::to_string(&record).unwrap_or_default();
            let cookies = serde_json::to_string(&jar.export_all()).unwrap_or_default();
            let (record_hash, jar_hash) = (hash_of(&record), hash_of(&cookies));
            let snaps = self.site_snaps(slot, now);
            // What changed since the last write.
            let (record, jar, sites) = {
                let m = f.members.lock();
                let Some(p) = m.get(slot).map(|m| &m.pushed) else {
                    continue;
                };
                let sites: Vec<(String, String, u64, u64)> = snaps
                    .into_iter()
                    .filter(
                        |(strategy, _, key, successes)| match p.sites.get(strategy) {
                            None => true,
                            Some((k, n, at)) => {
                                k != key
                                    || (n != successes
                                        && now.saturating_duration_since(*at) >= SUCCESSES_EVERY)
                            }
                        },
                    )
                    .collect();
                (
                    (p.record != Some(record_hash)).then_some(record),
                    (p.jar != Some(jar_hash)).then_some(cookies),
                    sites,
                )
            };
            if record.is_none() && jar.is_none() && sites.is_empty() {
                continue;
            }
            let put: Vec<(String, String)> = sites
                .iter()
                .map(|(strategy, json, _, _)| (strategy.clone(), json.clone()))
                .collect();
            f.cluster
                .put_identity(&fid, record.as_deref(), jar.as_deref(), &put)
                .await?;
            if let Some(m) = f.members.lock().get_mut(slot)
                && m.fleet_id.as_deref() == Some(fid.as_str())
            {
                let p = &mut m.pushed;
                p.record = Some(record_hash);
                p.jar = Some(jar_hash);
                for (strategy, _, key, successes) in sites {
                    p.sites.insert(strategy, (key, successes, now));
                }
            }
        }
        Ok(())
    }

    /// The sites slot `slot` is signed in to (sorted).
    fn signed_in(&self, slot: usize) -> Vec<String> {
        let router = self.leases.router();
        let mut sites: Vec<String> = (router.sites.iter())
            .filter(|(_, sites)| {
                sites.get(&slot).is_some_and(|s| {
                    (s.login.as_ref())
                        .is_some_and(|l| l.state == crate::strategy::LoginState::LoggedIn)
                })
            })
            .map(|(strategy, _)| strategy.clone())
            .collect();
        sites.sort();
        sites
    }

    /// The slot `slot`'s site state per strategy, as the fleet stores it, with
    /// its change key and success count.
    fn site_snaps(&self, slot: usize, now: Instant) -> Vec<(String, String, u64, u64)> {
        let mut router = self.leases.router();
        router
            .sites
            .iter_mut()
            .filter_map(|(strategy, sites)| {
                let site = sites.get_mut(&slot)?;
                let snap = SiteSnap::of(site, now);
                let key = snap.change_key(site);
                let json = serde_json::to_string(&snap).ok()?;
                Some((strategy.clone(), json, key, snap.successes))
            })
            .collect()
    }
}

fn hash_of(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}
