//! One browser connection to the egress, served by hyper: `CONNECT host:port`
//! becomes a checked tunnel, an absolute-form `GET http://…` is forwarded to
//! the checked address. Anything refused is a `403` whose body says why; a
//! connection from outside the slot's browser is answered `403` whatever it
//! asks, before anything is dialled.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::dial::{DialError, Io, dial};
use super::{Denied, Shared};

type Body = Either<Incoming, Full<Bytes>>;

/// A browser that sends no request head within this is dropped.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

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
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                let stop = stop.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(req, shared, stop).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::trace!(error = %e, "egress connection ended");
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
        let mut r = answer(
            StatusCode::FORBIDDEN,
            format!("idpool egress: this proxy serves slot {slot}'s browser only\n"),
        );
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

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> Response<Body> {
    if req.method() == Method::CONNECT {
        connect(req, shared, stop).await
    } else {
        forward(req, shared).await
    }
}

fn answer(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Either::Right(Full::new(Bytes::from(text))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Check and dial `host:port`; a refusal or a failed dial is the answer.
async fn open(shared: &Shared, host: &str, port: u16) -> Result<Box<dyn Io>, Response<Body>> {
    let target_name = format!("{host}:{port}");
    let target = match shared.check(host, port).await {
        Ok(t) => t,
        Err(Denied::Refused(reason)) => {
            let text = format!("idpool egress refused {target_name}: {reason}");
            shared.refuse(target_name, reason);
            return Err(answer(StatusCode::FORBIDDEN, text));
        }
        Err(Denied::Unresolved(why)) => {
            shared.connect_failures.fetch_add(1, Ordering::Relaxed);
            return Err(answer(
                StatusCode::BAD_GATEWAY,
                format!("idpool egress: {why}"),
            ));
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
            shared.requests.fetch_add(1, Ordering::Relaxed);
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
            Err(answer(
                StatusCode::BAD_GATEWAY,
                format!("idpool egress: {e}"),
            ))
        }
    }
}

/// `CONNECT host:port`: answer 200, then splice the upgraded connection to the
/// target, counting bytes.
async fn connect(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> Response<Body> {
    let Some(authority) = req.uri().authority().cloned() else {
        return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port".into());
    };
    let Some(port) = authority.port_u16() else {
        return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port".into());
    };
    let io = match open(&shared, authority.host(), port).await {
        Ok(io) => io,
        Err(refusal) => return refusal,
    };
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "egress: CONNECT upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        let mut site = Counted {
            inner: io,
            up: shared.bytes_up.clone(),
            down: shared.bytes_down.clone(),
        };
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut site) => {}
            () = stop.cancelled() => {}
        }
    });
    Response::new(Either::Right(Full::new(Bytes::new())))
}

/// Hop-by-hop headers a proxy must not pass on (RFC 9110 §7.6.1), and our own.
const HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Plain `http://` through the proxy: one request on a fresh connection to
/// the checked address, in origin form.
async fn forward(mut req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("http") {
        return answer(
            StatusCode::BAD_REQUEST,
            "the egress forwards absolute http:// requests and CONNECT only".into(),
        );
    }
    let Some(host) = uri.host() else {
        return answer(StatusCode::BAD_REQUEST, "request URI has no host".into());
    };
    let port = uri.port_u16().unwrap_or(80);
    let io = match open(&shared, host, port).await {
        Ok(io) => io,
        Err(refusal) => return refusal,
    };
    let counted = Counted {
        inner: io,
        up: shared.bytes_up.clone(),
        down: shared.bytes_down.clone(),
    };
    let (mut send, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(counted)).await
    {
        Ok(pair) => pair,
        Err(e) => return answer(StatusCode::BAD_GATEWAY, format!("idpool egress: {e}")),
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    *req.uri_mut() = match path.parse() {
        Ok(u) => u,
        Err(_) => return answer(StatusCode::BAD_REQUEST, "bad request path".into()),
    };
    for h in HOP {
        req.headers_mut().remove(*h);
    }
    match send.send_request(req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            for h in HOP {
                parts.headers.remove(*h);
            }
            Response::from_parts(parts, Either::Left(body))
        }
        Err(e) => answer(
            StatusCode::BAD_GATEWAY,
            format!("idpool egress: the site's answer broke off: {e}"),
        ),
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
