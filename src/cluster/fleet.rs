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
    /// Set once the first sync after it ran (the fleet has this daemon's
    /// identities).
    pub(crate) written: AtomicBool,
    pub(crate) ready_notify: Notify,
    /// The reconnect count the last beat saw.
    pub(crate) seen_reconnects: AtomicU64,
    /// No adoption before this (a grace after (re)connecting).
    pub(crate) adopt_after: Mutex<Instant>,
    pub(crate) adopt: bool,
    pub(crate) forward: bool,
    /// Other daemons' events (JSON), relayed from the channel.
    pub(crate) remote: broadcast::Sender<String>,
    pub(crate) adopted: AtomicU64,
    /// The live daemons as the last heartbeat read them.
    pub(crate) view: Mutex<Vec<super::NodeInfo>>,
    /// Identities without a host as the last heartbeat counted them, and
    /// how long the oldest had waited then.
    pub(crate) unhosted: Mutex<(usize, std::time::Duration)>,
    /// What this daemon's holdings were when the fleet last had them (a
    /// hash; `None`: send them with the next beat).
    pub(crate) holdings_sent: Mutex<Option<u64>>,
    /// The last minute's heartbeats: when each was due and how long it
    /// took from then until Redis had it.
    pub(crate) beat_times: Mutex<std::collections::VecDeque<(Instant, std::time::Duration)>>,
}

/// The fleet's identities without a host (see [`Fleet::without_host`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct WithoutHost {
    pub count: usize,
    /// Of them, those whose daemon is silent (its registration not lapsed).
    pub silent: usize,
    /// How long the longest waiting has waited.
    pub oldest: std::time::Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) fleet_id: Option<String>,
    /// This daemon holds the lease (as far as it last heard).
    pub(crate) owned: bool,
    pub(crate) spare: bool,
    /// A slot opened by `cluster.adopt_beyond_spares`: used only for an
    /// identity without a host, while memory allows.
    pub(crate) beyond: bool,
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
    /// `slots` configured slots, then `spares` spare ones, the last
    /// `beyond` of them opened by `cluster.adopt_beyond_spares`.
    pub(crate) fn new(
        cluster: Cluster,
        slots: usize,
        (spares, beyond): (usize, usize),
        adopt: bool,
        forward: bool,
    ) -> Fleet {
        let node = cluster.node().to_string();
        let members = (0..slots + spares)
            .map(|i| Member {
                fleet_id: (i < slots).then(|| format!("{node}/{i}")),
                owned: i < slots,
                spare: i >= slots,
                beyond: i >= slots + spares - beyond.min(spares),
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
            written: AtomicBool::new(false),
            ready_notify: Notify::new(),
            seen_reconnects: AtomicU64::new(0),
            adopt_after: Mutex::new(Instant::now()),
            adopt,
            forward,
            remote: broadcast::channel(1024).0,
            adopted: AtomicU64::new(0),
            view: Mutex::new(Vec::new()),
            unhosted: Mutex::new((0, std::time::Duration::ZERO)),
            holdings_sent: Mutex::new(None),
            beat_times: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Identities whose daemon is gone and that no daemon took, as the last
    /// heartbeat counted them, and how long the oldest had waited then.
    pub fn unhosted(&self) -> (usize, std::time::Duration) {
        *self.unhosted.lock()
    }

    /// Identities without a host as the last heartbeat read the fleet:
    /// those it lists (their daemon's registration lapsed, or it shut
    /// down) and those of another daemon silent for two beats (adoptable
    /// once its registration lapses and a beat more passed).
    pub fn without_host(&self) -> WithoutHost {
        let (listed, oldest) = self.unhosted();
        let view = self.view.lock();
        let me = self.cluster.node();
        let silent = (view.iter()).filter(|n| n.stale && n.node != me);
        let (count, longest) = silent.fold((0, 0), |(c, l), n| {
            (c + n.identities.len(), l.max(n.silent_ms))
        });
        WithoutHost {
            count: listed + count,
            silent: count,
            oldest: oldest.max(std::time::Duration::from_millis(longest)),
        }
    }

    /// The slowest heartbeat of the last minute: from when it was due to
    /// when Redis had it.
    pub fn slowest_beat(&self) -> std::time::Duration {
        let times = self.beat_times.lock();
        times.iter().map(|(_, d)| *d).max().unwrap_or_default()
    }

    /// Note one heartbeat's time (kept for a minute).
    pub(crate) fn beat_took(&self, due: Instant, took: std::time::Duration) {
        let mut times = self.beat_times.lock();
        while times
            .front()
            .is_some_and(|(at, _)| due.saturating_duration_since(*at).as_secs() >= 60)
        {
            times.pop_front();
        }
        times.push_back((due, took));
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

    /// The slots an identity without a host could be seated in now:
    /// free spares, then configured slots whose own identity another
    /// daemon holds (`lost`), then, when `beyond` allows, the slots of
    /// `cluster.adopt_beyond_spares`.
    pub(crate) fn rooms(&self, beyond: bool) -> Vec<usize> {
        let m = self.members.lock();
        let free = |x: &&Member| x.spare && x.fleet_id.is_none();
        let spares = m.iter().enumerate().filter(|(_, x)| free(x) && !x.beyond);
        let lost = (m.iter().enumerate()).filter(|(_, x)| !x.spare && x.lost && !x.owned);
        let more = (m.iter().enumerate()).filter(|(_, x)| beyond && free(x) && x.beyond);
        spares.chain(lost).chain(more).map(|(i, _)| i).collect()
    }

    /// Spare slots still free (what the fleet's view shows; the slots of
    /// `cluster.adopt_beyond_spares` are not counted).
    pub(crate) fn spares_free(&self) -> usize {
        let m = self.members.lock();
        m.iter()
            .filter(|m| m.spare && !m.beyond && m.fleet_id.is_none())
            .count()
    }

    /// Whether slot `slot` was opened by `cluster.adopt_beyond_spares`.
    pub(crate) fn is_beyond(&self, slot: usize) -> bool {
        self.members.lock().get(slot).is_some_and(|m| m.beyond)
    }

    pub(crate) fn set(&self, slot: usize, fleet_id: Option<String>, owned: bool) {
        let mut m = self.members.lock();
        if let Some(x) = m.get_mut(slot) {
            if x.fleet_id != fleet_id {
                x.pushed = Pushed::default();
            }
            x.fleet_id = fleet_id;
            x.owned = owned;
            if owned {
                x.lost = false;
            }
        }
        if let Some(u) = self.usable.get(slot) {
            u.store(owned, Ordering::Release);
        }
    }
}
