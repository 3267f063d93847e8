//! The calibration listener: HTTPS on 127.0.0.2 (127.0.0.1 when that cannot
//! be bound; another loopback address than the sites tests and operators
//! run on 127.0.0.1, so no cookie of theirs reaches it) with a throwaway certificate
//! (Chromium trusts it through its SPKI pin), HTTP/2 and HTTP/1.1. It records
//! how each request under `/calibrate/` arrived: the connection's ClientHello,
//! the HTTP/2 fingerprint, the HEADERS priority and the header list in order.
//! The same port answers plain HTTP/1.1 too (told apart by the first byte):
//! the run's `h1/` pages, where Chromium's HTTP/1.1 header names, case and
//! order are learnt.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use rcgen::{CertificateParams, DnType, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::error::{Error, ErrorKind, Result};
use crate::wire::fingerprint::hello::{Replay, read_client_hello};
use crate::wire::fingerprint::tls::ClientHello;
use crate::wire::fingerprint::{Observed, Tap, TapBuf};

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A calibration connection lives a few seconds; nothing may hold one longer.
const CONN_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_CONNS: usize = 64;
const TAP_BYTES: usize = 256 * 1024;

/// The page a calibration navigates to: it POSTs a form the way a shop's
/// AJAX call does (Chromium orders an XHR's headers by which ones the script
/// set, so it sets the usual three), then marks itself `#done`.
const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>idpool calibration</title></head>
<body><p id="wait">calibrating</p><script>
fetch("xhr", {
  method: "POST",
  headers: { "x-requested-with": "XMLHttpRequest", "accept": "application/json", "content-type": "application/x-www-form-urlencoded" },
  body: "item=calibration&page=1"
}).then(function (r) { return r.text(); }).then(function () {
  document.getElementById("wait").id = "done";
}, function (e) { document.getElementById("wait").textContent = "failed: " + e; });
</script></body></html>"#;

