//! One browser connection to the egress: `CONNECT host:port` becomes a
//! checked tunnel, an absolute-form `GET http://…` goes to the checked
//! address byte for byte as the browser wrote it (`wire`), less only the
//! request line's absolute form and what it addressed to the proxy.
//! Anything refused is a `403` whose body says why; a connection from
//! outside the slot's browser is answered `403` whatever it asks (by hyper),
//! before anything is dialled.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::dial::{DialError, Io, dial};
use super::shared::Shared;
use super::target::Denied;
use super::wire::{self, Side, WireError};

/// A browser connection that sends no request head within this (the first,
/// or the next on a kept connection) is closed.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest a site may leave one read waiting (its answer's head, or the
/// next bytes of its body).
const SITE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a connection turned away is given to send its head and read
/// the refusal.
const STRANGER_TIMEOUT: Duration = Duration::from_secs(5);

/// Accept connections until `stop`.
pub(super) async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: wait a moment rather than spin.
                tracing::warn!(slot = shared.slot, error = %e, "egress: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            if let Err(why) = admitted(&shared, &stream, peer).await {
                turn_away(stream, &shared, peer, why).await;
                return;
            }
            tokio::select! {
                () = serve(stream, &shared, &stop) => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// Whether the connection comes from the slot's own browser (`Peers`);
/// the reason when not. `/proc` is read off the runtime's threads.
async fn admitted(
    shared: &Arc<Shared>,
    stream: &tokio::net::TcpStream,
    peer: SocketAddr,
) -> Result<(), String> {
    let local = stream
        .local_addr()
        .map_err(|e| format!("the connection has no address ({e})"))?;
    let peers = shared.peers.clone();
    let slot = shared.slot;
    tokio::task::spawn_blocking(move || {
        let began = std::time::Instant::now();
        let verdict = peers.check(peer, local);
        tracing::trace!(
            slot,
            us = began.elapsed().as_micros() as u64,
            admitted = verdict.is_ok(),
            "egress: peer check"
        );
        verdict
    })
    .await
    .unwrap_or_else(|e| Err(format!("the peer check failed ({e})")))
}

/// Answer every request of a stranger's connection `403`, then close it:
/// nothing it asks for is dialled, so the upstream never sees it.
async fn turn_away(stream: tokio::net::TcpStream, shared: &Shared, peer: SocketAddr, why: String) {
    shared.strangers.fetch_add(1, Ordering::Relaxed);
    tracing::info!(slot = shared.slot, %peer, reason = %why, "egress turned away a connection from outside the slot's browser");
    let slot = shared.slot;
    let service = hyper::service::service_fn(move |_req| async move {
        let mut r = Response::new(Full::new(Bytes::from(format!(
            "idpool egress: this proxy serves slot {slot}'s browser only\n"
        ))));
        *r.status_mut() = StatusCode::FORBIDDEN;
        r.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
        Ok::<_, std::convert::Infallible>(r)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(STRANGER_TIMEOUT)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(STRANGER_TIMEOUT, conn).await;
}

/// The site connection kept for the browser's next request to the same
/// `host:port`, as a browser keeps its own.
struct Kept {
    host: String,
    port: u16,
    site: Side<Counted>,
}

/// Serve one admitted browser connection: its requests in turn, until it or
/// a site closes, or a refusal.
async fn serve(stream: tokio::net::TcpStream, shared: &Arc<Shared>, stop: &CancellationToken) {
    let mut browser = Side::new(stream, HEAD_TIMEOUT);
    let mut kept: Option<Kept> = None;
    loop {
        let head = match browser.head().await {
            Ok(h) => h,
            Err(WireError::Closed | WireError::Timeout) => return,
            Err(e) => {
                let _ = refuse(&mut browser, 400, &format!("idpool egress: {e}")).await;
                return;
            }
        };
        let req = match wire::request(&head) {
            Ok(r) => r,
            Err(e) => {
                let _ = refuse(&mut browser, 400, &format!("idpool egress: {e}")).await;
                return;
            }
        };
        if req.method.eq_ignore_ascii_case("CONNECT") {
            drop(kept);
            tunnel(browser, &req, shared, stop).await;
            return;
        }
        match forward(&mut browser, &head, &req, shared, kept.take()).await {
            Ok(Some(k)) if !req.close => kept = Some(k),
            Ok(_) => return,
            Err((status, text)) => {
                let _ = refuse(&mut browser, status, &text).await;
                return;
            }
        }
    }
}

/// Answer `status` with `text` and say the connection closes.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(
    browser: &mut Side<S>,
    status: u16,
    text: &str,
) -> Result<(), WireError> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        _ => "Bad Gateway",
    };
    let msg = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    wire::send(&mut browser.io, msg.as_bytes()).await
}

/// Check and dial `host:port`; the refusal (status, text) when not.
async fn open(shared: &Shared, host: &str, port: u16) -> Result<Box<dyn Io>, (u16, String)> {
    let target_name = format!("{host}:{port}");
    let target = match shared.check(host, port).await {
        Ok(t) => t,
        Err(Denied::Refused(reason)) => {
            let text = format!("idpool egress refused {target_name}: {reason}");
            shared.refuse(target_name, reason);
            return Err((403, text));
        }
        Err(Denied::Unresolved(why)) => {
            shared.connect_failures.fetch_add(1, Ordering::Relaxed);
            return Err((502, format!("idpool egress: {why}")));
        }
    };
    let upstream = shared.upstream.read().clone();
    match dial(
        &target,
        upstream.as_ref(),
        &shared.proxy_tls,
        shared.connect_timeout,
    )
    .await
    {
        Ok(io) => {
            if upstream.is_some() {
                shared.health.succeeded();
            }
            Ok(io)
        }
        Err(e) => {
            shared.connect_failures.fetch_add(1, Ordering::Relaxed);
            if let DialError::Upstream(why) = &e {
                shared.health.failed(why);
            }
            tracing::debug!(slot = shared.slot, target = %target_name, error = %e, "egress: cannot connect");
            Err((502, format!("idpool egress: {e}")))
        }
    }
}

