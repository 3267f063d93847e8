//! Taking over a fleet identity whose daemon died: its lease lapsed, so a
//! daemon with `adopt = true` and a free spare slot takes the lease and
//! seats the identity there, with its cookies, proxy session and site
//! state from the fleet's store, in a fresh Chromium profile.

use tokio::time::Instant;

use super::FleetSync;
use super::state::{IdentityRecord, SiteSnap};
use crate::error::{Error, ErrorKind, Result};
use crate::identity::jar::PortableCookie;

impl FleetSync {
    /// Adopt every lapsed identity of the spare profile there is room for.
    pub(super) async fn adopt_lapsed(&self) -> Result<()> {
        let f = &self.fleet;
        let c = f.cluster.clone();
        let records = c.identities().await?;
        let held = f.held();
        let mut candidates: Vec<(String, IdentityRecord)> = records
            .into_iter()
            .filter(|(fid, _)| !held.contains(fid))
            .filter_map(|(fid, r)| Some((fid, serde_json::from_str::<IdentityRecord>(&r).ok()?)))
            .filter(|(_, r)| r.profile == f.spare_profile)
            .collect();
        candidates.sort_by(|a, b| a.0.cmp(&b.0));
        let fids: Vec<String> = candidates.iter().map(|(f, _)| f.clone()).collect();
        let owners = c.owners(&fids).await?;
        let live = f.live_names();
        for ((fid, record), owner) in candidates.into_iter().zip(owners) {
            // Held by a live daemon: its own. One naming this daemon that it
            // does not hold is from its earlier life (it was killed, and
            // came back before its leases lapsed): its to adopt again.
            if owner.is_some_and(|o| o != c.node() && live.contains(&o)) {
                continue;
            }
            let Some(spare) = f.free_spare() else { break };
            if c.take(&fid).await? != c.node() {
                continue; // another daemon was quicker
            }
            match self.seat(spare, &fid, &record).await {
                Ok(cookies) => {
                    f.adopted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    metrics::counter!("idpool_fleet_adoptions_total").increment(1);
                    tracing::warn!(slot = spare, fleet_id = %fid, from = %record.node, cookies, "adopted an identity whose daemon is gone");
                    self.leases.events().emit(
                        "identity_adopted",
                        Some(spare),
                        None,
                        serde_json::json!({"fleet_id": fid, "from": record.node, "cookies": cookies,
                            "session_generation": record.identity.generation}),
                    );
                    f.push.notify_one();
                }
                Err(e) => {
                    tracing::warn!(fleet_id = %fid, error = %e, "adoption failed; the lease is given back");
                    let _ = c.release(&fid).await;
                }
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
                leases
                    .sites()
                    .heard_fleet_cut(strategy, v["detail"]["to"].as_f64());
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
            identities.push(serde_json::json!({
                "fleet_id": fid, "owner": owner, "slot": slot, "breakers": breakers}));
        }
        Ok(serde_json::json!({"nodes": nodes, "identities": identities}))
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
