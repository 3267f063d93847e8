//! Taking over fleet identities without a host (their daemon's
//! registration lapsed, or it shut down): a daemon with `adopt = true` and
//! room seats them, signed-in ones first, then the longest waiting, with
//! their cookies, proxy session and site state from the fleet's store, in a
//! fresh Chromium profile.

use tokio::time::Instant;

use super::FleetSync;
use super::state::{IdentityRecord, SiteSnap};
use crate::error::{Error, ErrorKind, Result};
use crate::identity::jar::PortableCookie;

/// The most identities without a host one sync looks at.
const CANDIDATES: usize = 1000;

/// What the fleet's view lists of the identities without a host.
const LISTED: usize = 200;

impl FleetSync {
    /// Adopt identities without a host into the room this daemon has.
    pub(super) async fn adopt_unhosted(&self) -> Result<()> {
        let f = &self.fleet;
        let c = f.cluster.clone();
        let memory = super::super::standby::room_for_a_browser(self.browser_mb);
        let mut rooms = f.rooms(memory);
        if rooms.is_empty() {
            return Ok(());
        }
        // A late daemon's identities wait one more beat: it comes back first.
        let wait = c.beat_every();
        let waiting = c.unhosted(CANDIDATES).await?;
        let held = f.held();
        let fids: Vec<(String, std::time::Duration)> = (waiting.oldest.into_iter())
            .filter(|(fid, waited)| *waited >= wait && !held.contains(fid))
            .collect();
        let ids: Vec<String> = fids.iter().map(|(f, _)| f.clone()).collect();
        let records = c.records(&ids).await?;
        let mut candidates: Vec<(String, std::time::Duration, IdentityRecord)> = (fids.into_iter())
            .zip(records)
            .filter_map(|((fid, waited), r)| {
                Some((
                    fid,
                    waited,
                    serde_json::from_str::<IdentityRecord>(&r?).ok()?,
                ))
            })
            .collect();
        // Signed-in identities first, then the longest waiting.
        candidates.sort_by_key(|(fid, waited, r)| {
            (
                r.signed_in.is_empty(),
                std::cmp::Reverse(*waited),
                fid.clone(),
            )
        });
        for (fid, _, record) in candidates {
            let profiles = self.leases.identities();
            let Some(at) = rooms.iter().position(|slot| {
                profiles
                    .profile_of(*slot)
                    .is_ok_and(|p| p.name == record.profile)
            }) else {
                continue;
            };
            let slot = rooms[at];
            if c.adopt(&fid, wait).await?.as_deref() != Some(c.node()) {
                continue; // another daemon was quicker, or its own came back
            }
            rooms.remove(at);
            match self.seat(slot, &fid, &record).await {
                Ok(cookies) => {
                    f.adopted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    metrics::counter!("idpool_fleet_adoptions_total").increment(1);
                    tracing::warn!(slot, fleet_id = %fid, from = %record.node, cookies, "adopted an identity whose daemon is gone");
                    self.leases.events().emit(
                        "identity_adopted",
                        Some(slot),
                        None,
                        serde_json::json!({"fleet_id": fid, "from": record.node, "cookies": cookies,
                            "session_generation": record.identity.generation,
                            "signed_in": record.signed_in, "beyond_spares": f.is_beyond(slot)}),
                    );
                    f.push.notify_one();
                }
                Err(e) => {
                    tracing::warn!(fleet_id = %fid, error = %e, "adoption failed; the lease is given back");
                    let _ = c.release(&fid).await;
                }
            }
            if rooms.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// Seat `fid` in slot `slot`: its cookies, proxy session and site
    /// states from the fleet, a fresh Chromium profile. Answers the cookies
    /// taken over.
    pub(super) async fn seat(
        &self,
        slot: usize,
        fid: &str,
        record: &IdentityRecord,
    ) -> Result<usize> {
        let f = &self.fleet;
        let identities = self.leases.identities();
        let (dir, own_jar) = (identities.dir(slot)?, identities.jar(slot)?);
        let jar = f.cluster.jar(fid).await?;
        let sites = f.cluster.sites(fid).await?;
        let cookies: Vec<PortableCookie> = match jar {
            Some(j) => serde_json::from_str(&j).map_err(|e| {
                Error::new(
                    ErrorKind::Internal,
                    format!("the fleet's jar of {fid} is not readable: {e}"),
                )
            })?,
            None => Vec::new(),
        };
        identities.close_browser(slot).await?;
        let profile_dir = dir.join("chromium");
        if profile_dir.exists() {
            std::fs::remove_dir_all(&profile_dir)
                .map_err(|e| Error::io(format!("cannot clear {}", profile_dir.display()), e))?;
        }
        let aside = dir.join("cookies.json.before-adoption");
        own_jar.retire(&aside)?;
        let _ = std::fs::remove_file(&aside);
        let n = own_jar.import(&cookies).taken;
        own_jar.save()?;
        identities.take_identity(slot, &record.identity)?;
        let now = Instant::now();
        {
            let mut router = self.leases.router();
            for sites in router.sites.values_mut() {
                sites.remove(&slot);
            }
            for (strategy, json) in &sites {
                let Ok(snap) = serde_json::from_str::<SiteSnap>(json) else {
                    continue;
                };
                let site = snap.restore(self.leases.config().breaker, now);
                router.site(slot, strategy, self.leases.config().breaker);
                if let Some(m) = router.sites.get_mut(strategy) {
                    m.insert(slot, site);
                }
            }
        }
        f.set(slot, Some(fid.to_string()), true);
        self.leases.wake();
        Ok(n)
    }

    /// Publish this daemon's events to the fleet's channel (stamped with
    /// the node); a breaker, login or retirement event also wakes the
    /// heartbeat, so the fleet sees it within a moment.
    /// Another daemon cut a strategy's fleet budget: its event (relayed
    /// from the channel) sets the rate here, so this daemon paces by it
    /// from its next request.
    pub(super) fn spawn_budget_listener(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut rx = self.fleet.remote.subscribe();
        let leases = std::sync::Arc::downgrade(&self.leases);
        let (stop, me) = (self.stop.clone(), self.fleet.cluster.node().to_string());
        rt.spawn(async move {
            loop {
                let text = tokio::select! {
                    () = stop.cancelled() => return,
                    m = rx.recv() => match m {
                        Ok(t) => t,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(_) => return,
                    },
                };
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                if v["kind"] != "budget"
                    || v["detail"]["scope"] != "fleet"
                    || v["node"] == me.as_str()
                {
                    continue;
                }
                let (Some(strategy), Some(leases)) = (v["strategy"].as_str(), leases.upgrade())
                else {
                    continue;
                };
                leases.sites().heard_fleet_cut(
                    strategy,
                    if v["detail"]["measuring"] == true {
                        Some(crate::routing::budget::MEASURING)
                    } else {
                        v["detail"]["to"].as_f64()
                    },
                    v["detail"]["generation"].as_u64().unwrap_or(0),
                );
            }
        });
    }

    pub(super) fn spawn_event_publisher(&self) {
        let (f, Ok(rt)) = (&self.fleet, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let mut rx = self.leases.events().subscribe();
        let weak = std::sync::Arc::downgrade(&self.fleet);
        let stop = self.stop.clone();
        let cluster = f.cluster.clone();
        rt.spawn(async move {
            loop {
                let ev = tokio::select! {
                    () = stop.cancelled() => return,
                    ev = rx.recv() => ev,
                };
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                let Some(f) = weak.upgrade() else { return };
                if matches!(
                    ev.kind.as_str(),
                    "breaker" | "breaker_reset" | "login_state" | "slot_retired"
                ) {
                    f.push.notify_one();
                }
                let fleet_id = ev.slot.and_then(|s| f.fleet_id(s));
                drop(f);
                let mut v = serde_json::to_value(&ev).unwrap_or_default();
                v["node"] = serde_json::json!(cluster.node());
                v["fleet_id"] = serde_json::json!(fleet_id);
                if cluster.is_up() {
                    let _ = cluster.publish(&v.to_string()).await;
                }
            }
        });
    }

    /// The fleet as its store has it: every live daemon and every identity
    /// with its owner and breakers.
    pub async fn view(&self) -> Result<serde_json::Value> {
        self.view_of(&self.fleet.cluster).await
    }

    async fn view_of(&self, c: &crate::cluster::Cluster) -> Result<serde_json::Value> {
        let nodes = c.nodes().await?;
        let records = c.identities().await?;
        let mut fids: Vec<String> = records.keys().cloned().collect();
        fids.sort();
        let owners = c.owners(&fids).await?;
        let waiting = c.unhosted(fids.len().max(LISTED)).await?;
        let without: std::collections::HashSet<&str> =
            waiting.oldest.iter().map(|(f, _)| f.as_str()).collect();
        // Another daemon silent for two beats: what it holds has no host
        // that answers (adoptable once its registration lapses).
        let silent: Vec<crate::cluster::NodeInfo> = (self.fleet.live().into_iter())
            .filter(|n| n.stale && n.node != c.node())
            .collect();
        let mut identities = Vec::new();
        for (fid, owner) in fids.iter().zip(owners) {
            let sites = c.sites(fid).await?;
            let mut breakers = serde_json::Map::new();
            for (strategy, json) in sites {
                if let Ok(snap) = serde_json::from_str::<SiteSnap>(&json) {
                    let (state, open_for) = snap.state_now();
                    breakers.insert(
                        strategy,
                        serde_json::json!({
                        "state": state, "open_for_secs": open_for,
                        "failures": snap.breaker.failures,
                        "login": snap.login.map(|l| l.state)}),
                    );
                }
            }
            let slot = records
                .get(fid)
                .and_then(|r| serde_json::from_str::<IdentityRecord>(r).ok())
                .map(|r| r.slot);
            let hosted = !without.contains(fid.as_str())
                && owner.as_ref().is_some_and(|o| {
                    nodes.iter().any(|n| &n.node == o) && !silent.iter().any(|n| &n.node == o)
                });
            identities.push(serde_json::json!({
                "fleet_id": fid, "owner": owner, "hosted": hosted, "slot": slot, "breakers": breakers}));
        }
        let quiet = (silent.iter()).flat_map(|n| {
            (n.identities.iter()).map(move |fid| {
                serde_json::json!({"fleet_id": fid, "waiting_secs": n.silent_ms / 1000,
                    "last_node": n.node, "silent": true})
            })
        });
        let silent_count: usize = silent.iter().map(|n| n.identities.len()).sum();
        let unhosted: Vec<serde_json::Value> = (waiting.oldest.iter().take(LISTED))
            .map(|(fid, waited)| {
                let r =
                    (records.get(fid)).and_then(|r| serde_json::from_str::<IdentityRecord>(r).ok());
                serde_json::json!({
                    "fleet_id": fid,
                    "waiting_secs": waited.as_secs(),
                    "last_node": r.as_ref().map(|r| r.node.clone()),
                    "profile": r.as_ref().map(|r| r.profile.clone()),
                    "signed_in": r.map(|r| r.signed_in).unwrap_or_default(),
                })
            })
            .chain(quiet.take(LISTED))
            .collect();
        Ok(serde_json::json!({"nodes": nodes, "identities": identities,
            "unhosted": {"count": waiting.count + silent_count, "silent": silent_count,
                "listed": unhosted}}))
    }

    /// A live daemon other than this one holding an identity admitted for
    /// `strategy` (and signed in on it, when `login`), by the fleet's store.
    pub async fn forward_target(
        &self,
        strategy: &str,
        login: bool,
    ) -> Option<crate::cluster::NodeInfo> {
        let f = &self.fleet;
        let c = &f.cluster;
        if !f.forward || c.key().is_none() || !c.is_up() {
            return None;
        }
        let nodes = c.nodes().await.ok()?;
        for n in nodes
            .into_iter()
            .filter(|n| n.node != c.node() && c.may_forward_to(&n.advertise))
        {
            for fid in &n.identities {
                let snap = c.sites(fid).await.ok()?;
                let site = snap
                    .get(strategy)
                    .and_then(|j| serde_json::from_str::<SiteSnap>(j).ok());
                let signed_in = |s: &SiteSnap| {
                    s.login
                        .as_ref()
                        .is_some_and(|l| l.state == crate::strategy::LoginState::LoggedIn)
                };
                let admits = match &site {
                    Some(s) => s.admits() && (!login || signed_in(s)),
                    None => !login,
                };
                if admits {
                    return Some(n);
                }
            }
        }
        None
    }
}
