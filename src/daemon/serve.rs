//! The daemon: open the pool, the keys and the audit log, serve MCP (Streamable
//! HTTP + legacy SSE) and `/healthz` on one listener, and stop cleanly.
//!
//! - SIGTERM / SIGINT: stop accepting, give in-flight calls
//!   `shutdown_grace_secs`, close and reap every browser, save every jar, flush
//!   the audit log.
//! - SIGHUP: reload strategies (all or nothing), profiles (checked) and the
//!   keys file, and re-open the audit log (see [`reload`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::systemd::Notifier;
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
    // In a fleet: know which identities are still ours before serving.
    if let Some(sync) = &pool.services().fleet {
        sync.ready().await;
    }
    Ok(Core::new(pool, cfg.server.clone(), keys, Some(audit)))
}

/// A running daemon.
pub struct Daemon {
    pub core: Arc<Core>,
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    listener: Option<TcpListener>,
    /// The config file SIGHUP re-reads profiles from.
    reload: Option<std::path::PathBuf>,
    /// The file limit in force (raised to the hard limit at bind).
    file_limit: u64,
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
        let file_limit = super::listener::raise_file_limit();
        let core = build_core(cfg).await?;
        let listener = super::listener::bind(listen)
            .map_err(|e| Error::io(format!("cannot listen on {listen}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("cannot read the bound address", e))?;
        Ok(Daemon {
            core,
            addr,
            shutdown: CancellationToken::new(),
            listener: Some(listener),
            reload: cfg.source.clone(),
            file_limit,
        })
    }

    /// Serve until SIGTERM/SIGINT (or the shutdown token), then stop cleanly:
    /// STOPPING=1, refuse new calls, give running ones `shutdown_grace_secs`,
    /// cancel the rest with a clear error, end every stream, close and reap every
    /// browser, save every jar, flush the audit log.
    pub async fn run(mut self) -> Result<()> {
        let Some(listener) = self.listener.take() else {
            return Err(Error::new(ErrorKind::Internal, "the daemon runs once"));
        };
        super::metrics::install();
        // Streams and sessions end only after the drain, not at the signal.
        let streams = CancellationToken::new();
        let (mcp_routes, mcp_state) = crate::mcp::http::routes(self.core.clone(), streams.clone());
        let control = Arc::new(super::control::Control {
            core: self.core.clone(),
            mcp: mcp_state,
            stop: streams.clone(),
        });
        let router = Router::new()
            .merge(super::control::routes(control.clone()))
            .merge(super::live::routes(control.clone()))
            .merge(super::recordings::routes(control.clone()))
            .merge(super::rest::routes(control.clone()))
            .merge(super::fleet::routes(control.clone()))
            .layer(axum::middleware::from_fn_with_state(
                control,
                super::admit::key_first,
            ))
            .merge(mcp_routes);
        let notifier = Arc::new(Notifier::from_env());
        // The handlers are in place before the daemon says it serves: a
        // signal sent the moment it answers is handled, never the default
        // (death by SIGTERM).
        let handlers = install_signal_handlers();
        let signals = tokio::spawn(watch_signals(
            handlers,
            self.core.clone(),
            self.shutdown.clone(),
            notifier.clone(),
            self.reload.clone(),
        ));
        tracing::info!(
            addr = %self.addr,
            keys = self.core.keys_required(),
            "idpool serving MCP at http://{}/mcp (legacy SSE at /sse), status page at /",
            self.addr
        );
        // SIGTERM closes the listening socket at once (new connections are
        // refused); open connections are closed only after the drain.
        let closing = CancellationToken::new();
        let settings = self.core.settings();
        let limits = super::listener::Limits {
            header_timeout: Duration::from_secs(settings.header_timeout_secs.max(1)),
            max_connections: settings.connection_cap(self.file_limit),
        };
        let server = tokio::spawn(super::listener::serve(
            listener,
            router,
            limits,
            self.core.clone(),
            self.shutdown.clone(),
            closing.clone(),
        ));
        notifier.notify(&format!(
            "READY=1\nSTATUS=serving {} slots on {}",
            self.core.pool().leases().identities().len(),
            self.addr
        ));
        let watchdog = spawn_watchdog(notifier.clone(), self.shutdown.clone());
        let policy = tokio::spawn(audit_policy(self.core.clone(), self.shutdown.clone()));
        let syncer = tokio::spawn(audit_syncer(self.core.clone(), self.shutdown.clone()));
        self.shutdown.cancelled().await;

        notifier.notify("STOPPING=1\nSTATUS=stopping: draining calls");
        self.core.begin_drain();
        drain(&self.core).await;
        streams.cancel();
        closing.cancel();
        match tokio::time::timeout(Duration::from_secs(10), server).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("the listener task failed: {e}"),
            Err(_) => tracing::warn!("connections still open after 10s: closed"),
        }
        signals.abort();
        policy.abort();
        let _ = syncer.await;
        if let Some(w) = watchdog {
            w.abort();
        }
        self.core.pool().shutdown().await;
        if let Some(a) = self.core.audit() {
            a.flush();
        }
        tracing::info!("idpool stopped");
        Ok(())
    }
}

/// The pool acting on its own policy leaves an audit line too: an automatic
/// retirement is recorded as the daemon's own `retire_slot` (a manual one
/// is the caller's tool call, already audited). Ends at `stop`.
/// The audit log reaches the disk within [`crate::auth::audit::SYNC_EVERY`].
async fn audit_syncer(core: Arc<Core>, stop: CancellationToken) {
    let mut every = tokio::time::interval(crate::auth::audit::SYNC_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stop.cancelled() => return,
        }
        if core.audit().is_some() {
            // fdatasync blocks: off the async threads.
            let core = core.clone();
            let _ = tokio::task::spawn_blocking(move || {
                if let Some(a) = core.audit() {
                    a.sync();
                }
            })
            .await;
        }
    }
}

