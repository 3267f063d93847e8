//! HTTP/1.1 as the browser wrote it: request and response heads read raw
//! (bounded in size and time), bodies framed and copied through byte for
//! byte. The egress parses only what it must to route and frame a message;
//! everything else reaches the other side as it was sent.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A head larger than this is refused (Chromium's own limit for a response
/// head is 256 KiB; a request head is far smaller).
pub(super) const MAX_HEAD: usize = 256 * 1024;
/// A chunk-size or trailer line longer than this ends the connection.
const MAX_LINE: usize = 8 * 1024;
/// Header fields parsed per head.
const MAX_HEADERS: usize = 160;

/// Why a message could not be carried.
#[derive(Debug)]
pub(super) enum WireError {
    /// The peer closed before a head began: the normal end of keep-alive.
    Closed,
    /// Nothing arrived within the wait.
    Timeout,
    /// The peer sent something that is not HTTP/1.1 we can frame.
    Malformed(String),
    Io(std::io::Error),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Closed => f.write_str("the connection closed"),
            WireError::Timeout => f.write_str("nothing arrived in time"),
            WireError::Malformed(m) => f.write_str(m),
            WireError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> Self {
        WireError::Io(e)
    }
}

type Result<T> = std::result::Result<T, WireError>;

/// One side of the conversation with what it sent but nobody read yet.
pub(super) struct Side<S> {
    pub io: S,
    pub buf: BytesMut,
    /// The longest any one read may wait.
    pub wait: Duration,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Side<S> {
    pub fn new(io: S, wait: Duration) -> Self {
        Side {
            io,
            buf: BytesMut::with_capacity(8 * 1024),
            wait,
        }
    }

    /// Read more into the buffer; `Ok(0)` at the end of the stream.
    async fn fill(&mut self) -> Result<usize> {
        self.buf.reserve(16 * 1024);
        match tokio::time::timeout(self.wait, self.io.read_buf(&mut self.buf)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(WireError::Timeout),
        }
    }

    /// The next head, `\r\n\r\n` included, exactly as sent.
    pub async fn head(&mut self) -> Result<BytesMut> {
        let mut searched: usize = 0;
        loop {
            if let Some(at) = find(&self.buf[searched.saturating_sub(3)..], b"\r\n\r\n") {
                let end = searched.saturating_sub(3) + at + 4;
                return Ok(self.buf.split_to(end));
            }
            searched = self.buf.len();
            if searched > MAX_HEAD {
                return Err(WireError::Malformed(format!(
                    "a head over {} KiB",
                    MAX_HEAD / 1024
                )));
            }
            if self.fill().await? == 0 {
                return Err(if self.buf.is_empty() {
                    WireError::Closed
                } else {
                    WireError::Malformed("the connection closed inside a head".into())
                });
            }
        }
    }

    /// One line, `\r\n` included.
    async fn line(&mut self) -> Result<BytesMut> {
        loop {
            if let Some(at) = find(&self.buf, b"\r\n") {
                return Ok(self.buf.split_to(at + 2));
            }
            if self.buf.len() > MAX_LINE {
                return Err(WireError::Malformed("a chunk line too long".into()));
            }
            if self.fill().await? == 0 {
                return Err(WireError::Malformed(
                    "the connection closed inside a body".into(),
                ));
            }
        }
    }

    /// Copy `n` bytes to `to`.
    async fn copy_exact<W: AsyncWrite + Unpin>(&mut self, mut n: u64, to: &mut W) -> Result<()> {
        while n > 0 {
            if self.buf.is_empty() && self.fill().await? == 0 {
                return Err(WireError::Malformed(
                    "the connection closed inside a body".into(),
                ));
            }
            let take = self.buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            to.write_all(&self.buf[..take]).await?;
            self.buf.advance(take);
            n -= take as u64;
        }
        Ok(())
    }

    /// Copy a body framed as `framing` to `to`, byte for byte.
    pub async fn copy_body<W: AsyncWrite + Unpin>(
        &mut self,
        framing: Framing,
        to: &mut W,
    ) -> Result<()> {
        match framing {
            Framing::Empty => {}
            Framing::Length(n) => self.copy_exact(n, to).await?,
            Framing::Chunked => loop {
                let line = self.line().await?;
                let size = chunk_size(&line)?;
                to.write_all(&line).await?;
                if size == 0 {
                    // Trailer fields, then the empty line.
                    loop {
                        let t = self.line().await?;
                        to.write_all(&t).await?;
                        if t.len() == 2 {
                            break;
                        }
                    }
                    break;
                }
                self.copy_exact(size + 2, to).await?;
            },
            Framing::UntilClose => loop {
                if !self.buf.is_empty() {
                    to.write_all(&self.buf).await?;
                    self.buf.clear();
                }
                if self.fill().await? == 0 {
                    break;
                }
            },
        }
        to.flush().await?;
        Ok(())
    }
}

/// How a message's body ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// What the egress needs of a request head.
#[derive(Debug)]
pub(super) struct Request {
    pub method: String,
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    pub framing: Framing,
    /// The client asked to close after this exchange.
    pub close: bool,
}

/// What the egress needs of a response head.
#[derive(Debug)]
pub(super) struct Response {
    pub status: u16,
    pub framing: Framing,
    pub close: bool,
}

fn field<'h>(headers: &'h [httparse::Header<'_>], name: &str) -> Vec<&'h [u8]> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
        .collect()
}

fn has_token(values: &[&[u8]], token: &str) -> bool {
    values.iter().any(|v| {
        String::from_utf8_lossy(v)
            .split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    })
}

/// The body framing a head's fields say; `None` when they contradict.
fn framing_of(headers: &[httparse::Header<'_>]) -> std::result::Result<Option<Framing>, String> {
    let te = field(headers, "transfer-encoding");
    let cl = field(headers, "content-length");
    if !te.is_empty() {
        if !cl.is_empty() {
            // Request smuggling's shape (RFC 9112 §6.1): refuse it.
            return Err("both Transfer-Encoding and Content-Length".into());
        }
        let last_is_chunked = te
            .last()
            .and_then(|v| {
                String::from_utf8_lossy(v)
                    .rsplit(',')
                    .next()
                    .map(|t| t.trim().eq_ignore_ascii_case("chunked"))
            })
            .unwrap_or(false);
        return Ok(Some(if last_is_chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }));
    }
    let mut length: Option<u64> = None;
    for v in cl {
        let n = std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| "a Content-Length that is not a number".to_string())?;
        if length.is_some_and(|l| l != n) {
            return Err("two different Content-Length values".into());
        }
        length = Some(n);
    }
    Ok(length.map(|n| {
        if n == 0 {
            Framing::Empty
        } else {
            Framing::Length(n)
        }
    }))
}