/// Cookie values other than the listener's own are not the calibration's
/// business (a browser may carry cookies of other sites on the same host):
/// their names stay, their values do not.
fn redact_cookies(headers: Vec<(String, String)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| {
            if !k.eq_ignore_ascii_case("cookie") {
                return (k, v);
            }
            let v = v
                .split("; ")
                .map(|pair| match pair.split_once('=') {
                    Some(_) if pair == COOKIE => pair.to_string(),
                    Some((name, _)) => format!("{name}=(redacted)"),
                    None => pair.to_string(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            (k, v)
        })
        .collect()
}

/// The cookie the first navigation sets, so later requests show where the
/// client puts its cookies.
pub const COOKIE: &str = "idpool_calibration=1";

/// A throwaway certificate for the loopback addresses.
pub struct Cert {
    pub pem: String,
    /// base64(SHA-256(SPKI)) for `--ignore-certificate-errors-spki-list`.
    pub spki: String,
    config: Arc<rustls::ServerConfig>,
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Internal, format!("calibration certificate: {e}"))
}

impl Cert {
    pub fn generate() -> Result<Cert> {
        let mut params = CertificateParams::new(vec![
            "127.0.0.2".to_string(),
            "127.0.0.1".into(),
            "localhost".into(),
        ])
        .map_err(tls_err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "idpool calibration");
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(3650);
        let key = KeyPair::generate().map_err(tls_err)?;
        let cert = params.self_signed(&key).map_err(tls_err)?;
        let spki = crate::wire::http::cert::spki_hash_der(cert.der())
            .ok_or_else(|| tls_err("cannot read its public key"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(tls_err)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Cert {
            pem: cert.pem(),
            spki,
            config: Arc::new(config),
        })
    }
}

/// What the listener saw of the current run: its token and the requests
/// by name (`start`, `page`, `xhr`). Requests with another token are served
/// but not recorded.
#[derive(Debug, Default)]
pub struct Run {
    pub token: String,
    pub seen: HashMap<String, Observed>,
}

pub type Seen = Arc<Mutex<Run>>;

/// The listening socket, bound when the pool opens (so every slot's
/// Chromium knows the address to let past a proxy), served from the first
/// run on.
pub struct Socket {
    pub host: &'static str,
    pub port: u16,
    std: std::net::TcpListener,
}

impl Socket {
    pub fn bind() -> Result<Socket> {
        let (host, std) = match std::net::TcpListener::bind("127.0.0.2:0") {
            Ok(t) => ("127.0.0.2", t),
            Err(_) => (
                "127.0.0.1",
                std::net::TcpListener::bind("127.0.0.1:0")
                    .map_err(|e| Error::io("calibration listener: cannot bind 127.0.0.1", e))?,
            ),
        };
        std.set_nonblocking(true)
            .map_err(|e| Error::io("calibration listener", e))?;
        let port = std
            .local_addr()
            .map_err(|e| Error::io("calibration listener", e))?
            .port();
        Ok(Socket { host, port, std })
    }
}

/// A running listener.
pub struct Listener {
    pub host: &'static str,
    pub port: u16,
    pub seen: Seen,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    pub fn start(socket: Socket, cert: &Cert) -> Result<Listener> {
        let tcp =
            TcpListener::from_std(socket.std).map_err(|e| Error::io("calibration listener", e))?;
        let seen: Seen = Arc::default();
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(
            tcp,
            tokio_rustls::TlsAcceptor::from(cert.config.clone()),
            seen.clone(),
            stop_rx,
        ));
        Ok(Listener {
            host: socket.host,
            port: socket.port,
            seen,
            stop,
            task,
        })
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    seen: Seen,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = tcp.accept() => match accepted {
                Ok((stream, _)) if conns.len() < MAX_CONNS => {
                    conns.spawn(serve(stream, acceptor.clone(), seen.clone(), stop.clone()));
                }
                Ok(_) => tracing::warn!("calibration listener: too many connections; one refused"),
                Err(e) => {
                    tracing::warn!(error = %e, "calibration listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    seen: Seen,
    stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    // A TLS record starts 0x16; anything else is plain HTTP/1.1 (the
    // calibration's HTTP/1.1 sample: `http://` is what makes Chromium use it).
    let mut first = [0u8; 1];
    match tokio::time::timeout(HELLO_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] != 0x16 => {
            let buf = TapBuf::new(TAP_BYTES);
            serve_http(Tap { inner: stream, buf }, seen, None, stop).await;
            return;
        }
        Ok(Ok(1)) => {}
        _ => return,
    }
    let Ok(Ok((prefix, hello))) =
        tokio::time::timeout(HELLO_TIMEOUT, read_client_hello(&mut stream)).await
    else {
        return;
    };
    let tls =
        match tokio::time::timeout(HELLO_TIMEOUT, acceptor.accept(Replay::new(prefix, stream)))
            .await
        {
            Ok(Ok(s)) => s,
            _ => return,
        };
    let buf = TapBuf::new(TAP_BYTES);
    serve_http(Tap { inner: tls, buf }, seen, hello, stop).await;
}

/// Serve one connection (TLS or plain), recording from its tap.
async fn serve_http<S>(
    io: Tap<S>,
    seen: Seen,
    hello: Option<ClientHello>,
    mut stop: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let tap = io.buf.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let (seen, tap, hello) = (seen.clone(), tap.clone(), hello.clone());
        async move { Ok::<_, Infallible>(answer(req, &seen, &tap, hello)) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        _ = tokio::time::timeout(CONN_TIMEOUT, conn) => {}
        _ = stop.changed() => {}
    }
}

fn answer(
    req: hyper::Request<Incoming>,
    seen: &Seen,
    tap: &TapBuf,
    hello: Option<ClientHello>,
) -> hyper::Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let (token, name) = path
        .strip_prefix("/calibrate/")
        .and_then(|rest| rest.split_once('/'))
        .unwrap_or(("", ""));
    let known = matches!(
        name,
        "start"
            | "page"
            | "xhr"
            | "h1/page"
            | "h1/xhr"
            | "hints/page"
            | "hints/xhr"
            | "check"
            | "check/worker.js"
    );
    let mut run = seen.lock();
    if known && !token.is_empty() && token == run.token {
        let target = req
            .uri()
            .path_and_query()
            .map_or_else(|| path.clone(), |p| p.to_string());
        if let Some(view) = tap.request_view(req.method().as_str(), &target) {
            run.seen.insert(
                name.to_string(),
                Observed {
                    hello,
                    protocol: view.protocol.to_string(),
                    akamai: view.akamai,
                    priority: view.priority,
                    headers: redact_cookies(view.headers),
                },
            );
        }
    }
    drop(run);
    let html = "text/html; charset=utf-8";
    let (status, ctype, body): (u16, &str, Bytes) = match name {
        "start" | "hints/ask" => (200, html, Bytes::from_static(b"<p id=\"done\">start</p>")),
        "page" | "h1/page" | "hints/page" => (200, html, Bytes::from_static(PAGE.as_bytes())),
        "xhr" | "h1/xhr" | "hints/xhr" => (
            200,
            "application/json",
            Bytes::from_static(b"{\"ok\":true}"),
        ),
        "check" => (
            200,
            html,
            Bytes::from(super::page::page(&check_headers(req.headers()))),
        ),
        "check/frame" => (200, html, Bytes::from_static(super::page::FRAME.as_bytes())),
        "check/worker.js" => (
            200,
            "text/javascript",
            Bytes::from(super::page::worker_js()),
        ),
        _ => (404, "text/plain", Bytes::from_static(b"not found")),
    };
    let mut resp = hyper::Response::new(Full::new(body));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    let headers = resp.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(ctype),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    // The run's first page forgets what an earlier run asked for (an
    // `Accept-CH` replaces what the origin asked before); `hints/ask` asks
    // for every hint, for the `hints/` sample.
    let asked = match name {
        "start" => Some(""),
        "hints/ask" => Some(crate::wire::fingerprint::ASK_ALL),
        _ => None,
    };
    if let Some(v) = asked.and_then(|v| hyper::header::HeaderValue::from_str(v).ok()) {
        headers.insert(hyper::header::HeaderName::from_static("accept-ch"), v);
    }
    if name == "start" {
        headers.insert(
            hyper::header::SET_COOKIE,
            hyper::header::HeaderValue::from_static(
                "idpool_calibration=1; Path=/; Secure; SameSite=Lax; Max-Age=600",
            ),
        );
    }
    resp
}

/// The headers the self-check page compares with what the page says.
fn check_headers(headers: &hyper::HeaderMap) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for name in [
        "user-agent",
        "sec-ch-ua",
        "sec-ch-ua-mobile",
        "sec-ch-ua-platform",
        "accept-language",
    ] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
            out.insert(name.into(), v.into());
        }
    }
    serde_json::Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_cookies_keep_their_names_only() {
        let h = |k: &str, v: &str| (k.to_string(), v.to_string());
        let out = redact_cookies(vec![
            h("user-agent", "UA"),
            h("cookie", "session=s3cret; idpool_calibration=1"),
            h("cookie", "idpool_calibration=1"),
        ]);
        assert_eq!(
            out,
            [
                h("user-agent", "UA"),
                h("cookie", "session=(redacted); idpool_calibration=1"),
                h("cookie", "idpool_calibration=1"),
            ]
        );
    }
}
