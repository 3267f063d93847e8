//! What a client's HTTP looks like on the wire, beyond TLS: the HTTP/2
//! connection preface (SETTINGS, WINDOW_UPDATE, PRIORITY frames), each
//! request's HEADERS priority, and every request's header list in the order
//! the client sent it (HTTP/2 via HPACK, HTTP/1.1 from the request head).
//!
//! `tls` parses ClientHellos (JA4 and its parts); `hello` reads one off a
//! fresh connection before the TLS server sees it.
//!
//! `Tap` copies the first bytes a server reads from a (decrypted) connection;
//! [`request_view`] finds one request in them. The testbed logs it; identity
//! calibration compares a slot's browser and HTTP tier with it.

pub mod calibration;
pub mod h1;
pub mod h2;
pub mod hello;
pub mod residual;
mod tap;
pub mod tls;

pub use calibration::{
    ASK_ALL, Asked, Calibration, Capture, H1Names, NavigationProfile, Observed, RequestProfile,
    merge_order,
};
pub use residual::Report;
pub use tap::{Tap, TapBuf};

use serde::Serialize;

/// One request as its client sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestView {
    /// `h2` or `http/1.1`.
    pub protocol: &'static str,
    /// Header names (lower case for HTTP/2, as sent for HTTP/1.1) and values,
    /// in order; HTTP/2 pseudo-headers included.
    pub headers: Vec<(String, String)>,
    /// HTTP/1.1: the head's lines exactly as sent, request line first
    /// (empty for HTTP/2).
    pub lines: Vec<String>,
    /// The connection's Akamai HTTP/2 fingerprint
    /// (`SETTINGS|WINDOW_UPDATE|PRIORITY|pseudo-header order`).
    pub akamai: Option<String>,
    /// This request's HEADERS priority: `weight:exclusive:depends_on`
    /// (weight 1–256), when the frame carried one.
    pub priority: Option<String>,
}

/// The request `method path` (path with query) in the bytes a connection sent
/// so far; the latest match when the client asked for it more than once.
pub fn request_view(bytes: &[u8], method: &str, path: &str) -> Option<RequestView> {
    if bytes.starts_with(h2::PREFACE) {
        let conn = h2::parse(bytes);
        let akamai = conn.akamai();
        conn.requests
            .iter()
            .rev()
            .find(|r| r.pseudo(":method") == Some(method) && r.pseudo(":path") == Some(path))
            .map(|r| RequestView {
                protocol: "h2",
                headers: r.headers.clone(),
                lines: Vec::new(),
                akamai: Some(akamai.clone()),
                priority: r.priority.map(|p| p.to_string()),
            })
    } else {
        h1::parse(bytes)
            .into_iter()
            .rev()
            .find(|r| r.method == method && r.target == path)
            .map(|r| RequestView {
                protocol: "http/1.1",
                headers: r.headers,
                lines: r.lines,
                akamai: None,
                priority: None,
            })
    }
}