async fn audit_policy(core: Arc<Core>, stop: CancellationToken) {
    let mut events = core.pool().events().subscribe();
    loop {
        let ev = tokio::select! {
            ev = events.recv() => ev,
            () = stop.cancelled() => return,
        };
        let ev = match ev {
            Ok(ev) => ev,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => return,
        };
        if ev.kind != "slot_retired" || ev.detail["reason"] == "manual" {
            continue;
        }
        if let Some(audit) = core.audit() {
            audit.record(&crate::auth::AuditRecord {
                ts: ev.ts.clone(),
                principal: "idpool".into(),
                role: "admin".into(),
                transport: "policy".into(),
                session: None,
                method: "pool/retire".into(),
                tool: Some("retire_slot".into()),
                args: serde_json::json!({"slot": ev.slot, "reason": ev.detail["reason"]}),
                ok: true,
                error: None,
                duration_ms: 0,
                slot: ev.slot,
                tier: None,
                attempts: None,
                hop: None,
                recordings: Vec::new(),
            });
        }
    }
}

/// WATCHDOG=1 to systemd at its interval (when it asks for one) until `stop`.
fn spawn_watchdog(
    notifier: Arc<Notifier>,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    super::systemd::watchdog_interval().map(|every| {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tokio::select! {
                    _ = tick.tick() => notifier.notify("WATCHDOG=1"),
                    () = stop.cancelled() => break,
                }
            }
        })
    })
}

/// Give running calls `shutdown_grace_secs`, then cancel the rest with a
/// clear error, and let the last answers reach their streams.
async fn drain(core: &Core) {
    let grace = Duration::from_secs(core.settings().shutdown_grace_secs);
    let running = core.in_flight();
    if running > 0 {
        tracing::info!(
            "shutting down: {running} call(s) running, waiting up to {}s",
            grace.as_secs()
        );
    }
    if !core.wait_drained(grace).await {
        tracing::warn!(
            "{} call(s) still running after {}s: cancelled",
            core.in_flight(),
            grace.as_secs()
        );
        core.cancel_calls();
        // Let the cancelled calls send their error before the streams end.
        core.wait_drained(Duration::from_secs(5)).await;
    }
    if running > 0 {
        // The last answers are still on their way through the sessions'
        // streams; give them a moment before the streams end.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

type Handlers = (
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
);

/// SIGTERM, SIGINT and SIGHUP, handled from now on.
fn install_signal_handlers() -> Option<Handlers> {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(term), Ok(int), Ok(hup)) => Some((term, int, hup)),
        _ => {
            tracing::error!("cannot install signal handlers");
            None
        }
    }
}

