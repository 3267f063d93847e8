//! The pool in a fleet (`[cluster]`): which slots hold which fleet
//! identities, and the heartbeat that keeps the fleet's store true.
//!
//! Every `lease_ttl / 4` the heartbeat (between beats, finished calls and
//! breaker, login or retirement events write step 3 alone, coalesced):
//! 1. registers the node (address, identities, free spares) for one lease
//!    TTL and reads the live daemons back, in one script: every lease this
//!    daemon holds lives as long as that registration; a daemon whose last
//!    beat is older than two beats is counted out of the bounds' shares;
//! 2. checks the leases it holds in one read; one found held by another
//!    live daemon is dropped here at once (never used by two);
//! 3. writes what changed of each held identity: its record, its jar, its
//!    site states (breakers, holds, tier memory, login states; a success
//!    count alone at most every 30 s); an unchanged identity costs nothing;
//! 4. with `adopt = true`, takes over identities whose owner's registration
//!    lapsed into free spare slots: same cookies, same proxy session, same
//!    site state, a fresh Chromium profile.
//!
//! Redis away: nothing here blocks a call; the slots keep serving with
//! local state. Redis back: the same beat reconciles (leases re-taken,
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
}

impl FleetSync {
    /// The fleet side of `leases`, when `[cluster]` is on.
    pub fn new(leases: Arc<Leases>, stop: CancellationToken) -> Option<Arc<FleetSync>> {
        let fleet = leases.fleet()?.clone();
        Some(Arc::new(FleetSync {
            leases,
            fleet,
            stop,
        }))
    }

    /// The hold table the heartbeat keeps.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Wait (bounded by the commands' timeouts) until the first heartbeat
    /// ran: before it, this daemon does not know which of its identities
    /// another one adopted while it was away.
    pub async fn ready(&self) {
        let f = &self.fleet;
        let wait = async {
            loop {
                let n = f.ready_notify.notified();
                if f.ready.load(Ordering::Acquire) {
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
        let weak = Arc::downgrade(self);
        let stop = self.stop.clone();
        let every = f.cluster.beat_every();
        rt.spawn(crate::cluster::relay_events(
            f.cluster.clone(),
            f.remote.clone(),
            stop.clone(),
        ));
        self.spawn_event_publisher();
        self.spawn_budget_listener();
        let wake = f.push.clone();
        rt.spawn(async move {
            let mut next_full = Instant::now();
            loop {
                let push = wake.notified();
                tokio::pin!(push);
                push.as_mut().enable();
                let Some(sync) = weak.upgrade() else { return };
                if Instant::now() >= next_full {
                    sync.beat().await;
                    next_full = Instant::now() + every;
                } else if sync.fleet.cluster.is_up() {
                    // Woken by calls: their identities' new state only;
                    // leases, registration and adoption keep their pace.
                    let _ = sync.write_identities().await;
                }
                drop(sync);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep_until(next_full) => {}
                    () = push => {
                        // Coalesce: a busy pool writes a few times a second,
                        // not once per call.
                        tokio::time::sleep(COALESCE).await;
                    }
                }
            }
        });
    }

    /// One heartbeat (see the module's notes).
    async fn beat(&self) {
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
            self.leases.events().emit(
                "fleet_reconciled",
                None,
                None,
                serde_json::json!({"node": c.node(), "identities": f.held().len()}),
            );
        }
        // Registered first: this daemon's leases live as long as its
        // registration, and the answer is the fleet's live daemons.
        let info = NodeInfo {
            node: c.node().to_string(),
            advertise: c.advertise().to_string(),
            identities: f.held(),
            spare: f.spares_free(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            sent: self.leases.sites().sent_rates(),
            stale: false,
        };
        if let Ok(live) = c.register(&info).await {
            f.set_live(live);
            if self.renew_leases().await.is_ok() {
                let _ = self.write_identities().await;
                if f.adopt && Instant::now() >= *f.adopt_after.lock() && f.free_spare().is_some() {
                    let _ = self.adopt_lapsed().await;
                }
            }
        }
        if !f.ready.swap(true, Ordering::AcqRel) {
            f.ready_notify.notify_waiters();
        }
    }

    /// Check every lease this daemon holds (or believes it should) with one
    /// read: a lease of a live daemon's is its own; one without a live holder
    /// is taken; one held by another daemon is dropped here at once.
    async fn renew_leases(&self) -> crate::error::Result<()> {
        let f = &self.fleet;
        let mine: Vec<(usize, String)> = {
            let m = f.members.lock();
            m.iter()
                .enumerate()
                .filter(|(_, m)| m.owned || !m.spare)
                .filter_map(|(i, m)| Some((i, m.fleet_id.clone()?)))
                .collect()
        };
        let grace = Instant::now() < *f.adopt_after.lock();
        let fids: Vec<String> = mine.iter().map(|(_, fid)| fid.clone()).collect();
        let holders = f.cluster.owners(&fids).await?;
        let live = f.live_names();
        for ((slot, fid), holder) in mine.into_iter().zip(holders) {
            let lost = f.members.lock().get(slot).is_some_and(|m| m.lost);
            if lost && grace {
                // Just (re)connected: whoever held it takes it again first.
                continue;
            }
            let owner = match holder {
                Some(h) if h == f.cluster.node() || live.contains(&h) => h,
                _ => f.cluster.take(&fid).await?,
            };
            let owned = owner == f.cluster.node();
            let was = f.usable(slot);
            if owned && lost {
                // Back from the daemon that held it: take what it left.
                self.regain(slot, &fid).await;
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
                let _ = self.leases.identities().close_browser(slot).await;
            }
        }
        Ok(())
    }

    /// A configured identity comes back from the daemon that held it: its
    /// cookies, session and site states as that daemon left them.
    async fn regain(&self, slot: usize, fid: &str) {
        let f = &self.fleet;
        let record = match f.cluster.identities().await {
            Ok(r) => r
                .get(fid)
                .and_then(|j| serde_json::from_str::<IdentityRecord>(j).ok()),
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
                if let Some(m) = f.members.lock().get_mut(slot) {
                    m.lost = false;
                }
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
