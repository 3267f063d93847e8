//! Who hosts each identity: the heartbeat's registration and lease check
//! (one script), adoption of identities without a host, giving one back,
//! and the list of those still waiting for a host.

use std::time::Duration;

use super::Cluster;
use super::store::{NodeInfo, parse_nodes};
use crate::error::Result;

/// What one beat learned, in the same round trip as the registration.
#[derive(Debug, Clone, Default)]
pub struct Beat {
    /// Every live daemon (this one included), sorted by name.
    pub live: Vec<NodeInfo>,
    /// The owner of each lease checked, in the order asked.
    pub owners: Vec<String>,
    /// Identities whose daemon is gone and that nobody took yet.
    pub unhosted: usize,
    /// How long the oldest of them has waited.
    pub oldest_unhosted: Duration,
}

/// Identities without a host, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Unhosted {
    pub count: usize,
    /// Up to the limit asked: each fleet id and how long it has waited.
    pub oldest: Vec<(String, Duration)>,
}

impl Cluster {
    fn hosting_keys(&self) -> [String; 5] {
        [
            self.key_of(&["node", &self.node]),
            self.key_of(&["nodes"]),
            self.key_of(&["beats"]),
            self.key_of(&["holdings"]),
            self.key_of(&["unhosted"]),
        ]
    }

    /// One heartbeat: say this daemon is alive (for one lease TTL; the
    /// heartbeat renews it four times as often), check (and take back) the
    /// leases of `check`, and read the fleet back: every live daemon, each
    /// marked stale when its last beat is older than
    /// [`Cluster::fresh_within`], and the identities without a host. With
    /// `holdings_changed`, what this daemon holds (`info.identities`) is
    /// written for the fleet to know if it dies. One round trip.
    pub async fn register(
        &self,
        info: &NodeInfo,
        check: &[String],
        holdings_changed: bool,
    ) -> Result<Beat> {
        let keys = self.hosting_keys();
        let json = serde_json::to_string(info).unwrap_or_default();
        let holdings = if holdings_changed {
            serde_json::to_string(&info.identities).unwrap_or_default()
        } else {
            String::new()
        };
        let ttl = self.lease_ttl.as_millis() as u64;
        let node = self.node.clone();
        let (nodes, leases) = (self.key_of(&["node", ""]), self.key_of(&["lease", ""]));
        let s = &self.scripts.register;
        let (found, owners, (unhosted, oldest)): (Vec<String>, Vec<String>, (u64, u64)) = self
            .run("register", async move |c| {
                let mut call = s.prepare_invoke();
                for k in &keys {
                    call.key(k);
                }
                call.arg(&json)
                    .arg(ttl)
                    .arg(&node)
                    .arg(&nodes)
                    .arg(&leases)
                    .arg(&holdings);
                for fid in check {
                    call.arg(fid);
                }
                call.invoke_async(c).await
            })
            .await?;
        let fresh = self.fresh_within().as_millis();
        Ok(Beat {
            live: parse_nodes(found.chunks_exact(2).map(|pair| {
                let age = pair[1].parse::<u64>().unwrap_or(0);
                (pair[0].as_str(), age, u128::from(age) > fresh)
            })),
            owners,
            unhosted: usize::try_from(unhosted).unwrap_or(usize::MAX),
            oldest_unhosted: Duration::from_millis(oldest),
        })
    }

    /// Forget this node (a clean shutdown): its registration goes at once,
    /// and what it `held` is without a host until another daemon adopts it
    /// or this one comes back.
    pub async fn unregister(&self, held: &[String]) -> Result<()> {
        let keys = self.hosting_keys();
        let node = self.node.clone();
        let leases = self.key_of(&["lease", ""]);
        let s = &self.scripts.unregister;
        self.run("unregister", async move |c| {
            let mut call = s.prepare_invoke();
            for k in &keys {
                call.key(k);
            }
            call.arg(&node).arg(&leases);
            for fid in held {
                call.arg(fid);
            }
            call.invoke_async::<i64>(c).await
        })
        .await
        .map(drop)
    }

    /// Adopt `fleet_id` if it has been without a host for `waited` (see
    /// [`super::scripts::ADOPT`]): the owner after the call (`None`: nobody).
    pub async fn adopt(&self, fleet_id: &str, waited: Duration) -> Result<Option<String>> {
        let key = self.key_of(&["lease", fleet_id]);
        let unhosted = self.key_of(&["unhosted"]);
        let holdings = self.key_of(&["holdings"]);
        let s = &self.scripts.adopt;
        let node = self.node.clone();
        let waited = waited.as_millis() as u64;
        let owner: String = self
            .run("adopt", async move |c| {
                s.prepare_invoke()
                    .key(&key)
                    .key(&unhosted)
                    .key(&holdings)
                    .arg(&node)
                    .arg(waited)
                    .arg(fleet_id)
                    .invoke_async(c)
                    .await
            })
            .await?;
        Ok(Some(owner).filter(|o| !o.is_empty()))
    }

    /// Give the lease of `fleet_id` back (if this node holds it): it is
    /// without a host from now.
    pub async fn release(&self, fleet_id: &str) -> Result<()> {
        let key = self.key_of(&["lease", fleet_id]);
        let unhosted = self.key_of(&["unhosted"]);
        let s = &self.scripts.release;
        let node = self.node.clone();
        self.run("release", async move |c| {
            s.prepare_invoke()
                .key(&key)
                .key(&unhosted)
                .arg(&node)
                .arg(fleet_id)
                .invoke_async::<i64>(c)
                .await
        })
        .await
        .map(drop)
    }

    /// The identities without a host: how many, and the `limit` oldest
    /// with how long each has waited (by Redis's clock).
    pub async fn unhosted(&self, limit: usize) -> Result<Unhosted> {
        let key = self.key_of(&["unhosted"]);
        let last = limit.saturating_sub(1) as i64;
        let ((secs, micros), count, list): ((u64, u64), u64, Vec<(String, f64)>) = self
            .run("unhosted", async move |c| {
                let mut p = redis::pipe();
                p.cmd("TIME").cmd("ZCARD").arg(&key);
                if limit == 0 {
                    p.cmd("ZRANGE").arg(&key).arg(1).arg(0);
                } else {
                    p.cmd("ZRANGE").arg(&key).arg(0).arg(last);
                }
                p.arg("WITHSCORES");
                p.query_async(c).await
            })
            .await?;
        let now = secs * 1000 + micros / 1000;
        Ok(Unhosted {
            count: usize::try_from(count).unwrap_or(usize::MAX),
            oldest: list
                .into_iter()
                .map(|(fid, since)| {
                    let waited = now.saturating_sub(since.max(0.0) as u64);
                    (fid, Duration::from_millis(waited))
                })
                .collect(),
        })
    }
}