async fn watch_signals(
    handlers: Option<Handlers>,
    core: Arc<Core>,
    shutdown: CancellationToken,
    notifier: Arc<Notifier>,
    reload_cfg: Option<std::path::PathBuf>,
) {
    let Some((mut term, mut int, mut hup)) = handlers else {
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                notifier.notify(&super::systemd::reloading("reloading keys, strategies and the audit log"));
                reload(&core, reload_cfg.as_deref()).await;
                notifier.notify("READY=1\nSTATUS=serving (reloaded)");
            }
            () = shutdown.cancelled() => return,
        }
    }
    tracing::info!("signal received: shutting down (a second signal cancels running calls now)");
    shutdown.cancel();
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::warn!("second signal: cancelling running calls without waiting for the grace");
    core.cancel_calls();
}

/// SIGHUP: re-read strategies (all or nothing), profiles (checked; a changed
/// profile applies at the next start) and the keys file, re-open the audit log,
/// and tell MCP clients the tool list changed. A broken file keeps the old
/// configuration and says why.
pub async fn reload(core: &Core, config: Option<&std::path::Path>) {
    match core.pool().reload_strategies() {
        Ok(n) => tracing::info!("reloaded strategies: {n}"),
        Err(problems) => {
            for p in &problems {
                tracing::error!("reload: {p}");
            }
            tracing::error!(
                "reload: keeping the old strategies ({} problem(s))",
                problems.len()
            );
        }
    }
    check_profiles(core, config);
    let path = core.settings().keys_file.clone();
    if path.exists() {
        match Keys::load(&path) {
            Ok(k) => {
                tracing::info!("reloaded {} ({} keys)", path.display(), k.entries().len());
                let names: std::collections::HashSet<String> =
                    k.entries().iter().map(|e| e.name.clone()).collect();
                core.set_keys(Some(k));
                let browsing = &core.pool().services().browsing;
                let closed = browsing.end_revoked(|key| !names.contains(key)).await;
                if closed > 0 {
                    tracing::info!("closed {closed} browser session(s) of revoked keys");
                }
            }
            Err(e) => tracing::error!("reload: keeping the old keys: {e}"),
        }
    } else if core.keys_required() {
        tracing::warn!(
            "{} is gone; keeping the keys loaded before (remove keys with `idpool keys revoke`)",
            path.display()
        );
    }
    if let Some(a) = core.audit() {
        match a.reopen() {
            Ok(()) => tracing::info!("re-opened the audit log {}", a.path().display()),
            Err(e) => tracing::error!("cannot re-open the audit log: {e}"),
        }
    }
    let told = core.notify_tools_changed().await;
    tracing::info!("reload done; told {told} MCP client(s) that the tool list changed");
}

/// Re-read the profiles: report broken files and slots whose profile changed
/// (a slot's identity is rebuilt only at the next start).
fn check_profiles(core: &Core, config: Option<&std::path::Path>) {
    let Ok(cfg) = Config::load(config) else {
        return;
    };
    let (profiles, problems) = crate::identity::profile::load_dir(&cfg.pool.profiles_dir);
    for p in &problems {
        tracing::error!("reload: {p} (the slot keeps its profile)");
    }
    let identities = core.pool().leases().identities();
    for id in 0..identities.len() {
        if let Some(now) = identities.profile(id)
            && let Some(p) = profiles.get(&now.name)
            && p != now
        {
            tracing::warn!(
                "reload: profile `{}` of slot {id} changed; it applies when the daemon restarts",
                p.name,
            );
        }
    }
}
