//! `idpool-testbed`: a local imitation of a protected shop (DESIGN.md §9).
//!
//! - HTTPS with a CA generated at start (written to `<state_dir>/ca.pem`) and plain HTTP.
//! - The JA4 of every ClientHello; with the gate on, non-browser fingerprints get a
//!   403 block page.
//! - A JS challenge: without a solved `tb_clearance` cookie, shop pages answer 503
//!   with a script that computes the token, sets the cookie and reloads.
//! - A per-identity rate limit answering with a `validateCaptcha` page.
//! - Deterministic review data: `/product/{id}`, `/product-reviews/{id}?page=N`,
//!   `POST /ajax/reviews`, `/js-reviews/{id}`; `EMPTY*` items have no reviews,
//!   `LOGIN*` items sit behind a login wall.
//! - An open-web site (`site.rs`): a noisy article, a blog, robots.txt, a
//!   sitemap index (one sitemap gzipped), a search form, a "load more" button.
//! - A shop no strategy knows (`web_shop.rs`, `/wshop/`): products and reviews
//!   in JSON-LD and microdata, review pages linked by `rel=next`, a variant
//!   whose reviews a script draws, a stale structured price.
//! - Faults on demand (slow, 5xx, reset, truncated body, huge page, redirect loop)
//!   and a control endpoint under `/__control/`.

pub mod accounts;
mod app;
mod ca;
mod control;
pub mod data;
pub mod detect;
pub mod engines;
pub mod hostile;
pub mod html;
pub mod robot_check;
mod server;
mod signin;
pub mod site;
mod state;
pub mod web_shop;

pub use app::router;
pub use state::{Fault, FaultKind, Limited, LogEntry, Modes, RateLimit, Shared, SiteLimit, Stats};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How to start a testbed.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    pub https: SocketAddr,
    /// HTTPS that sends only its leaf certificate, as most servers do.
    pub https_leaf: Option<SocketAddr>,
    pub http: SocketAddr,
    /// Where `ca.pem` is written.
    pub state_dir: PathBuf,
    pub modes: Modes,
}

impl TestbedConfig {
    /// Ephemeral loopback ports, CA in `state_dir`, every mode off.
    pub fn ephemeral(state_dir: impl Into<PathBuf>) -> Self {
        TestbedConfig {
            https: SocketAddr::from(([127, 0, 0, 1], 0)),
            https_leaf: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            http: SocketAddr::from(([127, 0, 0, 1], 0)),
            state_dir: state_dir.into(),
            modes: Modes::default(),
        }
    }
}

/// A running testbed; dropping it (or [`Testbed::shutdown`]) stops it.
pub struct Testbed {
    pub https_addr: SocketAddr,
    /// The leaf-only HTTPS listener, when asked for.
    pub https_leaf_addr: Option<SocketAddr>,
    pub http_addr: SocketAddr,
    pub ca_path: PathBuf,
    pub ca_pem: String,
    /// The testbed's leaf-only server TLS (its certificate, signed by its
    /// CA), for other loopback servers of a test: an `https://` proxy.
    pub leaf_tls: Arc<rustls::ServerConfig>,
    pub shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Testbed {
    /// Bind both listeners, generate the CA, start serving.
    pub async fn start(cfg: TestbedConfig) -> std::io::Result<Testbed> {
        let tls = ca::generate(&cfg.state_dir)?;
        let https = TcpListener::bind(cfg.https).await?;
        let https_leaf = match cfg.https_leaf {
            Some(a) => Some(TcpListener::bind(a).await?),
            None => None,
        };
        let http = TcpListener::bind(cfg.http).await?;
        let shared = Arc::new(Shared::default());
        *shared.modes.lock() = cfg.modes;
        let app = router(shared.clone());
        let (stop, rx) = watch::channel(false);
        let https_addr = https.local_addr()?;
        let https_leaf_addr = https_leaf.as_ref().map(|l| l.local_addr()).transpose()?;
        let http_addr = http.local_addr()?;
        let mut tasks = vec![
            tokio::spawn(server::serve_https(
                https,
                tls.config,
                app.clone(),
                shared.clone(),
                rx.clone(),
            )),
            tokio::spawn(server::serve_http(
                http,
                app.clone(),
                shared.clone(),
                rx.clone(),
            )),
        ];
        if let Some(l) = https_leaf {
            tasks.push(tokio::spawn(server::serve_https(
                l,
                tls.leaf_only.clone(),
                app,
                shared.clone(),
                rx,
            )));
        }
        Ok(Testbed {
            https_addr,
            https_leaf_addr,
            http_addr,
            ca_path: tls.ca_path,
            ca_pem: tls.ca_pem,
            leaf_tls: tls.leaf_only,
            shared,
            stop,
            tasks,
        })
    }

    /// `https://127.0.0.1:<port>`
    pub fn https_url(&self) -> String {
        format!("https://{}", self.https_addr)
    }

    /// `https://127.0.0.1:<port>` of the leaf-only listener.
    pub fn https_leaf_url(&self) -> Option<String> {
        self.https_leaf_addr.map(|a| format!("https://{a}"))
    }

    /// `http://127.0.0.1:<port>`
    pub fn http_url(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// Switch modes in-process (the control endpoint does the same over HTTP).
    pub fn set_modes(&self, f: impl FnOnce(&mut Modes)) {
        f(&mut self.shared.modes.lock());
    }

    /// End every signed-in session (the shop forgets them; the cookies stay).
    pub fn expire_sessions(&self) -> usize {
        self.shared.accounts.expire_all()
    }

    pub fn stats(&self) -> Stats {
        self.shared.stats.lock().clone()
    }

    /// The per-request log, oldest first.
    /// The robot check's last code shown (what a person at the screen
    /// reads) and how many were passed (`Modes::robot_check`).
    pub fn robot_check(&self) -> (Option<String>, u64) {
        let r = &self.shared.robot_check;
        (r.last_code(), r.solved())
    }

    pub fn log(&self) -> Vec<LogEntry> {
        self.shared.log.lock().iter().cloned().collect()
    }

    /// Requests that arrived per second of the testbed's life, for paths
    /// starting with `prefix` (what a fleet-wide budget is judged by).
    pub fn arrivals(&self, prefix: &str) -> std::collections::BTreeMap<u64, u32> {
        state::arrivals(&self.shared.log.lock(), prefix)
    }

    /// Stop accepting and close every connection.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}