/// `CONNECT host:port`: answer 200, then splice the connection to the
/// target untouched, counting bytes.
async fn tunnel(
    mut browser: Side<tokio::net::TcpStream>,
    req: &wire::Request,
    shared: &Arc<Shared>,
    stop: &CancellationToken,
) {
    let Some((host, port)) = req
        .target
        .parse::<hyper::http::uri::Authority>()
        .ok()
        .and_then(|a| Some((a.host().to_string(), a.port_u16()?)))
    else {
        let _ = refuse(&mut browser, 400, "CONNECT needs host:port").await;
        return;
    };
    let io = match open(shared, &host, port).await {
        Ok(io) => io,
        Err((status, text)) => {
            let _ = refuse(&mut browser, status, &text).await;
            return;
        }
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let mut site = counted(shared, io);
    if wire::send(
        &mut browser.io,
        b"HTTP/1.1 200 Connection established\r\n\r\n",
    )
    .await
    .is_err()
    {
        return;
    }
    // What the browser sent after its head (a ClientHello, already) goes first.
    if !browser.buf.is_empty() && wire::send(&mut site, &browser.buf).await.is_err() {
        return;
    }
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut browser.io, &mut site) => {}
        () = stop.cancelled() => {}
    }
}

fn counted(shared: &Shared, inner: Box<dyn Io>) -> Counted {
    Counted {
        inner,
        up: shared.bytes_up.clone(),
        down: shared.bytes_down.clone(),
    }
}

/// Plain `http://` through the proxy: the request goes to the checked
/// address in origin form, everything else as the browser wrote it, and
/// the answer comes back as the site wrote it. The site connection is kept
/// for the next request to the same `host:port` (what a browser does on its
/// own); `Ok(None)` when it must close.
async fn forward(
    browser: &mut Side<tokio::net::TcpStream>,
    head: &[u8],
    req: &wire::Request,
    shared: &Arc<Shared>,
    kept: Option<Kept>,
) -> Result<Option<Kept>, (u16, String)> {
    let uri: hyper::Uri = req.target.parse().map_err(|_| {
        (
            400,
            "idpool egress: the request target is not a URL".to_string(),
        )
    })?;
    if !uri
        .scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("http"))
    {
        return Err((
            400,
            "the egress forwards absolute http:// requests and CONNECT only".into(),
        ));
    }
    let host = uri
        .host()
        .ok_or((400, "request URI has no host".to_string()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let path = match uri.path_and_query().map(|p| p.as_str()) {
        Some(p) if p.starts_with('/') => p.to_string(),
        Some(p) => format!("/{p}"),
        None => "/".to_string(),
    };
    let out = wire::origin_head(head, req, &path);
    let reused = kept.filter(|k| k.host == host && k.port == port);
    let fresh = reused.is_none();
    let mut site = match reused {
        Some(k) => k.site,
        None => Side::new(
            counted(shared, open(shared, &host, port).await?),
            SITE_TIMEOUT,
        ),
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let gone = |e: WireError| {
        (
            502,
            format!("idpool egress: the site's answer broke off: {e}"),
        )
    };
    let sent = wire::send(&mut site.io, &out).await;
    if sent.is_err() && !fresh && req.framing == wire::Framing::Empty {
        // The kept connection had closed meanwhile: once more, on a new one.
        site = Side::new(
            counted(shared, open(shared, &host, port).await?),
            SITE_TIMEOUT,
        );
        wire::send(&mut site.io, &out).await.map_err(gone)?;
    } else {
        sent.map_err(gone)?;
    }
    browser
        .copy_body(req.framing, &mut site.io)
        .await
        .map_err(|e| (400, format!("idpool egress: the request body: {e}")))?;
    loop {
        let rhead = site.head().await.map_err(gone)?;
        let resp = wire::response(&rhead, &req.method).map_err(gone)?;
        // From here the browser has the answer's first bytes: errors close.
        if wire::send(&mut browser.io, &rhead).await.is_err() {
            return Ok(None);
        }
        if resp.status == 101 {
            // An upgrade (a WebSocket over plain HTTP): splice from here.
            if !site.buf.is_empty() && wire::send(&mut browser.io, &site.buf).await.is_err() {
                return Ok(None);
            }
            if !browser.buf.is_empty() && wire::send(&mut site.io, &browser.buf).await.is_err() {
                return Ok(None);
            }
            let _ = tokio::io::copy_bidirectional(&mut browser.io, &mut site.io).await;
            return Ok(None);
        }
        if (100..200).contains(&resp.status) {
            continue;
        }
        if site.copy_body(resp.framing, &mut browser.io).await.is_err() || resp.close {
            return Ok(None);
        }
        return Ok(Some(Kept { host, port, site }));
    }
}

/// A stream that counts what it reads (down) and writes (up).
struct Counted {
    inner: Box<dyn Io>,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.down.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.up.fetch_add(*n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
