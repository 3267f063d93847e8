//! Accept loops: plain HTTP, and HTTPS where we read the raw ClientHello first
//! (for its JA4), then replay it into rustls.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::app::Conn;
use super::ja4::{self, ClientHello};
use super::state::Shared;
use crate::fingerprint::{Tap, TapBuf};

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HELLO: usize = 64 * 1024;
/// How much of each connection is kept for header-order fingerprints.
const TAP_BYTES: usize = 256 * 1024;

/// Read TLS records until the whole ClientHello handshake message is in; return the
/// raw bytes read (to replay) and the parsed hello.
async fn read_client_hello(stream: &mut TcpStream) -> io::Result<(Vec<u8>, Option<ClientHello>)> {
    let mut raw = Vec::new();
    let mut handshake = Vec::new();
    loop {
        let mut header = [0u8; 5];
        stream.read_exact(&mut header).await?;
        raw.extend_from_slice(&header);
        if header[0] != 22 {
            return Ok((raw, None)); // not a handshake record: let rustls reject it
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let start = raw.len();
        raw.resize(start + len, 0);
        stream.read_exact(&mut raw[start..]).await?;
        handshake.extend_from_slice(&raw[start..]);
        if handshake.len() >= 4 {
            if handshake[0] != 1 {
                return Ok((raw, None));
            }
            let need = 4
                + (usize::from(handshake[1]) << 16
                    | usize::from(handshake[2]) << 8
                    | usize::from(handshake[3]));
            if handshake.len() >= need {
                return Ok((raw, ja4::parse_client_hello(&handshake[4..need])));
            }
        }
        if raw.len() > MAX_HELLO {
            return Ok((raw, None));
        }
    }
}

/// A stream that first yields bytes already read from it.
struct Replay<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

async fn serve_conn<I>(io: I, conn: Conn, app: Router, shared: Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        let app = app.clone();
        let conn = conn.clone();
        let shared = shared.clone();
        async move {
            if shared.take_reset(req.uri().path()) {
                // Returning an error makes hyper drop the connection mid-request.
                return Err::<axum::response::Response, io::Error>(io::Error::other(
                    "connection reset on purpose",
                ));
            }
            req.extensions_mut().insert(conn);
            let resp = app.oneshot(req.map(axum::body::Body::new)).await;
            resp.map_err(|never| match never {})
        }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if let Err(e) = builder.serve_connection(TokioIo::new(io), service).await {
        tracing::debug!(error = %e, "testbed connection ended with an error");
    }
}

/// Serve plain HTTP on `listener` until `shutdown` flips.
pub async fn serve_http(
    listener: TcpListener,
    app: Router,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let buf = TapBuf::new(TAP_BYTES);
                    let conn = Conn { tap: Some(buf.clone()), ..Conn::default() };
                    conns.spawn(serve_conn(Tap { inner: stream, buf }, conn, app.clone(), shared.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "testbed accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Serve HTTPS on `listener`, fingerprinting each ClientHello.
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let (acceptor, app, shared) = (acceptor.clone(), app.clone(), shared.clone());
                    conns.spawn(async move {
                        let (prefix, hello) = match tokio::time::timeout(HELLO_TIMEOUT, read_client_hello(&mut stream)).await {
                            Ok(Ok(v)) => v,
                            _ => return,
                        };
                        let replay = Replay { prefix, pos: 0, inner: stream };
                        let tls = match tokio::time::timeout(HELLO_TIMEOUT, acceptor.accept(replay)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "testbed TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        };
                        let buf = TapBuf::new(TAP_BYTES);
                        let conn = Conn { tls: true, hello, tap: Some(buf.clone()) };
                        serve_conn(Tap { inner: tls, buf }, conn, app, shared).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "testbed accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
