//! Accept loops: plain HTTP, and HTTPS where we read the raw ClientHello first
//! (for its JA4), then replay it into rustls.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::app::Conn;
use super::state::Shared;
use idpool::wire::fingerprint::hello::{Replay, read_client_hello};
use idpool::wire::fingerprint::{Tap, TapBuf};

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of each connection is kept for header-order fingerprints.
const TAP_BYTES: usize = 256 * 1024;

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
                        let replay = Replay::new(prefix, stream);
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
