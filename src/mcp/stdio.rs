//! `idpool mcp`: MCP on stdin/stdout. By default a bridge to the running daemon
//! (every agent shares one pool); `--embedded` serves an in-process pool.
//! stdout carries protocol only; logs go to stderr.

use std::sync::Arc;

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
    let client = Arc::new(client);
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(v) = out_rx.recv().await {
            let mut line = v.to_string();
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut listening = false;
    let mut tasks = tokio::task::JoinSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Option<Value> = serde_json::from_str(&line).ok();
        let is_initialize = parsed.as_ref().is_some_and(|v| v["method"] == "initialize");
        if is_initialize {
            // The session id comes with this answer: wait for it before the rest.
            forward(&client, line.as_bytes(), &out_tx, true).await;
            continue;
        }
        if !listening
            && parsed
                .as_ref()
                .is_some_and(|v| v["method"] == "notifications/initialized")
        {
            listening = true;
            forward(&client, line.as_bytes(), &out_tx, false).await;
            if let Ok(Some(mut rx)) = client.listen().await {
                let tx = out_tx.clone();
                tasks.spawn(async move {
                    while let Some(v) = rx.recv().await {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                });
            }
            continue;
        }
        let client = client.clone();
        let tx = out_tx.clone();
        tasks.spawn(async move {
            forward(&client, line.as_bytes(), &tx, false).await;
        });
    }
    client.close().await;
    tasks.abort_all();
    drop(out_tx);
    let _ = writer.await;
    Ok(())
}

async fn forward(
    client: &DaemonClient,
    body: &[u8],
    out: &mpsc::UnboundedSender<Value>,
    initialize: bool,
) {
    match client.post(body).await {
        Ok(mut reply) => {
            let mut notified = false;
            while let Some(v) = reply.messages.recv().await {
                if initialize && let Some(p) = v["result"]["protocolVersion"].as_str() {
                    client.set_protocol(p);
                }
                let is_response = v.get("id").is_some() && v.get("method").is_none();
                if is_response && notified {
                    // Keep the response out of the notifications' read: clients
                    // that dispatch notifications a tick later (the TypeScript
                    // SDK) would otherwise drop progress that arrived with it.
                    tokio::time::sleep(super::server::PROGRESS_GAP).await;
                }
                notified |= !is_response;
                let _ = out.send(v);
            }
        }
        Err(e) => {
            tracing::error!("{e}");
            let id = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("id").cloned());
            if let Some(id) = id {
                let _ = out.send(serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32603, "message": e.to_string()}}));
            }
        }
    }
}
