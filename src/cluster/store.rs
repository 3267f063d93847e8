//! What the fleet keeps about its daemons and identities: node records,
//! identity records, jars and per-strategy site state.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::Cluster;
use crate::error::Result;

/// A live daemon, as it registers itself every heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node: String,
    /// Where its API answers (`http://host:port`).
    pub advertise: String,
    /// The fleet ids it owns now.
    pub identities: Vec<String>,
    /// Spare slots still free for adoption.
    pub spare: usize,
    pub version: String,
    /// Per strategy: requests a minute it started over the last 10 s (what
    /// a cut of the fleet's budget sums as the fleet's rate).
    #[serde(default)]
    pub sent: std::collections::BTreeMap<String, f64>,
    /// Per strategy: answers it heard the site take a minute over the last
    /// 5 s (what the fleet's first cut sums as the rate the site took).
    #[serde(default)]
    pub taken: std::collections::BTreeMap<String, f64>,
    /// The slowest heartbeat of its last minute: from when the beat was
    /// due to when Redis had it (ms). A lease TTL that is not three times
    /// this is too short for this daemon (`idpool doctor` warns).
    #[serde(default)]
    pub beat_ms: u64,
    /// Its last beat is older than [`Cluster::fresh_within`] (as read by
    /// the last heartbeat here): still registered, not counted in shares,
    /// and what it holds is shown as without a host (silent).
    #[serde(skip)]
    pub stale: bool,
    /// How long ago it last beat (as read by the last heartbeat here).
    #[serde(skip)]
    pub silent_ms: u64,
}

impl Cluster {
    /// Every daemon alive now (its registration has not lapsed).
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>> {
        let set = self.key_of(&["nodes"]);
        let names: Vec<String> = self
            .run("nodes", async move |c| {
                redis::cmd("SMEMBERS").arg(&set).query_async(c).await
            })
            .await?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = names.iter().map(|n| self.key_of(&["node", n])).collect();
        let found: Vec<Option<String>> = self
            .run("nodes", async move |c| {
                redis::cmd("MGET").arg(&keys).query_async(c).await
            })
            .await?;
        Ok(parse_nodes(
            found.iter().flatten().map(|j| (j.as_str(), 0, false)),
        ))
    }

    /// Write an identity's record (JSON), its jar and its site states in one
    /// round trip.
    pub async fn put_identity(
        &self,
        fleet_id: &str,
        record: Option<&str>,
        jar: Option<&str>,
        sites: &[(String, String)],
    ) -> Result<()> {
        let ids = self.key_of(&["identities"]);
        let jar_key = self.key_of(&["jar", fleet_id]);
        let sites_key = self.key_of(&["sites", fleet_id]);
        let fleet_id = fleet_id.to_string();
        let record = record.map(str::to_string);
        let jar = jar.map(str::to_string);
        let sites = sites.to_vec();
        self.run("put identity", async move |c| {
            let mut p = redis::pipe();
            if let Some(r) = &record {
                p.cmd("HSET").arg(&ids).arg(&fleet_id).arg(r).ignore();
            }
            if let Some(j) = &jar {
                p.cmd("SET").arg(&jar_key).arg(j).ignore();
            }
            if !sites.is_empty() {
                p.cmd("HSET").arg(&sites_key).arg(&sites).ignore();
            }
            p.query_async::<()>(c).await
        })
        .await
    }

    /// Every identity record, by fleet id.
    pub async fn identities(&self) -> Result<HashMap<String, String>> {
        let ids = self.key_of(&["identities"]);
        self.run("identities", async move |c| {
            redis::cmd("HGETALL").arg(&ids).query_async(c).await
        })
        .await
    }

    /// The records (JSON) of `fleet_ids`, in order (`None`: none stored).
    pub async fn records(&self, fleet_ids: &[String]) -> Result<Vec<Option<String>>> {
        if fleet_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = self.key_of(&["identities"]);
        self.run("records", async move |c| {
            redis::cmd("HMGET")
                .arg(&ids)
                .arg(fleet_ids)
                .query_async(c)
                .await
        })
        .await
    }

    /// The lease holders of `fleet_ids` as written (`None`: no lease). A
    /// holder whose registration lapsed is gone: its leases are free.
    pub async fn owners(&self, fleet_ids: &[String]) -> Result<Vec<Option<String>>> {
        if fleet_ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = fleet_ids
            .iter()
            .map(|f| self.key_of(&["lease", f]))
            .collect();
        self.run("owners", async move |c| {
            redis::cmd("MGET").arg(&keys).query_async(c).await
        })
        .await
    }

    /// An identity's jar as stored (the jar file's JSON).
    pub async fn jar(&self, fleet_id: &str) -> Result<Option<String>> {
        let key = self.key_of(&["jar", fleet_id]);
        self.run("jar", async move |c| {
            redis::cmd("GET").arg(&key).query_async(c).await
        })
        .await
    }

    /// An identity's site states, by strategy.
    pub async fn sites(&self, fleet_id: &str) -> Result<HashMap<String, String>> {
        let key = self.key_of(&["sites", fleet_id]);
        self.run("sites", async move |c| {
            redis::cmd("HGETALL").arg(&key).query_async(c).await
        })
        .await
    }

    /// Publish one event to every daemon.
    pub async fn publish(&self, event: &str) -> Result<()> {
        let ch = self.key_of(&["events"]);
        let event = event.to_string();
        self.run("publish", async move |c| {
            redis::cmd("PUBLISH")
                .arg(&ch)
                .arg(&event)
                .query_async::<i64>(c)
                .await
        })
        .await
        .map(drop)
    }
}

/// Node records as stored, each with whether it is stale, sorted by name
/// (unreadable ones left out).
pub(super) fn parse_nodes<'a>(
    found: impl IntoIterator<Item = (&'a str, u64, bool)>,
) -> Vec<NodeInfo> {
    let mut out: Vec<NodeInfo> = found
        .into_iter()
        .filter_map(|(j, silent_ms, stale)| {
            let n: NodeInfo = serde_json::from_str(j).ok()?;
            Some(NodeInfo {
                stale,
                silent_ms,
                ..n
            })
        })
        .collect();
    out.sort_by(|a, b| a.node.cmp(&b.node));
    out
}
