//! `idpool mcp`: MCP on stdin/stdout. By default a bridge to the running daemon
//! (every agent shares one pool); `--embedded` serves an in-process pool.
//! stdout carries protocol only; logs go to stderr.

use std::sync::Arc;

use parking_lot::Mutex;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::client::DaemonClient;
use super::dispatch::Core;
use super::server::McpServer;
use crate::auth::{Principal, Role};
use crate::error::{Error, ErrorKind, Result};

/// Serve `core` on stdio as `role`.
pub async fn serve_embedded(core: Arc<Core>, role: Role) -> Result<()> {
    let server = McpServer::new(core, Principal::new("stdio", role, "stdio"), None);
    let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| {
        Error::new(
            ErrorKind::Network,
            format!("MCP on stdio did not start: {e}"),
        )
    })?;
    let _ = running.waiting().await;
    Ok(())
}

/// Bridge stdio to the daemon behind `client` until stdin closes.
pub async fn bridge(client: DaemonClient) -> Result<()> {
    client.reachable().await?;
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(v) = out_rx.recv().await {
            let mut line = serde_json::to_vec(&v).unwrap_or_default();
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let bridge = Arc::new(Bridge {
        client,
        out: out_tx,
        init: Mutex::new(None),
        listener: Mutex::new(None),
        resync: tokio::sync::Mutex::new(()),
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut tasks = tokio::task::JoinSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        while tasks.try_join_next().is_some() {}
        if line.trim().is_empty() {
            continue;
        }
        let method = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["method"].as_str().map(str::to_string));
        match method.as_deref() {
            Some("initialize") => {
                // The session id comes with this answer: wait for it before the rest.
                *bridge.init.lock() = Some(line.clone().into_bytes());
                bridge.forward(line.as_bytes(), true).await;
            }
            Some("notifications/initialized") => {
                bridge.forward(line.as_bytes(), false).await;
                bridge.open_listener().await;
            }
            _ => {
                let b = bridge.clone();
                tasks.spawn(async move { b.forward(line.as_bytes(), false).await });
            }
        }
    }
    bridge.client.close().await;
    tasks.abort_all();
    if let Some(h) = bridge.listener.lock().take() {
        h.abort();
    }
    drop(bridge);
    let _ = writer.await;
    Ok(())
}

/// The bridge's state: the daemon client, stdout, and what it takes to open
/// the session again when the daemon forgot it (idle expiry, restart).
struct Bridge {
    client: DaemonClient,
    out: mpsc::UnboundedSender<Value>,
    /// The client's `initialize`, replayed to resume a lost session.
    init: Mutex<Option<Vec<u8>>>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
    resync: tokio::sync::Mutex<()>,
}

impl Bridge {
    /// Follow the session's GET stream (server-initiated messages).
    async fn open_listener(&self) {
        if let Ok(Some(mut rx)) = self.client.listen().await {
            let tx = self.out.clone();
            let h = tokio::spawn(async move {
                while let Some(v) = rx.recv().await {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            });
            if let Some(old) = self.listener.lock().replace(h) {
                old.abort();
            }
        }
    }

    /// The daemon no longer knows our session: open a new one by replaying
    /// the client's handshake (its answers are not the client's to see).
    async fn resume(&self, lost: Option<String>) -> bool {
        let _one = self.resync.lock().await;
        if self.client.session() != lost {
            return true; // another request resumed it meanwhile
        }
        let Some(init) = self.init.lock().clone() else {
            return false;
        };
        self.client.reset_session();
        let Ok(mut reply) = self.client.post(&init).await else {
            return false;
        };
        while let Some(v) = reply.messages.recv().await {
            if let Some(p) = v["result"]["protocolVersion"].as_str() {
                self.client.set_protocol(p);
            }
        }
        if self.client.session().is_none() {
            return false;
        }
        let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        if self.client.post(note.to_string().as_bytes()).await.is_err() {
            return false;
        }
        self.open_listener().await;
        tracing::info!("the daemon had dropped our MCP session; resumed with a new one");
        true
    }

    async fn forward(&self, body: &[u8], initialize: bool) {
        let id = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("id").cloned());
        let session = self.client.session();
        let mut reply = self.client.post(body).await;
        if let Ok(r) = &reply
            && r.status == 404
            && !initialize
            && session.is_some()
            && self.resume(session).await
        {
            reply = self.client.post(body).await;
        }
        match reply {
            Ok(mut reply) => {
                let mut notified = false;
                while let Some(mut v) = reply.messages.recv().await {
                    if initialize && let Some(p) = v["result"]["protocolVersion"].as_str() {
                        self.client.set_protocol(p);
                    }
                    // An HTTP-level refusal carries `id: null`: give it the
                    // request's id so the client can match it.
                    if v.get("error").is_some()
                        && v.get("id").is_none_or(Value::is_null)
                        && let Some(id) = &id
                    {
                        v["id"] = id.clone();
                    }
                    let is_response = v.get("id").is_some() && v.get("method").is_none();
                    if is_response && notified {
                        // Keep the response out of the notifications' read: clients
                        // that dispatch notifications a tick later (the TypeScript
                        // SDK) would otherwise drop progress that arrived with it.
                        tokio::time::sleep(super::server::PROGRESS_GAP).await;
                    }
                    notified |= !is_response;
                    let _ = self.out.send(v);
                }
            }
            Err(e) => {
                tracing::error!("{e}");
                if let Some(id) = id {
                    let _ = self.out.send(serde_json::json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32603, "message": e.to_string()}}));
                }
            }
        }
    }
}
