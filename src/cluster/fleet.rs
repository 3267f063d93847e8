//! Which fleet identity each of this daemon's slots holds, and whether the
//! router may use it: the table the lease reads on every pick and the
//! heartbeat (`crate::services::fleet`) keeps true.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

use super::Cluster;

/// The fleet side of a pool.
pub struct Fleet {
    pub(crate) cluster: Arc<Cluster>,
    /// Per slot: the fleet identity it holds (`None`: a free spare).
    pub(crate) members: Mutex<Vec<Member>>,
    /// Per slot: whether the router may use it (read on every pick).
    pub(crate) usable: Vec<AtomicBool>,
    /// Wakes the heartbeat early (a breaker moved).
    pub(crate) push: Arc<Notify>,
    /// Set once the first beat ran.
    pub(crate) ready: AtomicBool,
    pub(crate) ready_notify: Notify,
    /// The reconnect count the last beat saw.
    pub(crate) seen_reconnects: AtomicU64,
    /// No adoption before this (a grace after (re)connecting).
    pub(crate) adopt_after: Mutex<Instant>,
    pub(crate) spare_profile: String,
    pub(crate) adopt: bool,
    pub(crate) forward: bool,
    /// Other daemons' events (JSON), relayed from the channel.
    pub(crate) remote: broadcast::Sender<String>,
    pub(crate) adopted: AtomicU64,
    /// The live daemons as the last heartbeat read them.
    pub(crate) view: Mutex<Vec<super::NodeInfo>>,
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) fleet_id: Option<String>,
    /// This daemon holds the lease (as far as it last heard).
    pub(crate) owned: bool,
    pub(crate) spare: bool,
    /// What was last written to the fleet of it.
    pub(crate) pushed: Pushed,
    /// Another daemon held it: its state there is newer than ours.
    pub(crate) lost: bool,
}

/// What the heartbeat last wrote of one identity: an identity is written
/// when it changed, not every beat (`Pushed::default()`: write it all).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pushed {
    /// Hashes of its jar and of its record.
    pub(crate) jar: Option<u64>,
    pub(crate) record: Option<u64>,
    /// Per strategy: a hash of its site state's change key (everything but
    /// the success count and the clock), the success count, and when.
    pub(crate) sites: std::collections::HashMap<String, (u64, u64, Instant)>,
}

impl Fleet {
    pub(crate) fn new(
        cluster: Cluster,
        slots: usize,
        spares: usize,
        spare_profile: String,
        adopt: bool,
        forward: bool,
    ) -> Fleet {
        let node = cluster.node().to_string();
        let members = (0..slots + spares)
            .map(|i| Member {
                fleet_id: (i < slots).then(|| format!("{node}/{i}")),
                owned: i < slots,
                spare: i >= slots,
                pushed: Pushed::default(),
                lost: false,
            })
            .collect();
        Fleet {
            cluster: Arc::new(cluster),
            members: Mutex::new(members),
            usable: (0..slots + spares)
                .map(|i| AtomicBool::new(i < slots))
                .collect(),
            push: Arc::new(Notify::new()),
            ready: AtomicBool::new(false),
            ready_notify: Notify::new(),
            seen_reconnects: AtomicU64::new(0),
            adopt_after: Mutex::new(Instant::now()),
            spare_profile,
            adopt,
            forward,
            remote: broadcast::channel(1024).0,
            adopted: AtomicU64::new(0),
            view: Mutex::new(Vec::new()),
        }
    }

    /// This daemon's share of a fleet-wide bound of `bound` places (a
    /// strategy's `global_max_in_flight`): an equal part for each live
    /// daemon, the remainder to the first by name, at least one. Kept here,
    /// so a call waits for a place without asking Redis. A daemon whose
    /// beats stopped is counted out once its last beat is older than
    /// [`crate::cluster::Cluster::fresh_within`] (half a lease TTL), so a
    /// dead daemon's places come back to the others within three quarters
    /// of a TTL, before its registration (and its leases) lapse.
    /// Redis away (or before the first heartbeat): the whole bound.
    pub fn share(&self, bound: usize) -> usize {
        if !self.cluster.is_up() {
            return bound;
        }
        let view = self.view.lock();
        let me = self.cluster.node();
        let counted = || view.iter().filter(|v| !v.stale || v.node == me);
        let n = counted().count().max(1);
        let index = counted().position(|v| v.node == me).unwrap_or(0);
        (bound / n + usize::from(index < bound % n)).max(1)
    }

    /// The live daemons as the last heartbeat read them (sorted by name).
    pub fn live(&self) -> Vec<super::NodeInfo> {
        self.view.lock().clone()
    }

    /// The names of the live daemons.
    pub fn live_names(&self) -> std::collections::HashSet<String> {
        self.view.lock().iter().map(|v| v.node.clone()).collect()
    }

    pub(crate) fn set_live(&self, mut nodes: Vec<super::NodeInfo>) {
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        *self.view.lock() = nodes;
    }

    /// Other daemons' events (JSON, stamped with their node).
    pub fn subscribe_remote(&self) -> broadcast::Receiver<String> {
        self.remote.subscribe()
    }

    /// Whether the router may use `slot` (held here, or the fleet away).
    pub(crate) fn usable(&self, slot: usize) -> bool {
        self.usable
            .get(slot)
            .is_some_and(|u| u.load(Ordering::Acquire))
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The fleet id slot `slot` holds.
    pub fn fleet_id(&self, slot: usize) -> Option<String> {
        let m = self.members.lock();
        m.get(slot)
            .filter(|m| m.owned)
            .and_then(|m| m.fleet_id.clone())
    }

    /// Whether slot `slot` is a spare (opened for adoption).
    pub fn is_spare(&self, slot: usize) -> bool {
        self.members.lock().get(slot).is_some_and(|m| m.spare)
    }

    /// Identities adopted since start.
    pub fn adopted(&self) -> u64 {
        self.adopted.load(Ordering::Relaxed)
    }

    /// Every fleet id held here.
    pub fn held(&self) -> Vec<String> {
        let m = self.members.lock();
        m.iter()
            .filter(|m| m.owned)
            .filter_map(|m| m.fleet_id.clone())
            .collect()
    }

    pub(crate) fn free_spare(&self) -> Option<usize> {
        let m = self.members.lock();
        m.iter().position(|m| m.spare && m.fleet_id.is_none())
    }

    pub(crate) fn spares_free(&self) -> usize {
        let m = self.members.lock();
        m.iter().filter(|m| m.spare && m.fleet_id.is_none()).count()
    }

    pub(crate) fn set(&self, slot: usize, fleet_id: Option<String>, owned: bool) {
        let mut m = self.members.lock();
        if let Some(x) = m.get_mut(slot) {
            if x.fleet_id != fleet_id {
                x.pushed = Pushed::default();
            }
            x.fleet_id = fleet_id;
            x.owned = owned;
        }
        if let Some(u) = self.usable.get(slot) {
            u.store(owned, Ordering::Release);
        }
    }
}
