//! The browser's one way out: a guarded forward proxy per slot, inside the
//! daemon.
//!
//! Each slot's Chromium runs with `--proxy-server` pointing at its own
//! loopback listener here (and `<-loopback>`, so loopback goes through it
//! too). For every request (navigations, redirects, subresources, XHR,
//! WebSockets: Chromium sends them all as `CONNECT` or absolute-form HTTP)
//! the egress resolves the host itself, applies the SSRF guard's address
//! policy to what it resolved, and connects to exactly that checked address,
//! so DNS rebinding cannot slip a private address past the check. TLS is
//! tunnelled untouched: the site sees the browser's own ClientHello.
//!
//! - `dial`: the connection to a checked target, direct or through the
//!   slot's upstream proxy (HTTP CONNECT or SOCKS5, credentials added here,
//!   never given to Chromium).
//! - `serve`: one client connection: `CONNECT` tunnels and plain HTTP
//!   forwarding; a refusal is a `403` the page sees.
//! - `wire`: HTTP/1.1 heads read raw and bodies framed, so a plain-HTTP
//!   request reaches the site with the browser's own lines, order and case.
//! - `peer`: who may connect at all: the slot's own Chromium (its process
//!   tree, found through `/proc`), so that no other local user can spend the
//!   upstream's credentials, namespace or not.
//!
//! [`Egress`] owns the listener, its task and its counters; a refusal is also
//! kept (the last [`KEPT_REFUSALS`]) so a browser operation can say what its
//! page was refused.

mod diag;
mod dial;
mod health;
mod peer;
mod serve;
mod shared;
mod target;
mod wire;

pub use dial::ProxyTls;
pub use health::{HealthReport, ProxyState, UpstreamHealth};
pub use peer::Peers;
pub use shared::{KEPT_REFUSALS, Refusal};

use shared::Shared;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::ProxyUrl;
use crate::error::{Error, Result};
use crate::wire::http::Guard;

/// What operators see of a slot's egress.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EgressFacts {
    /// The listener Chromium's `--proxy-server` points at.
    pub listen: String,
    /// Requests let through (each CONNECT tunnel or plain HTTP request).
    pub requests: u64,
    /// Requests refused by the guard.
    pub refused: u64,
    /// Connections to the target or the upstream proxy that failed.
    pub connect_failures: u64,
    /// Bytes from the browser to the site, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The latest refusal, `host:port: reason`.
    pub last_refused: Option<String>,
    /// Who may connect: the slot's own browser, by a peer check.
    pub admits: &'static str,
    /// Connections turned away because they came from outside the slot's
    /// browser (another local process or user).
    pub strangers: u64,
}

/// What [`EgressFacts::admits`] says.
pub const ADMITS: &str = "the slot's browser only (peer check)";

/// Settings of one slot's egress.
#[derive(Debug, Clone)]
pub struct EgressConfig {
    pub slot: usize,
    pub guard: Arc<Guard>,
    /// The slot's upstream proxy (credentials included), if any.
    pub upstream: Option<ProxyUrl>,
    /// Addresses let through whatever the guard says: the daemon's own
    /// calibration listener.
    pub exempt: Vec<SocketAddr>,
    pub connect_timeout: Duration,
    /// TLS to an `https://` upstream (shared by the pool's egresses).
    pub proxy_tls: Arc<ProxyTls>,
    /// The upstream's health, which the slot's HTTP tier reports into too.
    pub health: Arc<UpstreamHealth>,
    /// The browsers' namespace: the listener is bound inside it.
    pub netns: Option<Arc<crate::wire::netns::Netns>>,
}

/// One slot's egress: a bound loopback listener, served until shutdown.
pub struct Egress {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("slot", &self.shared.slot)
            .field("addr", &self.addr)
            .finish()
    }
}

