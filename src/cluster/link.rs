//! This daemon's link to the fleet: the connection, its scripts, its health
//! and the node it advertises (what the store, peers, events and the hold
//! table act through).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::Serialize;

use super::address::refused_address;
use super::scripts;
use crate::config::ClusterConfig;
use crate::error::{Error, ErrorKind, Result};

/// This daemon's link to the fleet.
pub struct Cluster {
    pub(super) node: String,
    prefix: String,
    /// Where other daemons reach this one.
    advertise: String,
    /// Authenticates daemon-to-daemon calls (never logged).
    key: Option<String>,
    /// `cluster.peers`: when set, the only addresses the key goes to.
    pub(super) peers: Vec<crate::config::PeerAddr>,
    /// `redis://host:port` without credentials, for reports.
    shown_url: String,
    pub(super) client: redis::Client,
    conn: ConnectionManager,
    pub(super) timeout: Duration,
    pub(super) lease_ttl: Duration,
    health: Mutex<Health>,
    reconnects: AtomicU64,
    pub(super) scripts: Scripts,
}

pub(super) struct Scripts {
    pub(super) register: redis::Script,
    pub(super) unregister: redis::Script,
    pub(super) adopt: redis::Script,
    pub(super) release: redis::Script,
    pub(super) pace: redis::Script,
    pub(super) cut: redis::Script,
}

#[derive(Debug, Clone)]
struct Health {
    up: bool,
    /// When it last changed.
    since: SystemTime,
    last_error: Option<String>,
    /// Whether any command ever succeeded.
    ever_up: bool,
}

/// The fleet link as operators see it.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    pub node: String,
    /// `up` or `degraded`.
    pub state: &'static str,
    pub redis: String,
    /// Seconds since the state last changed.
    pub for_secs: u64,
    pub last_error: Option<String>,
    /// Times Redis came back after being away.
    pub reconnects: u64,
    pub advertise: String,
}

