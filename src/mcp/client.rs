//! A small Streamable HTTP client for the running daemon: `idpool mcp` bridges
//! stdio to it, and `idpool call` calls one tool through it. Replies come as
//! JSON or as an SSE stream of JSON-RPC messages; both are handed on message
//! by message.

use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::auth::Role;
use crate::error::{Error, ErrorKind, Result};

/// The newest protocol version with an `initialize` handshake.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// A connection to the daemon's `/mcp`.
pub struct DaemonClient {
    http: wreq::Client,
    url: String,
    key: Option<String>,
    role_cap: Option<Role>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
}

/// The status of a POST and the messages it carried.
pub struct Reply {
    pub status: u16,
    pub messages: mpsc::UnboundedReceiver<Value>,
}

impl DaemonClient {
    pub fn new(url: &str, key: Option<String>, role_cap: Option<Role>) -> Result<DaemonClient> {
        let http = wreq::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            // A dead peer on a long-lived stream is noticed by TCP.
            .tcp_keepalive(Duration::from_secs(30))
            .build()
            .map_err(|e| {
                Error::new(ErrorKind::Internal, "cannot build the daemon client").with_source(e)
            })?;
        Ok(DaemonClient {
            http,
            url: url.to_string(),
            key,
            role_cap,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
        })
    }

    fn request(&self, method: wreq::Method) -> wreq::RequestBuilder {
        let mut b = self
            .http
            .request(method, self.url.as_str())
            .header("accept", "application/json, text/event-stream");
        if let Some(k) = &self.key {
            b = b.header("authorization", format!("Bearer {k}"));
        }
        if let Some(r) = self.role_cap {
            b = b.header(super::gate::ROLE_CAP_HEADER, r.as_str());
        }
        if let Some(s) = self.session.lock().as_ref() {
            b = b.header("mcp-session-id", s.as_str());
        }
        if let Some(p) = self.protocol.lock().as_ref() {
            b = b.header("mcp-protocol-version", p.as_str());
        }
        b
    }

    /// POST one JSON-RPC message. Messages of the reply arrive on the returned
    /// channel as they come (progress first, the response last).
    pub async fn post(&self, body: &[u8]) -> Result<Reply> {
        let send = self
            .request(wreq::Method::POST)
            .header("content-type", "application/json")
            .body(body.to_vec())
            .send();
        let resp = tokio::time::timeout(RESPONSE_WAIT, send)
            .await
            .map_err(|_| self.timed_out("answer"))?
            .map_err(|e| net(&self.url, e))?;
        let status = resp.status().as_u16();
        if let Some(id) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            *self.session.lock() = Some(id.to_string());
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let (tx, rx) = mpsc::unbounded_channel();
        if is_sse {
            forward_events(resp, tx, Some(STREAM_IDLE));
        } else {
            let bytes = tokio::time::timeout(BODY_READ, resp.bytes())
                .await
                .map_err(|_| self.timed_out("reply body"))?
                .map_err(|e| net(&self.url, e))?;
            if !bytes.is_empty() {
                match serde_json::from_slice::<Value>(&bytes) {
                    Ok(v) => {
                        let _ = tx.send(v);
                    }
                    Err(_) => {
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        let _ = tx.send(json!({"jsonrpc": "2.0", "id": null,
                            "error": {"code": -32603, "message": format!("daemon answered HTTP {status}: {text}")}}));
                    }
                }
            }
        }
        Ok(Reply {
            status,
            messages: rx,
        })
    }

    /// The session id the daemon gave us, if any.
    pub fn session(&self) -> Option<String> {
        self.session.lock().clone()
    }

    /// Forget the session (the daemon dropped it) before a new `initialize`.
    pub fn reset_session(&self) {
        *self.session.lock() = None;
        *self.protocol.lock() = None;
    }

    /// Send `MCP-Protocol-Version: v` from now on (after `initialize`).
    pub fn set_protocol(&self, v: &str) {
        *self.protocol.lock() = Some(v.to_string());
    }