impl Egress {
    /// Bind `127.0.0.1:0` and serve it on the current runtime until `stop`
    /// (or until the egress is dropped).
    pub fn start(cfg: EgressConfig, stop: &CancellationToken) -> Result<Egress> {
        let bind = || std::net::TcpListener::bind("127.0.0.1:0");
        let bound = match &cfg.netns {
            Some(ns) => ns.run_sync(bind).and_then(|r| r),
            None => bind(),
        };
        let std =
            bound.map_err(|e| Error::io(format!("slot {}: egress: cannot bind", cfg.slot), e))?;
        std.set_nonblocking(true)
            .map_err(|e| Error::io("egress", e))?;
        let addr = std.local_addr().map_err(|e| Error::io("egress", e))?;
        let shared = Arc::new(Shared {
            slot: cfg.slot,
            guard: cfg.guard,
            upstream: RwLock::new(cfg.upstream),
            exempt: cfg.exempt,
            connect_timeout: cfg.connect_timeout,
            proxy_tls: cfg.proxy_tls,
            requests: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            connect_failures: AtomicU64::new(0),
            health: cfg.health,
            bytes_up: Arc::default(),
            bytes_down: Arc::default(),
            refusals: Mutex::new(VecDeque::new()),
            seq: AtomicU64::new(0),
            peers: Arc::new(Peers::new(cfg.netns.as_deref())),
            strangers: AtomicU64::new(0),
        });
        let stop = stop.child_token();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let listener = {
                    let _enter = rt.enter();
                    tokio::net::TcpListener::from_std(std).map_err(|e| Error::io("egress", e))?
                };
                rt.spawn(serve::accept_loop(listener, shared.clone(), stop.clone()));
            }
            Err(_) => {
                tracing::warn!(
                    slot = cfg.slot,
                    "egress opened outside a runtime: not served, so this slot's browser cannot reach anything"
                );
            }
        }
        Ok(Egress { addr, shared, stop })
    }

    /// `http://127.0.0.1:<port>`, for Chromium's `--proxy-server`.
    pub fn proxy_server(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Whom this egress admits: tell it when the slot's Chromium starts.
    pub fn peers(&self) -> &Arc<Peers> {
        &self.shared.peers
    }

    /// Chain to another upstream from now on (a retired identity's new
    /// proxy session); tunnels already open keep theirs.
    pub fn set_upstream(&self, upstream: Option<ProxyUrl>) {
        *self.shared.upstream.write() = upstream;
    }

    /// Where refusals stand now: pass it to [`Egress::refusals_since`].
    pub fn mark(&self) -> u64 {
        self.shared.seq.load(Ordering::Acquire)
    }

    /// Refusals after `mark` (at most [`KEPT_REFUSALS`]).
    pub fn refusals_since(&self, mark: u64) -> Vec<Refusal> {
        self.shared
            .refusals
            .lock()
            .iter()
            .filter(|r| r.seq > mark)
            .cloned()
            .collect()
    }

    /// The upstream proxy's health (both tiers report into it).
    pub fn health(&self) -> &Arc<UpstreamHealth> {
        &self.shared.health
    }

    /// Whether the slot has an upstream proxy.
    pub fn has_upstream(&self) -> bool {
        self.shared.upstream.read().is_some()
    }

    /// Try to reach the upstream proxy (a TCP connection); the result goes
    /// into its health. `None` without an upstream.
    pub async fn probe_upstream(&self) -> Option<bool> {
        let upstream = self.shared.upstream.read().clone()?;
        let result = dial::probe(&upstream, self.shared.connect_timeout).await;
        Some(match result {
            Ok(()) => {
                self.shared.health.succeeded();
                true
            }
            Err(e) => {
                self.shared.health.failed(&e);
                false
            }
        })
    }

    pub fn facts(&self) -> EgressFacts {
        let s = &self.shared;
        EgressFacts {
            listen: self.addr.to_string(),
            requests: s.requests.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            connect_failures: s.connect_failures.load(Ordering::Relaxed),
            bytes_up: s.bytes_up.load(Ordering::Relaxed),
            bytes_down: s.bytes_down.load(Ordering::Relaxed),
            last_refused: s.refusals.lock().back().map(ToString::to_string),
            admits: ADMITS,
            strangers: s.strangers.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
