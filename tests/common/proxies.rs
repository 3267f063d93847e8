//! Tiny authenticating proxies on loopback, for proxy tests of both tiers.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// What a proxy saw: the authentication it was given and where it tunnelled to.
#[derive(Default, Debug)]
pub struct Seen {
    pub auth: Vec<String>,
    pub targets: Vec<String>,
}

/// An HTTP proxy that answers CONNECT only, with `Proxy-Authorization` required.
pub async fn http_connect_proxy(seen: Arc<Mutex<Seen>>) -> u16 {
    http_connect_proxy_on(0, seen).await.expect("bind")
}

/// The same proxy on a chosen port (0: any); `None` if the port is taken.
pub async fn http_connect_proxy_on(port: u16, seen: Arc<Mutex<Seen>>) -> Option<u16> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await.ok()?;
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(serve_connect(client, seen.clone()));
        }
    });
    Some(port)
}

/// The same proxy spoken over TLS (an `https://` proxy) with `tls`'s
/// certificate; `tls_accepts` counts the handshakes that succeeded.
pub async fn https_connect_proxy(
    seen: Arc<Mutex<Seen>>,
    tls: Arc<rustls::ServerConfig>,
    tls_accepts: Arc<std::sync::atomic::AtomicUsize>,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (acceptor, seen, n) = (acceptor.clone(), seen.clone(), tls_accepts.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(client).await {
                    n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    serve_connect(tls, seen).await;
                }
            });
        }
    });
    port
}

/// One CONNECT: read the head, demand `Proxy-Authorization`, tunnel.
async fn serve_connect<S>(client: S, seen: Arc<Mutex<Seen>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(client);
    let mut line = String::new();
    if reader.read_line(&mut line).await.is_err() {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut auth = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).await.unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((name, v)) = h.split_once(':')
            && name.eq_ignore_ascii_case("proxy-authorization")
        {
            auth = Some(v.trim().to_string());
        }
    }
    let mut client = reader.into_inner();
    let Some(auth) = auth else {
        let _ = client
            .write_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n",
            )
            .await;
        return;
    };
    {
        let mut s = seen.lock();
        s.auth.push(auth);
        s.targets.push(target.clone());
    }
    let Ok(mut upstream) = TcpStream::connect(&target).await else {
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_ok()
    {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// The user name in a `Proxy-Authorization: Basic` value as [`Seen`] keeps it.
pub fn basic_user(auth: &str) -> String {
    use base64::Engine;
    let token = auth.trim().trim_start_matches("Basic ").trim();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .split(':')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A SOCKS5 proxy with username/password authentication (RFC 1928 + 1929).
pub async fn socks5_proxy(seen: Arc<Mutex<Seen>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let r: std::io::Result<()> = async {
                    let mut head = [0u8; 2];
                    c.read_exact(&mut head).await?;
                    let mut methods = vec![0u8; head[1] as usize];
                    c.read_exact(&mut methods).await?;
                    if !methods.contains(&2) {
                        c.write_all(&[5, 0xff]).await?;
                        return Ok(());
                    }
                    c.write_all(&[5, 2]).await?;
                    let mut v = [0u8; 2];
                    c.read_exact(&mut v).await?;
                    let mut user = vec![0u8; v[1] as usize];
                    c.read_exact(&mut user).await?;
                    let mut plen = [0u8; 1];
                    c.read_exact(&mut plen).await?;
                    let mut pass = vec![0u8; plen[0] as usize];
                    c.read_exact(&mut pass).await?;
                    seen.lock().auth.push(format!(
                        "{}:{}",
                        String::from_utf8_lossy(&user),
                        String::from_utf8_lossy(&pass)
                    ));
                    c.write_all(&[1, 0]).await?;
                    let mut req = [0u8; 4];
                    c.read_exact(&mut req).await?;
                    let host = match req[3] {
                        1 => {
                            let mut a = [0u8; 4];
                            c.read_exact(&mut a).await?;
                            std::net::Ipv4Addr::from(a).to_string()
                        }
                        3 => {
                            let mut n = [0u8; 1];
                            c.read_exact(&mut n).await?;
                            let mut name = vec![0u8; n[0] as usize];
                            c.read_exact(&mut name).await?;
                            String::from_utf8_lossy(&name).into_owned()
                        }
                        _ => return Ok(()),
                    };
                    let mut p = [0u8; 2];
                    c.read_exact(&mut p).await?;
                    let target = format!("{host}:{}", u16::from_be_bytes(p));
                    seen.lock().targets.push(target.clone());
                    let mut upstream = TcpStream::connect(&target).await?;
                    c.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]).await?;
                    tokio::io::copy_bidirectional(&mut c, &mut upstream).await?;
                    Ok(())
                }
                .await;
                let _ = r;
            });
        }
    });
    port
}