    /// Open the session's GET stream for messages the server starts (list
    /// changes). `None` when the daemon offers none.
    pub async fn listen(&self) -> Result<Option<mpsc::UnboundedReceiver<Value>>> {
        let send = self.request(wreq::Method::GET).send();
        let resp = tokio::time::timeout(BODY_READ, send)
            .await
            .map_err(|_| self.timed_out("event stream"))?
            .map_err(|e| net(&self.url, e))?;
        if !resp.status().is_success() {
            return Ok(None);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        // Open for the session's life: silence is normal here (TCP keepalive
        // notices a dead daemon).
        forward_events(resp, tx, None);
        Ok(Some(rx))
    }

    /// Whether the daemon answers `/healthz` (within 3 s).
    pub async fn reachable(&self) -> Result<()> {
        let base = self.url.trim_end_matches("/mcp");
        let url = format!("{base}/healthz");
        let r = self
            .http
            .get(url.as_str())
            .timeout(Duration::from_secs(3))
            .send()
            .await
            .map_err(|e| net(&self.url, e))?;
        if r.status().is_success() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Network,
                format!("{url} answered HTTP {}", r.status().as_u16()),
            ))
        }
    }

    /// End the session (best effort).
    pub async fn close(&self) {
        if self.session.lock().is_some() {
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                self.request(wreq::Method::DELETE).send(),
            )
            .await;
        }
    }

    /// Send one request and wait for its response, handing notifications
    /// (progress) to `on_note`.
    pub async fn call(
        &self,
        id: u64,
        method: &str,
        params: Value,
        mut on_note: impl FnMut(&Value),
    ) -> Result<Value> {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut reply = self.post(body.to_string().as_bytes()).await?;
        while let Some(m) = reply.messages.recv().await {
            if m.get("id") == Some(&json!(id))
                || (m.get("id") == Some(&Value::Null) && m.get("error").is_some())
            {
                return Ok(m);
            }
            on_note(&m);
        }
        Err(Error::new(
            ErrorKind::Network,
            format!(
                "the daemon at {} answered HTTP {} without a response to `{method}`",
                self.url, reply.status
            ),
        ))
    }

    /// `initialize` + `notifications/initialized`.
    pub async fn initialize(&self) -> Result<Value> {
        let r = self
            .call(
                0,
                "initialize",
                json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                       "clientInfo": {"name": "idpool-cli", "version": env!("CARGO_PKG_VERSION")}}),
                |_| {},
            )
            .await?;
        if let Some(e) = r.get("error") {
            return Err(Error::new(
                ErrorKind::Refused,
                format!(
                    "initialize refused: {}",
                    e["message"].as_str().unwrap_or("")
                ),
            ));
        }
        if let Some(v) = r["result"]["protocolVersion"].as_str() {
            self.set_protocol(v);
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(note.to_string().as_bytes()).await?;
        Ok(r)
    }
}

/// The longest a tool call may take before the daemon answers (a call of
/// many pages through the browser tier takes minutes, not hours).
const RESPONSE_WAIT: Duration = Duration::from_secs(30 * 60);
/// Reading a JSON reply once its headers came.
const BODY_READ: Duration = Duration::from_secs(60);
/// Silence on an event stream: the daemon pings every `server.sse_ping_secs`.
const STREAM_IDLE: Duration = Duration::from_secs(120);

impl DaemonClient {
    fn timed_out(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Timeout,
            format!("the daemon at {} sent no {what} in time", self.url),
        )
    }
}

fn net(url: &str, e: wreq::Error) -> Error {
    let what = if e.is_connect() {
        format!("cannot connect to the daemon at {url} (is `idpool serve` running?)")
    } else {
        format!("talking to the daemon at {url} failed: {e}")
    };
    Error::new(ErrorKind::Network, what).with_source(e)
}

/// Hand each JSON message of an SSE response body to `tx` as it arrives; a
/// stream silent for `idle` is over.
fn forward_events(resp: wreq::Response, tx: mpsc::UnboundedSender<Value>, idle: Option<Duration>) {
    let mut stream = resp.bytes_stream();
    tokio::spawn(async move {
        let mut parser = SseParser::default();
        let idle = idle.unwrap_or(Duration::from_secs(365 * 24 * 3600));
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout(idle, stream.next()).await {
            for data in parser.push(&chunk) {
                if let Ok(v) = serde_json::from_str::<Value>(&data)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        }
    });
}

/// Incremental `text/event-stream` parser: yields each event's joined `data`.
/// Works on bytes, so a UTF-8 character split across chunks stays whole.
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend(chunk.iter().filter(|b| **b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buf.drain(..end + 2).collect();
            let event = String::from_utf8_lossy(&event[..end]).into_owned();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() && !data.iter().all(|d| d.is_empty()) {
                out.push(data.join("\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::SseParser;

    #[test]
    fn sse_parser_handles_split_chunks_and_comments() {
        let mut p = SseParser::default();
        assert!(
            p.push(b": ping\n\nid: 1\nretry: 3000\ndata:\n\nevent: message\ndata: {\"a\"")
                .is_empty()
        );
        assert_eq!(p.push(b":1}\r\n\r\n"), vec!["{\"a\":1}".to_string()]);
        // A character split across two chunks stays whole.
        let text = "data: \u{00e9}t\u{00e9}\n\n".as_bytes();
        assert!(p.push(&text[..7]).is_empty());
        assert_eq!(p.push(&text[7..]), vec!["\u{00e9}t\u{00e9}".to_string()]);
    }
}
