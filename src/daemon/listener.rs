//! The daemon's HTTP listener: hyper's connection builder with the bounds
//! `axum::serve` does not offer. A connection must send its request headers
//! within `server.header_timeout_secs` of opening and of its previous response
//! (silent and half-sent requests are closed, so slow-loris clients hold
//! nothing for long), and at most `connection_cap` connections are open at
//! once: further ones wait in the kernel's backlog, so the listener can never
//! use up the descriptors that browsers, jars and the audit log need.
//!
//! Health keeps a budget of its own: when every connection is in use, up to
//! [`HEALTH_RESERVE`] more are taken, which answer `/healthz`, `/readyz`
//! and `/metrics` and refuse the rest with 503, so a supervisor never
//! mistakes a full daemon for a dead one. An HTTP/2 connection carries at
//! most [`MAX_STREAMS`] requests at once and is closed after
//! `header_timeout_secs` without one (answering PINGs keeps nobody's
//! connection open).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How the listener bounds its connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
}

/// Connections beyond the cap that serve health checks only.
pub const HEALTH_RESERVE: usize = 8;

/// Requests one HTTP/2 connection may have in flight.
pub const MAX_STREAMS: u32 = 64;

/// Counts one open connection while it lives (and holds its permit).
struct Open(
    Arc<crate::mcp::Core>,
    #[allow(dead_code)] OwnedSemaphorePermit,
);

/// Requests of one connection in flight, until their response bodies end
/// (a stream is work, not idleness), and when the last one ended.
#[derive(Clone)]
struct Activity(Arc<parking_lot::Mutex<(usize, Instant)>>);

impl Activity {
    fn new() -> Self {
        Activity(Arc::new(parking_lot::Mutex::new((0, Instant::now()))))
    }

    fn begin(&self) -> Busy {
        self.0.lock().0 += 1;
        Busy(self.clone())
    }

    /// How long the connection has had nothing in flight.
    fn idle_for(&self) -> Option<Duration> {
        let g = self.0.lock();
        (g.0 == 0).then(|| g.1.elapsed())
    }
}

/// One request in flight; ends when dropped.
struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut g = self.0.0.lock();
        g.0 = g.0.saturating_sub(1);
        g.1 = Instant::now();
    }
}

/// A response body that keeps its request counted until it ends.
struct Counted {
    inner: axum::body::Body,
    _busy: Busy,
}

impl hyper::body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        hyper::body::Body::poll_frame(std::pin::Pin::new(&mut self.inner), cx)
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.inner)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::Body::size_hint(&self.inner)
    }
}

/// Paths a connection on the health reserve serves.
fn health_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

async fn health_only(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if health_path(req.uri().path()) {
        return next.run(req).await;
    }
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        [
            (axum::http::header::RETRY_AFTER, "1"),
            (axum::http::header::CONNECTION, "close"),
        ],
        "busy: every connection is in use (server.max_connections); try again\n",
    )
        .into_response()
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.pool().services().serving.connection_closed();
    }
}

/// Connections the kernel queues for us before the handshake stalls (the
/// standard library's 128 makes a burst of clients wait seconds for SYN-ACK
/// retransmits).
const BACKLOG: u32 = 1024;

/// Bind the listening socket.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Raise the soft file limit to the hard one (Chromium and the listener both
/// want descriptors) and return the limit now in force.
pub fn raise_file_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    lim.rlim_cur
}

/// Serve `router` on `tcp` until `accepting` fires (the socket is closed at
/// once, so new connections are refused), then ask every open connection to
/// finish when `closing` fires and wait for them.
pub async fn serve(
    tcp: TcpListener,
    router: Router,
    limits: Limits,
    core: Arc<crate::mcp::Core>,
    accepting: CancellationToken,
    closing: CancellationToken,
) {
    core.pool()
        .services()
        .serving
        .set_connection_cap(limits.max_connections);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let reserve = Arc::new(Semaphore::new(HEALTH_RESERVE));
    let health_router = router.clone().layer(axum::middleware::from_fn(health_only));
    let tracker = TaskTracker::new();
    let mut warned: Option<Instant> = None;
    loop {
        if permits.available_permits() == 0 && warned.is_none_or(|t| t.elapsed().as_secs() >= 60) {
            tracing::warn!(
                cap = limits.max_connections,
                "all connections in use (server.max_connections); new ones wait, health checks are still answered"
            );
            warned = Some(Instant::now());
        }
        // A free connection first; only when none is, one of the health
        // reserve.
        let (permit, for_health) = tokio::select! {
            biased;
            () = accepting.cancelled() => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => (p, false),
                Err(_) => break,
            },
            p = reserve.clone().acquire_owned() => match p {
                Ok(p) => (p, true),
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            r = tcp.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = accepting.cancelled() => break,
        };
        // Without TCP_NODELAY a response written in two parts (rmcp's SSE
        // head, then the result) waits for the client's delayed ACK: 40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set on a connection: {e}");
        }
        core.pool().services().serving.connection_opened();
        let open = Open(core.clone(), permit);
        let (router, header_timeout) = if for_health {
            (
                health_router.clone(),
                limits.header_timeout.min(Duration::from_secs(2)),
            )
        } else {
            (router.clone(), limits.header_timeout)
        };
        tracker.spawn(connection(
            stream,
            router,
            header_timeout,
            closing.clone(),
            open,
        ));
    }
    drop(tcp);
    tracing::info!("stopped accepting connections");
    closing.cancelled().await;
    tracker.close();
    tracker.wait().await;
}

async fn connection(
    stream: TcpStream,
    router: Router,
    header_timeout: Duration,
    closing: CancellationToken,
    _open: Open,
) {
    // hyper's header timer starts once it reads a request head, but the
    // HTTP/1-or-2 sniff before it waits for bytes without one: a client that
    // sends nothing is closed here.
    let mut first = [0u8; 1];
    match tokio::time::timeout(header_timeout, stream.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => {}
        _ => return,
    }
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .enable_connect_protocol()
        .max_concurrent_streams(MAX_STREAMS)
        .max_pending_accept_reset_streams(Some(MAX_STREAMS as usize))
        .keep_alive_interval(Some(Duration::from_secs(20)))
        .keep_alive_timeout(header_timeout);
    let activity = Activity::new();
    let counted = activity.clone();
    let service = tower::service_fn(move |req: axum::extract::Request<hyper::body::Incoming>| {
        let busy = counted.begin();
        let call = tower::ServiceExt::oneshot(router.clone(), req.map(axum::body::Body::new));
        async move {
            let resp = call.await?;
            Ok::<_, std::convert::Infallible>(resp.map(|b| {
                axum::body::Body::new(Counted {
                    inner: b,
                    _busy: busy,
                })
            }))
        }
    });
    let service = TowerToHyperService::new(service);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            () = closing.cancelled() => break,
            _ = tick.tick() => {
                // Idle past the header timeout: closed, however well it
                // answers PINGs.
                if activity.idle_for().is_some_and(|d| d >= header_timeout) {
                    break;
                }
            }
        }
    }
    conn.as_mut().graceful_shutdown();
    if let Err(e) = conn.await {
        tracing::debug!("connection ended: {e}");
    }
}
