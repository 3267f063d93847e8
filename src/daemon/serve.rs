//! The daemon: open the pool, the keys and the audit log, serve MCP (Streamable
//! HTTP + legacy SSE) and `/healthz` on one listener, and stop cleanly.
//!
//! - SIGTERM / SIGINT: stop accepting, give in-flight calls
//!   `shutdown_grace_secs`, close and reap every browser, save every jar, flush
//!   the audit log.
//! - SIGHUP: reload the keys file and re-open the audit log.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::{AuditLog, Keys};
use crate::config::Config;
use crate::error::{Error, ErrorKind, Result};
use crate::mcp::Core;
use crate::pool::Pool;

/// The keys file, when it exists.
pub fn load_keys(cfg: &Config) -> Result<Option<Keys>> {
    let path = &cfg.server.keys_file;
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(Keys::load(path)?))
}

/// The dispatcher over a freshly opened pool, with keys and the audit log.
pub async fn build_core(cfg: &Config) -> Result<Arc<Core>> {
    let keys = load_keys(cfg)?;
    let audit = AuditLog::open(&cfg.server.audit_path(&cfg.pool.data_dir))?;
    let pool = Pool::open(cfg)?;
    for (slot, pid) in pool.end_stale_browsers().await {
        tracing::warn!(slot, pid, "ended a Chromium left by an earlier run");
    }
    Ok(Core::new(pool, cfg.server.clone(), keys, Some(audit)))
}

/// A running daemon.
pub struct Daemon {
    pub core: Arc<Core>,
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    listener: Option<TcpListener>,
}

impl Daemon {
    /// Check the config, open everything and bind the listener.
    pub async fn bind(cfg: &Config) -> Result<Daemon> {
        let listen = cfg.server.listen;
        if !listen.ip().is_loopback() && !cfg.server.keys_file.exists() {
            return Err(Error::config(format!(
                "refusing to listen on {listen} without a keys file ({} does not exist); \
                 create keys with `idpool keys add NAME --role operator`, or listen on 127.0.0.1",
                cfg.server.keys_file.display()
            )));
        }
        let core = build_core(cfg).await?;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| Error::io(format!("cannot listen on {listen}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("cannot read the bound address", e))?;
        Ok(Daemon {
            core,
            addr,
            shutdown: CancellationToken::new(),
            listener: Some(listener),
        })
    }

    /// A token that stops the daemon when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Serve until SIGTERM/SIGINT (or the shutdown token), then stop cleanly.
    pub async fn run(mut self) -> Result<()> {
        let Some(listener) = self.listener.take() else {
            return Err(Error::new(ErrorKind::Internal, "the daemon runs once"));
        };
        let router = Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .merge(crate::mcp::http::routes(
                self.core.clone(),
                self.shutdown.clone(),
            ));
        let signals = tokio::spawn(watch_signals(self.core.clone(), self.shutdown.clone()));
        tracing::info!(
            addr = %self.addr,
            keys = self.core.keys_required(),
            "idpool serving MCP at http://{}/mcp (legacy SSE at /sse)",
            self.addr
        );
        let grace = Duration::from_secs(self.core.settings().shutdown_grace_secs);
        let stop = self.shutdown.clone();
        let server = axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await });
        let mut server = std::pin::pin!(server.into_future());
        tokio::select! {
            r = &mut server => {
                if let Err(e) = r {
                    tracing::error!("the listener failed: {e}");
                }
            }
            () = self.shutdown.cancelled() => {
                tracing::info!("shutting down: draining in-flight calls (up to {}s)", grace.as_secs());
                if tokio::time::timeout(grace, &mut server).await.is_err() {
                    tracing::warn!("calls still running after {}s were cancelled", grace.as_secs());
                }
            }
        }
        signals.abort();
        self.core.pool().shutdown().await;
        if let Some(a) = self.core.audit() {
            a.flush();
        }
        tracing::info!("idpool stopped");
        Ok(())
    }
}

async fn watch_signals(core: Arc<Core>, shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => reload(&core),
            () = shutdown.cancelled() => return,
        }
    }
    shutdown.cancel();
}

/// SIGHUP: re-read the keys file (a broken one keeps the old keys) and re-open
/// the audit log.
fn reload(core: &Core) {
    let path = core.settings().keys_file.clone();
    if path.exists() {
        match Keys::load(&path) {
            Ok(k) => {
                tracing::info!("reloaded {} ({} keys)", path.display(), k.entries().len());
                core.set_keys(Some(k));
            }
            Err(e) => tracing::error!("keeping the old keys: {e}"),
        }
    } else if core.keys_required() {
        tracing::warn!(
            "{} is gone; keeping the keys loaded at start (remove keys with `idpool keys revoke`)",
            path.display()
        );
    }
    if let Some(a) = core.audit() {
        match a.reopen() {
            Ok(()) => tracing::info!("re-opened the audit log {}", a.path().display()),
            Err(e) => tracing::error!("cannot re-open the audit log: {e}"),
        }
    }
}
