//! A stream wrapper that keeps a copy of the first bytes read through it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The bytes a tapped connection has read so far (up to its cap).
#[derive(Default)]
pub struct TapBuf {
    bytes: Mutex<Vec<u8>>,
    cap: usize,
    /// An HTTP/2 connection's frames read so far (each request's view
    /// reads only the frames that came since the last one).
    h2: Mutex<Option<super::h2::Parser>>,
}

impl std::fmt::Debug for TapBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapBuf")
            .field("len", &self.bytes.lock().len())
            .field("cap", &self.cap)
            .finish()
    }
}

impl TapBuf {
    pub fn new(cap: usize) -> Arc<TapBuf> {
        Arc::new(TapBuf {
            bytes: Mutex::new(Vec::new()),
            cap,
            h2: Mutex::new(None),
        })
    }

    /// The request `method path` as this connection sent it (the latest
    /// match), like [`super::request_view`] over [`TapBuf::snapshot`], but
    /// an HTTP/2 connection's frames are decoded once, not per request.
    pub fn request_view(&self, method: &str, path: &str) -> Option<super::view::RequestView> {
        let bytes = self.bytes.lock();
        if !bytes.starts_with(super::h2::PREFACE) {
            let copy = bytes.clone();
            drop(bytes);
            return super::view::request_view(&copy, method, path);
        }
        let mut h2 = self.h2.lock();
        let p = h2.get_or_insert_with(Default::default);
        p.feed(&bytes);
        drop(bytes);
        super::view::h2_view(&p.conn, method, path)
    }

    /// A copy of what was read so far.
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }

    fn push(&self, data: &[u8]) {
        let mut b = self.bytes.lock();
        let room = self.cap.saturating_sub(b.len());
        b.extend_from_slice(&data[..data.len().min(room)]);
    }
}

/// `inner`, with everything read from it copied into `buf` (up to its cap).
pub struct Tap<S> {
    pub inner: S,
    pub buf: Arc<TapBuf>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = out.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, out);
        if let Poll::Ready(Ok(())) = &r {
            let new = &out.filled()[before..];
            if !new.is_empty() {
                self.buf.push(new);
            }
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
