//! The daemon's HTTP listener: hyper's connection builder with the bounds
//! `axum::serve` does not offer. A connection must send its request headers
//! within `server.header_timeout_secs` of opening and of its previous response
//! (silent and half-sent requests are closed, so slow-loris clients hold
//! nothing for long), and at most `connection_cap` connections are open at
//! once: further ones wait in the kernel's backlog, so the listener can never
//! use up the descriptors that browsers, jars and the audit log need.

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

/// Counts one open connection while it lives (and holds its permit).
struct Open(
    Arc<crate::mcp::Core>,
    #[allow(dead_code)] OwnedSemaphorePermit,
);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.pool().serving().connection_closed();
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
        .serving()
        .set_connection_cap(limits.max_connections);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let tracker = TaskTracker::new();
    let mut warned: Option<Instant> = None;
    loop {
        if permits.available_permits() == 0 && warned.is_none_or(|t| t.elapsed().as_secs() >= 60) {
            tracing::warn!(
                cap = limits.max_connections,
                "all connections in use (server.max_connections); new ones wait"
            );
            warned = Some(Instant::now());
        }
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = accepting.cancelled() => break,
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
        core.pool().serving().connection_opened();
        let open = Open(core.clone(), permit);
        tracker.spawn(connection(
            stream,
            router.clone(),
            limits.header_timeout,
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
        .keep_alive_interval(Some(Duration::from_secs(20)))
        .keep_alive_timeout(header_timeout);
    let service = TowerToHyperService::new(router);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("connection ended: {e}");
            }
            return;
        }
        () = closing.cancelled() => conn.as_mut().graceful_shutdown(),
    }
    if let Err(e) = conn.await {
        tracing::debug!("connection ended: {e}");
    }
}
