//! One request as its client sent it, found in a connection's bytes.

use super::{h1, h2};
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
        h2_view(&h2::parse(bytes), method, path)
    } else {
        h1_view(bytes, method, path)
    }
}

/// `method path` as it was sent on an HTTP/2 connection (the latest such).
pub fn h2_view(conn: &h2::Connection, method: &str, path: &str) -> Option<RequestView> {
    conn.requests
        .iter()
        .rev()
        .find(|r| r.pseudo(":method") == Some(method) && r.pseudo(":path") == Some(path))
        .map(|r| RequestView {
            protocol: "h2",
            headers: r.headers.clone(),
            lines: Vec::new(),
            akamai: Some(conn.akamai()),
            priority: r.priority.map(|p| p.to_string()),
        })
}

/// `method path` as it was sent on an HTTP/1.1 connection (the latest such).
fn h1_view(bytes: &[u8], method: &str, path: &str) -> Option<RequestView> {
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