impl Cluster {
    /// Set up the link (no connection yet: a Redis that is away at start
    /// only means the daemon starts degraded). `listen` is the default
    /// advertised address.
    pub fn open(cfg: &ClusterConfig, listen: std::net::SocketAddr) -> Result<Option<Cluster>> {
        let Some(url) = cfg.url() else {
            return Ok(None);
        };
        if let Some(p) = cfg.problem() {
            return Err(Error::config(p));
        }
        let client = redis::Client::open(url.as_str())
            .map_err(|e| Error::config(format!("cluster.redis_url: {}", safe(&e))))?;
        let timeout = Duration::from_millis(cfg.command_timeout_ms);
        let conn = client
            .get_connection_manager_lazy(
                ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_secs(2)),
            )
            .map_err(|e| Error::config(format!("cluster.redis_url: {}", safe(&e))))?;
        let key = cfg.read_key().map_err(|e| {
            Error::config(format!(
                "cluster.key_file {}: {e}",
                cfg.key_file
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""))
                    .display()
            ))
        })?;
        let advertise = advertised(cfg, listen)?;
        let info = client.get_connection_info();
        Ok(Some(Cluster {
            node: cfg.node_name(),
            prefix: cfg.key_prefix.clone(),
            advertise,
            key,
            peers: cfg.peer_addrs(),
            shown_url: format!(
                "{}://{}",
                if url.starts_with("rediss://") {
                    "rediss"
                } else {
                    "redis"
                },
                info.addr()
            ),
            client,
            conn,
            timeout,
            lease_ttl: Duration::from_secs(cfg.lease_ttl_secs),
            health: Mutex::new(Health {
                up: false,
                since: SystemTime::now(),
                last_error: Some("not connected yet".into()),
                ever_up: false,
            }),
            reconnects: AtomicU64::new(0),
            scripts: Scripts {
                register: redis::Script::new(scripts::REGISTER),
                unregister: redis::Script::new(scripts::UNREGISTER),
                adopt: redis::Script::new(scripts::ADOPT),
                release: redis::Script::new(scripts::RELEASE),
                pace: redis::Script::new(scripts::PACE),
                cut: redis::Script::new(scripts::CUT),
            },
        }))
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn advertise(&self) -> &str {
        &self.advertise
    }

    /// The cluster key, when daemons may forward to each other.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// How often the heartbeat registers this daemon: a quarter of the
    /// lease TTL, so a live daemon's registration is renewed three times
    /// before it could lapse.
    pub fn beat_every(&self) -> Duration {
        self.lease_ttl / 4
    }

    /// A daemon whose last beat is older than this (two beats) is still
    /// registered (its leases hold until the registration lapses) but no
    /// longer counted when the fleet divides a bound: a dead daemon's
    /// share returns to the others within `0.75 × lease_ttl` of its death.
    pub fn fresh_within(&self) -> Duration {
        2 * self.beat_every()
    }

    pub fn is_up(&self) -> bool {
        self.health.lock().up
    }

    /// Times Redis came back after being away (the heartbeat reconciles
    /// when this moves).
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Acquire)
    }

    pub fn report(&self) -> ClusterReport {
        let h = self.health.lock().clone();
        ClusterReport {
            node: self.node.clone(),
            state: if h.up { "up" } else { "degraded" },
            redis: self.shown_url.clone(),
            for_secs: h.since.elapsed().map_or(0, |d| d.as_secs()),
            last_error: h.last_error,
            reconnects: self.reconnects(),
            advertise: self.advertise.clone(),
        }
    }

    pub(super) fn key_of(&self, parts: &[&str]) -> String {
        let mut k = self.prefix.clone();
        k.push_str(&parts.join(":"));
        k
    }

    /// Run one command or script under the deadline, tracking health.
    pub(super) async fn run<T: redis::FromRedisValue>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut conn = self.conn.clone();
        let out = match tokio::time::timeout(self.timeout, f(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!("{what}: {}", safe(&e))),
            Err(_) => Err(format!(
                "{what}: no answer from Redis within {} ms",
                self.timeout.as_millis()
            )),
        };
        self.note(out.as_ref().err());
        out.map_err(|m| Error::new(ErrorKind::Unavailable, m).retryable(true))
    }

    fn note(&self, error: Option<&String>) {
        let mut h = self.health.lock();
        match error {
            None if !h.up => {
                if h.ever_up {
                    self.reconnects.fetch_add(1, Ordering::AcqRel);
                }
                tracing::info!(node = %self.node, "the fleet's Redis answers: cluster up");
                *h = Health {
                    up: true,
                    since: SystemTime::now(),
                    last_error: None,
                    ever_up: true,
                };
            }
            None => {}
            Some(e) => {
                if h.up {
                    tracing::warn!(node = %self.node, error = %e, "the fleet's Redis is away: cluster degraded (serving local identities from local state)");
                    h.since = SystemTime::now();
                }
                h.up = false;
                h.last_error = Some(e.clone());
            }
        }
        metrics::gauge!("idpool_cluster_up").set(if h.up { 1.0 } else { 0.0 });
    }
}

/// The address this daemon registers (checked the way the others will
/// check it before sending it the key).
fn advertised(cfg: &ClusterConfig, listen: std::net::SocketAddr) -> Result<String> {
    let text = cfg
        .advertised()
        .unwrap_or_else(|| format!("http://{listen}"));
    let a = crate::config::PeerAddr::parse(&text)
        .map_err(|e| Error::config(format!("cluster.advertise (or IDPOOL_ADVERTISE): {e}")))?;
    if let crate::config::PeerHost::Ip(ip) = a.host
        && let Some(why) = refused_address(ip)
    {
        tracing::warn!(advertise = %a, "this daemon advertises {why}: the other daemons forward nothing here unless their cluster.peers lists it");
    }
    Ok(a.to_string())
}

/// A Redis error without anything secret (the crate never prints the
/// password, but a URL may be echoed back in a parse error).
fn safe(e: &redis::RedisError) -> String {
    crate::diag::one_line(&crate::config::redact_redis_url(&e.to_string()), 300)
}
