//! The calibration listener: HTTPS on 127.0.0.2 (127.0.0.1 when that cannot
//! be bound; another loopback address than the sites tests and operators
//! run on 127.0.0.1, so no cookie of theirs reaches it) with a throwaway certificate
//! (Chromium trusts it through its SPKI pin), HTTP/2 and HTTP/1.1. It records
//! how each request under `/calibrate/` arrived: the connection's ClientHello,
//! the HTTP/2 fingerprint, the HEADERS priority and the header list in order.

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
use crate::fingerprint::hello::{Replay, read_client_hello};
use crate::fingerprint::tls::ClientHello;
use crate::fingerprint::{Observed, Tap, TapBuf};

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
const TAP_BYTES: usize = 256 * 1024;

/// The page a calibration navigates to: it POSTs a form the way a shop's
/// AJAX call does (Chromium orders an XHR's headers by which ones the script
/// set, so it sets the usual three), then marks itself `#done`.
const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>idpool calibration</title></head>
<body><p id="wait">calibrating</p><script>
fetch("/calibrate/xhr", {
  method: "POST",
  headers: { "x-requested-with": "XMLHttpRequest", "accept": "application/json", "content-type": "application/x-www-form-urlencoded" },
  body: "item=calibration&page=1"
}).then(function (r) { return r.text(); }).then(function () {
  document.getElementById("wait").id = "done";
}, function (e) { document.getElementById("wait").textContent = "failed: " + e; });
</script></body></html>"#;

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
        let spki = crate::browser::launcher::spki_hash_der(cert.der())
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

/// What the listener saw, by request path.
pub type Seen = Arc<Mutex<HashMap<String, Observed>>>;

/// A running listener.
pub struct Listener {
    pub host: &'static str,
    pub port: u16,
    pub seen: Seen,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    pub async fn start(cert: &Cert) -> Result<Listener> {
        let (host, tcp) = match TcpListener::bind("127.0.0.2:0").await {
            Ok(t) => ("127.0.0.2", t),
            Err(_) => (
                "127.0.0.1",
                TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|e| Error::io("calibration listener: cannot bind 127.0.0.1", e))?,
            ),
        };
        let port = tcp
            .local_addr()
            .map_err(|e| Error::io("calibration listener", e))?
            .port();
        let seen: Seen = Arc::default();
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(
            tcp,
            tokio_rustls::TlsAcceptor::from(cert.config.clone()),
            seen.clone(),
            stop_rx,
        ));
        Ok(Listener {
            host,
            port,
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
                Ok((stream, _)) => {
                    conns.spawn(serve(stream, acceptor.clone(), seen.clone(), stop.clone()));
                }
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
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
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
    let tap = buf.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let (seen, tap, hello) = (seen.clone(), tap.clone(), hello.clone());
        async move { Ok::<_, Infallible>(answer(req, &seen, &tap, hello)) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(Tap { inner: tls, buf }), service);
    tokio::select! {
        _ = conn => {}
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
    let name = path.strip_prefix("/calibrate/").unwrap_or("");
    let known = matches!(name, "start" | "page" | "xhr");
    if known {
        let target = req
            .uri()
            .path_and_query()
            .map_or_else(|| path.clone(), |p| p.to_string());
        if let Some(view) =
            crate::fingerprint::request_view(&tap.snapshot(), req.method().as_str(), &target)
        {
            seen.lock().insert(
                name.to_string(),
                Observed {
                    hello,
                    protocol: view.protocol.to_string(),
                    akamai: view.akamai,
                    priority: view.priority,
                    headers: view.headers,
                },
            );
        }
    }
    let (status, ctype, body) = match name {
        "start" => (200, "text/html; charset=utf-8", "<p id=\"done\">start</p>"),
        "page" => (200, "text/html; charset=utf-8", PAGE),
        "xhr" => (200, "application/json", "{\"ok\":true}"),
        _ => (404, "text/plain", "not found"),
    };
    let mut resp = hyper::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
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