/// Parse a request head read by [`Side::head`].
pub(super) fn request(head: &[u8]) -> Result<Request> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(WireError::Malformed("an incomplete request head".into()));
        }
        Err(e) => return Err(WireError::Malformed(format!("a bad request head ({e})"))),
    }
    let framing = framing_of(req.headers)
        .map_err(WireError::Malformed)?
        .unwrap_or(Framing::Empty);
    if framing == Framing::UntilClose {
        return Err(WireError::Malformed(
            "a request body whose end is not framed".into(),
        ));
    }
    let minor = req.version.unwrap_or(1);
    let connection = field(req.headers, "connection");
    let proxy_connection = field(req.headers, "proxy-connection");
    let close = has_token(&connection, "close")
        || has_token(&proxy_connection, "close")
        || (minor == 0
            && !has_token(&connection, "keep-alive")
            && !has_token(&proxy_connection, "keep-alive"));
    Ok(Request {
        method: req.method.unwrap_or_default().to_string(),
        target: req.path.unwrap_or_default().to_string(),
        minor,
        framing,
        close,
    })
}

/// Parse a response head to a request with `method`.
pub(super) fn response(head: &[u8], method: &str) -> Result<Response> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(WireError::Malformed("an incomplete response head".into()));
        }
        Err(e) => return Err(WireError::Malformed(format!("a bad response head ({e})"))),
    }
    let status = resp.code.unwrap_or(0);
    let minor = resp.version.unwrap_or(1);
    let connection = field(resp.headers, "connection");
    let no_body = method.eq_ignore_ascii_case("HEAD")
        || (100..200).contains(&status)
        || status == 204
        || status == 304;
    let framing = if no_body {
        Framing::Empty
    } else {
        framing_of(resp.headers)
            .map_err(WireError::Malformed)?
            .unwrap_or(Framing::UntilClose)
    };
    let close = has_token(&connection, "close")
        || (minor == 0 && !has_token(&connection, "keep-alive"))
        || framing == Framing::UntilClose;
    Ok(Response {
        status,
        framing,
        close,
    })
}

