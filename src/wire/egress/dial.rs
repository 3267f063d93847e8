//! The egress's connection to a checked target: direct, or through the slot's
//! upstream proxy (HTTP CONNECT, over TLS for an `https://` proxy, or SOCKS5).
//! The upstream's credentials are added here and nowhere else; errors never
//! quote them.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_socks::tcp::Socks5Stream;

use super::target::Target;
use crate::config::ProxyUrl;

/// A byte stream to the target.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Why a dial failed: the upstream proxy, or the target behind it.
#[derive(Debug)]
pub(crate) enum DialError {
    /// The upstream proxy could not be reached or refused us.
    Upstream(String),
    /// The target could not be reached (directly, or as the upstream says).
    Target(String),
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::Upstream(m) => write!(f, "upstream proxy: {m}"),
            DialError::Target(m) => f.write_str(m),
        }
    }
}

/// TLS to `https://` upstream proxies: the public roots plus
/// `security.extra_root_certs`, put together at first use (most pools have no
/// such proxy).
#[derive(Default)]
pub struct ProxyTls {
    extra: Vec<Vec<u8>>,
    connector: OnceLock<Result<tokio_rustls::TlsConnector, String>>,
}

impl std::fmt::Debug for ProxyTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProxyTls({} extra roots)", self.extra.len())
    }
}

impl ProxyTls {
    /// Trust the public roots and `extra` (DER certificates).
    pub fn new(extra: Vec<Vec<u8>>) -> ProxyTls {
        ProxyTls {
            extra,
            connector: OnceLock::new(),
        }
    }

    fn connector(&self) -> Result<&tokio_rustls::TlsConnector, DialError> {
        self.connector
            .get_or_init(|| {
                use rustls::pki_types::CertificateDer;
                let mut roots = rustls::RootCertStore::empty();
                roots.add_parsable_certificates(
                    webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().cloned(),
                );
                roots.add_parsable_certificates(
                    self.extra.iter().map(|d| CertificateDer::from(d.clone())),
                );
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS setup: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                // CONNECT is HTTP/1.1.
                cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(tokio_rustls::TlsConnector::from(Arc::new(cfg)))
            })
            .as_ref()
            .map_err(|e| DialError::Upstream(e.clone()))
    }
}

/// Connect to `target`, within `timeout` for the whole of it.
pub(crate) async fn dial(
    target: &Target,
    upstream: Option<&ProxyUrl>,
    tls: &ProxyTls,
    timeout: Duration,
) -> Result<Box<dyn Io>, DialError> {
    let work = async {
        match upstream {
            None => direct(target).await,
            Some(p) if p.scheme() == "http" => {
                http_connect(tcp_to_proxy(p).await?, p, target).await
            }
            Some(p) if p.scheme() == "https" => {
                http_connect(tls_to_proxy(p, tls).await?, p, target).await
            }
            Some(p) => socks5(p, target).await,
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(match upstream {
                Some(_) => DialError::Upstream(format!("no answer within {} s", timeout.as_secs())),
                None => DialError::Target(format!(
                    "connecting to {} timed out after {} s",
                    target_str(target),
                    timeout.as_secs()
                )),
            })
        })
}

fn target_str(t: &Target) -> String {
    match t {
        Target::Addr(a) => a.to_string(),
        Target::Name(h, p) => format!("{h}:{p}"),
    }
}

async fn direct(target: &Target) -> Result<Box<dyn Io>, DialError> {
    let stream = match target {
        Target::Addr(a) => TcpStream::connect(a).await,
        // Only a socks5h upstream yields names.
        Target::Name(h, p) => TcpStream::connect((h.as_str(), *p)).await,
    }
    .map_err(|e| DialError::Target(format!("cannot connect to {}: {e}", target_str(target))))?;
    let _ = stream.set_nodelay(true);
    Ok(Box::new(stream))
}

async fn tcp_to_proxy(p: &ProxyUrl) -> Result<TcpStream, DialError> {
    let (host, port) = p.host_port();
    let s = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| DialError::Upstream(format!("cannot connect to {host}:{port}: {e}")))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// A TLS connection to an `https://` proxy, its certificate checked against
/// the proxy's host name (or address).
async fn tls_to_proxy(
    p: &ProxyUrl,
    tls: &ProxyTls,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, DialError> {
    let connector = tls.connector()?;
    let (host, port) = p.host_port();
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| DialError::Upstream(format!("`{host}` is no TLS server name ({e})")))?;
    let tcp = tcp_to_proxy(p).await?;
    connector.connect(name, tcp).await.map_err(|e| {
        DialError::Upstream(format!(
            "TLS to {host}:{port}: {e} (a private CA belongs in security.extra_root_certs)"
        ))
    })
}

/// `CONNECT target` through an HTTP proxy (on `s`), with Basic credentials.
async fn http_connect<S: Io + 'static>(
    mut s: S,
    p: &ProxyUrl,
    target: &Target,
) -> Result<Box<dyn Io>, DialError> {
    let t = target_str(target);
    let mut head = format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n");
    if let Some((user, pass)) = p.credentials() {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        head.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())
        .await
        .map_err(|e| DialError::Upstream(format!("connection lost: {e}")))?;
    // The answer's head, byte by byte: nothing of the tunnel may be read past it.
    let mut buf = Vec::with_capacity(256);
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > 8192 {
            return Err(DialError::Upstream("answer head too long".into()));
        }
        let b = s
            .read_u8()
            .await
            .map_err(|_| DialError::Upstream("closed the connection during CONNECT".into()))?;
        buf.push(b);
    }
    let line = String::from_utf8_lossy(&buf);
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .unwrap_or(0);
    match status {
        200..=299 => Ok(Box::new(s)),
        407 => Err(DialError::Upstream(
            "407: the proxy refused the credentials".into(),
        )),
        // The proxy reached us but not the target.
        502..=504 => Err(DialError::Target(format!(
            "the upstream proxy could not reach {t} (HTTP {status})"
        ))),
        _ => Err(DialError::Upstream(format!(
            "CONNECT answered HTTP {status}"
        ))),
    }
}

async fn socks5(p: &ProxyUrl, target: &Target) -> Result<Box<dyn Io>, DialError> {
    let s = tcp_to_proxy(p).await?;
    let creds = p.credentials();
    let stream = match (target, &creds) {
        (Target::Addr(a), None) => Socks5Stream::connect_with_socket(s, *a).await,
        (Target::Addr(a), Some((u, pw))) => {
            Socks5Stream::connect_with_password_and_socket(s, *a, u, pw).await
        }
        (Target::Name(h, port), None) => {
            Socks5Stream::connect_with_socket(s, (h.as_str(), *port)).await
        }
        (Target::Name(h, port), Some((u, pw))) => {
            Socks5Stream::connect_with_password_and_socket(s, (h.as_str(), *port), u, pw).await
        }
    };
    match stream {
        Ok(s) => Ok(Box::new(s)),
        Err(e) => {
            use tokio_socks::Error as S;
            let msg = e.to_string();
            Err(match e {
                S::ConnectionRefused
                | S::HostUnreachable
                | S::NetworkUnreachable
                | S::TtlExpired
                | S::ConnectionNotAllowedByRuleset => DialError::Target(format!(
                    "the upstream proxy could not reach {}: {msg}",
                    target_str(target)
                )),
                _ => DialError::Upstream(msg),
            })
        }
    }
}

/// Can the proxy be reached at all (a TCP connection, then closed)?
pub(crate) async fn probe(p: &ProxyUrl, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, tcp_to_proxy(p)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "upstream proxy: no answer within {} s",
            timeout.as_secs()
        )),
    }
}
