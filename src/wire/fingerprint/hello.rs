//! Reading a TLS ClientHello off a fresh connection before the handshake,
//! and handing the bytes back to the TLS server afterwards.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::tls::{self, ClientHello};

const MAX_HELLO: usize = 64 * 1024;

/// Read TLS records until the whole ClientHello handshake message is in; return the
/// raw bytes read (to replay) and the parsed hello.
pub async fn read_client_hello(
    stream: &mut TcpStream,
) -> io::Result<(Vec<u8>, Option<ClientHello>)> {
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
                return Ok((raw, tls::parse_client_hello(&handshake[4..need])));
            }
        }
        if raw.len() > MAX_HELLO {
            return Ok((raw, None));
        }
    }
}

/// A stream that first yields bytes already read from it.
pub struct Replay<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S> Replay<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Replay {
            prefix,
            pos: 0,
            inner,
        }
    }
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
