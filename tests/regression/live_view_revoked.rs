//! Finding 9: an open live view outlived its key. After `idpool keys revoke`
//! and SIGHUP the WebSocket kept streaming frames and took input. Now it
//! closes with a policy-violation frame (1008) within seconds, and nothing
//! sent on it after the revocation reaches the page.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::common::daemon::{Daemon, add_key, idpool};
use crate::common::shop;

/// The inputs the login session counted, read with `key`.
async fn inputs(d: &Daemon, id: &str, key: &str) -> u64 {
    let v: Value = reqwest::Client::new()
        .get(d.url(&format!("/api/v1/live/{id}")))
        .bearer_auth(key)
        .send()
        .await
        .expect("GET live")
        .json()
        .await
        .expect("json");
    v["status"]["inputs"].as_u64().unwrap_or(u64::MAX)
}

#[tokio::test]
async fn an_open_live_view_closes_when_its_key_is_revoked() {
    let env = shop(2).await;
    let root = add_key(&env, "root", "admin").await;
    // A second admin reads the session's status after `root` is gone.
    let other = add_key(&env, "other", "admin").await;
    let d = Daemon::start(&env, 2, "").await;
    let http = reqwest::Client::new();
    let started: Value = http
        .post(d.url("/api/v1/slots/1/login"))
        .bearer_auth(&root)
        .json(&json!({"strategy": "testshop", "timeout_secs": 300, "idle_secs": 300}))
        .send()
        .await
        .expect("POST login")
        .json()
        .await
        .expect("json");
    let id = started["id"].as_str().expect("a session id").to_string();
    let ws_url = d
        .url(&format!("/api/v1/live/{id}/ws?key={root}"))
        .replace("http:", "ws:");
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
        .await
        .expect("the live view opens");
    let framed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m
                && serde_json::from_str::<Value>(&t).is_ok_and(|v| v["type"] == "frame")
            {
                return;
            }
        }
    })
    .await;
    assert!(framed.is_ok(), "no screencast frame arrived");

    // Before the revocation, input is applied.
    ws.send(Message::Text(
        json!({"type": "key", "key": "Tab"}).to_string().into(),
    ))
    .await
    .expect("send");
    let t0 = Instant::now();
    while inputs(&d, &id, &other).await < 1 && t0.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        inputs(&d, &id, &other).await,
        1,
        "the first input was not counted"
    );

    let out = idpool(&env)
        .args(["keys", "revoke", "root"])
        .output()
        .await
        .expect("keys revoke runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.reload().await;
    let revoked = Instant::now();

    // Input sent after the revocation is not applied, and the socket ends
    // with a policy-violation close within a bounded wait.
    let mut close = None;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        for key in ["Tab", "Tab", "a", "b", "Enter"] {
            let input = json!({"type": "key", "key": key}).to_string();
            if ws.send(Message::Text(input.into())).await.is_err() {
                break;
            }
        }
        while let Some(m) = ws.next().await {
            match m {
                Ok(Message::Close(f)) => {
                    close = f.map(|f| f.code);
                    return;
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the live view of a revoked key still streams {:?} after the reload",
        revoked.elapsed()
    );
    assert_eq!(
        close,
        Some(CloseCode::Policy),
        "not a policy-violation close"
    );
    // The session's status is published on its own ticks: give it two.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        inputs(&d, &id, &other).await,
        1,
        "input sent after the revocation reached the page"
    );
    // The revoked key opens no new view either.
    let again = tokio_tungstenite::connect_async(ws_url.as_str()).await;
    assert!(again.is_err(), "a revoked key opened the live view");
    let _ = http
        .delete(d.url(&format!("/api/v1/live/{id}")))
        .bearer_auth(&other)
        .send()
        .await;
    d.stop().await;
}