/// The head to send the site: the request line in origin form (`path`), and
/// every field line as the browser wrote it, less what it addressed to the
/// proxy: `Proxy-Authorization` goes, and `Proxy-Connection` becomes the
/// `Connection` the browser sends a site directly (same place, same value,
/// same case style) unless it sent a `Connection` too.
pub(super) fn origin_head(head: &[u8], req: &Request, path: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len());
    out.extend_from_slice(format!("{} {path} HTTP/1.{}\r\n", req.method, req.minor).as_bytes());
    let lines: Vec<&[u8]> = split_lines(head).skip(1).collect();
    let has_connection = lines
        .iter()
        .any(|l| name_of(l).eq_ignore_ascii_case(b"connection"));
    for line in lines {
        let name = name_of(line);
        if name.eq_ignore_ascii_case(b"proxy-authorization") {
            continue;
        }
        if name.eq_ignore_ascii_case(b"proxy-connection") {
            if has_connection {
                continue;
            }
            let renamed: &[u8] = if name.starts_with(b"P") {
                b"Connection"
            } else {
                b"connection"
            };
            out.extend_from_slice(renamed);
            out.extend_from_slice(&line[name.len()..]);
        } else {
            out.extend_from_slice(line);
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The lines of a head, without their `\r\n`, the final empty one left out.
fn split_lines(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = head.strip_suffix(b"\r\n\r\n").unwrap_or(head);
    body.split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

fn name_of(line: &[u8]) -> &[u8] {
    let end = line.iter().position(|b| *b == b':').unwrap_or(line.len());
    &line[..end]
}

fn chunk_size(line: &[u8]) -> Result<u64> {
    let text = std::str::from_utf8(line)
        .map_err(|_| WireError::Malformed("a chunk size that is not text".into()))?;
    let hex = text
        .trim_end_matches("\r\n")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    u64::from_str_radix(hex, 16)
        .ok()
        .filter(|n| *n < (1 << 48))
        .ok_or_else(|| WireError::Malformed(format!("a bad chunk size {hex:?}")))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Write a whole message.
pub(super) async fn send<W: AsyncWrite + Unpin>(to: &mut W, bytes: &[u8]) -> Result<()> {
    to.write_all(bytes).await?;
    to.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &[u8] = b"GET http://shop.test:8080/a?b=1 HTTP/1.1\r\nHost: shop.test:8080\r\nProxy-Connection: keep-alive\r\nUpgrade-Insecure-Requests: 1\r\nProxy-Authorization: Basic eDp5\r\nuser-agent: Mozilla/5.0  (two spaces)\r\nAccept-Language: en-US,en;q=0.9\r\n\r\n";

    #[test]
    fn the_site_gets_the_browsers_lines_less_what_it_told_the_proxy() {
        let req = request(HEAD).unwrap();
        assert_eq!(req.method, "GET");
        assert_eq!(req.target, "http://shop.test:8080/a?b=1");
        assert_eq!(req.framing, Framing::Empty);
        assert!(!req.close);
        let out = origin_head(HEAD, &req, "/a?b=1");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: shop.test:8080\r\nConnection: keep-alive\r\nUpgrade-Insecure-Requests: 1\r\nuser-agent: Mozilla/5.0  (two spaces)\r\nAccept-Language: en-US,en;q=0.9\r\n\r\n"
        );
    }

    #[test]
    fn a_connection_of_its_own_wins_over_proxy_connection() {
        let head = b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nconnection: close\r\nproxy-connection: keep-alive\r\nContent-Length: 3\r\n\r\n";
        let req = request(head).unwrap();
        assert_eq!(req.framing, Framing::Length(3));
        assert!(req.close);
        let out = String::from_utf8(origin_head(head, &req, "/")).unwrap();
        assert_eq!(
            out,
            "POST / HTTP/1.1\r\nHost: a.test\r\nconnection: close\r\nContent-Length: 3\r\n\r\n"
        );
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        for head in [
            &b"POST http://a.test/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST http://a.test/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            b"POST http://a.test/ HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
            b"POST http://a.test/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
        ] {
            assert!(
                matches!(request(head), Err(WireError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn response_framing_follows_rfc_9112() {
        let r = response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "GET").unwrap();
        assert_eq!(
            (r.status, r.framing, r.close),
            (200, Framing::Length(5), false)
        );
        let r = response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD").unwrap();
        assert_eq!(r.framing, Framing::Empty);
        let r = response(b"HTTP/1.1 304 Not Modified\r\n\r\n", "GET").unwrap();
        assert_eq!((r.framing, r.close), (Framing::Empty, false));
        let r = response(b"HTTP/1.1 200 OK\r\n\r\n", "GET").unwrap();
        assert_eq!((r.framing, r.close), (Framing::UntilClose, true));
        let r = response(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", "GET").unwrap();
        assert!(r.close);
        let r = response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET",
        )
        .unwrap();
        assert_eq!(r.framing, Framing::Chunked);
    }

    #[tokio::test]
    async fn bodies_are_copied_byte_for_byte_and_the_next_head_stays() {
        let wire =
            b"4;ext=1\r\nWiki\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
        let (mut a, b) = tokio::io::duplex(1024);
        a.write_all(&wire).await.unwrap();
        drop(a);
        let mut side = Side::new(b, Duration::from_secs(5));
        let mut out = Vec::new();
        side.copy_body(Framing::Chunked, &mut out).await.unwrap();
        assert_eq!(out, b"4;ext=1\r\nWiki\r\n0\r\nX-T: 1\r\n\r\n");
        let next = side.head().await.unwrap();
        assert_eq!(&next[..], b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(matches!(side.head().await, Err(WireError::Closed)));
    }

    #[tokio::test]
    async fn a_head_without_end_is_bounded() {
        let (mut a, b) = tokio::io::duplex(64 * 1024);
        let writer = tokio::spawn(async move {
            let line = vec![b'a'; 1024];
            while a.write_all(&line).await.is_ok() {}
        });
        let mut side = Side::new(b, Duration::from_secs(5));
        assert!(matches!(side.head().await, Err(WireError::Malformed(_))));
        drop(side);
        writer.await.unwrap();
    }
}
