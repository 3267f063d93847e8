//! What the listener task and its connections share: the slot's guard,
//! upstream and counters, the check of a target, and the refusals kept.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use super::dial::ProxyTls;
use super::health::UpstreamHealth;
use super::peer::Peers;
use super::target::{Denied, Target};
use crate::config::ProxyUrl;
use crate::wire::http::Guard;

/// How many refusals a slot's egress remembers.
pub const KEPT_REFUSALS: usize = 32;

/// A request the egress refused.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    /// Increases by one per refusal of this egress.
    #[serde(skip)]
    pub seq: u64,
    /// `host:port` the browser asked for.
    pub target: String,
    /// The guard's reason.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.target, self.reason)
    }
}

/// State shared by the listener task and its connections.
pub(super) struct Shared {
    pub(super) slot: usize,
    pub(super) guard: Arc<Guard>,
    pub(super) upstream: RwLock<Option<ProxyUrl>>,
    pub(super) exempt: Vec<SocketAddr>,
    pub(super) connect_timeout: Duration,
    pub(super) proxy_tls: Arc<ProxyTls>,
    pub(super) requests: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) connect_failures: AtomicU64,
    pub(super) health: Arc<UpstreamHealth>,
    pub(super) bytes_up: Arc<AtomicU64>,
    pub(super) bytes_down: Arc<AtomicU64>,
    pub(super) refusals: Mutex<VecDeque<Refusal>>,
    pub(super) seq: AtomicU64,
    pub(super) peers: Arc<Peers>,
    pub(super) strangers: AtomicU64,
}

impl Shared {
    /// Resolve `host` and check every address it resolves to.
    pub(super) async fn check(&self, host: &str, port: u16) -> std::result::Result<Target, Denied> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self
                .check_addr(host, SocketAddr::new(ip, port))
                .map(Target::Addr)
                .map_err(Denied::Refused);
        }
        let resolved =
            tokio::time::timeout(self.connect_timeout, self.guard.lookup(host, port)).await;
        let addrs: Vec<SocketAddr> = match resolved {
            Ok(Ok(a)) => a,
            _ if self.upstream_resolves() => return Ok(Target::Name(host.to_string(), port)),
            Ok(Err(e)) => return Err(Denied::Unresolved(e.message().to_string())),
            Err(_) => {
                return Err(Denied::Unresolved(format!("resolving `{host}` timed out")));
            }
        };
        let first = *addrs
            .first()
            .ok_or_else(|| Denied::Unresolved(format!("`{host}` resolves to no address")))?;
        for a in &addrs {
            self.check_addr(host, *a).map_err(Denied::Refused)?;
        }
        Ok(Target::Addr(first))
    }

    pub(super) fn check_addr(
        &self,
        host: &str,
        addr: SocketAddr,
    ) -> std::result::Result<SocketAddr, String> {
        if self.exempt.contains(&addr) {
            return Ok(addr);
        }
        self.guard
            .check_address(host, addr.ip())
            .map(|()| addr)
            .map_err(|e| e.message().to_string())
    }

    /// A `socks5h://` upstream resolves names itself.
    pub(super) fn upstream_resolves(&self) -> bool {
        self.upstream
            .read()
            .as_ref()
            .is_some_and(|u| u.scheme() == "socks5h")
    }

    pub(super) fn refuse(&self, target: String, reason: String) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!(slot = self.slot, %target, %reason, "egress refused a browser request");
        let seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
        let mut kept = self.refusals.lock();
        if kept.len() == KEPT_REFUSALS {
            kept.pop_front();
        }
        kept.push_back(Refusal {
            seq,
            target,
            reason,
        });
    }
}
