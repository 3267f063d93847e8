//! Finding 3: a slow body froze the control API without a key. With
//! `server.max_connections = 64`, 70 `POST /api/v1/slots/0/reset` announcing
//! a megabyte and sending a byte every 4 s held every connection, and
//! `/healthz` timed out for as long as they liked: the body was read before
//! the key was checked, with no deadline.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::daemon::{Daemon, Mcp, add_key};
use crate::common::shop;

/// Open a POST that announces a megabyte, send its head and one byte.
async fn slow_post(port: u16, path: &str, key: Option<&str>) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let auth = key
        .map(|k| format!("authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n{auth}content-length: 1000000\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).await.expect("write head");
    s
}

/// The status line the server answered on `s`, if it answered within `wait`.
async fn answered(s: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut buf = vec![0u8; 512];
    match tokio::time::timeout(wait, s.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
        ),
        _ => None,
    }
}

async fn health_within(d: &Daemon, secs: u64) -> bool {
    let r = reqwest::Client::new()
        .get(d.url("/healthz"))
        .timeout(Duration::from_secs(secs))
        .send()
        .await;
    r.is_ok_and(|r| r.status().is_success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_slow_bodies_leave_healthz_and_mcp_answering() {
    let env = shop(1).await;
    let admin = add_key(&env, "root", "admin").await;
    let d = Daemon::start(&env, 1, "max_connections = 64\nbody_timeout_secs = 3\n").await;

    // Without a key: refused from the headers, before any of the body.
    let mut open = Vec::new();
    for _ in 0..70 {
        open.push(slow_post(d.port, "/api/v1/slots/0/reset", None).await);
    }
    // Every one is answered at once: 401 from the headers, or 503 from the
    // health reserve for those that arrived while the others still held
    // their connections for the instant before their answer.
    let mut refused = 0;
    for s in &mut open {
        match answered(s, Duration::from_secs(5)).await.as_deref() {
            Some(l) if l.contains(" 401 ") => refused += 1,
            Some(l) if l.contains(" 503 ") => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(refused >= 62, "{refused} of 70 refused for their key");
    assert!(health_within(&d, 3).await);
    let mut mcp = Mcp::new(&d, Some(&admin));
    let init = mcp.initialize().await;
    assert!(init.status.is_success(), "{}", init.status);
    drop(open);

    // Every route that takes a body does the same.
    for path in [
        "/api/v1/tools/scrape",
        "/api/v1/slots/0/login",
        "/api/v1/fleet/call/scrape",
    ] {
        let mut s = slow_post(d.port, path, None).await;
        let line = answered(&mut s, Duration::from_secs(5)).await;
        assert!(
            line.as_deref()
                .is_some_and(|l| l.contains(" 401 ") || l.contains(" 404 ")),
            "{path}: {line:?}"
        );
    }

    // With a key: each body has `body_timeout_secs`; while 70 of them hold
    // every connection, /healthz is answered from its own reserve.
    let started = Instant::now();
    let mut open = Vec::new();
    for _ in 0..70 {
        open.push(slow_post(d.port, "/api/v1/slots/0/reset", Some(&admin)).await);
    }
    assert!(
        health_within(&d, 2).await,
        "healthz with every connection held"
    );
    // The 64 that got a connection are cut at the body deadline (408);
    // the 6 past the cap landed on the health reserve, which refuses
    // anything but health checks at once (503).
    let (mut cut, mut busy) = (0, 0);
    for s in &mut open {
        match answered(s, Duration::from_secs(15)).await.as_deref() {
            Some(l) if l.contains(" 408 ") => cut += 1,
            Some(l) if l.contains(" 503 ") => busy += 1,
            other => panic!("{other:?}"),
        }
    }
    // (The MCP client's idle keep-alive connection holds one of the 64.)
    assert_eq!(cut + busy, 70);
    assert!(busy <= 8 && cut >= 62, "{cut} cut, {busy} busy");
    assert!(started.elapsed() < Duration::from_secs(20));
    drop(open);
    let again = mcp
        .call(
            1,
            "tools/call",
            json!({"name": "pool_status", "arguments": {}}),
        )
        .await;
    assert!(again["result"].is_object(), "{again}");
    let log = d.log_text();
    assert!(!log.contains(&admin), "the key reached the log");
    d.stop().await;
}

/// An HTTP/2 client that opens a connection, answers every PING and asks
/// for nothing.
async fn idle_h2(port: u16) -> tokio::task::JoinHandle<Duration> {
    tokio::spawn(async move {
        let started = Instant::now();
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)).await else {
            return Duration::ZERO;
        };
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // SETTINGS
        if s.write_all(&hello).await.is_err() {
            return started.elapsed();
        }
        let mut head = [0u8; 9];
        loop {
            if s.read_exact(&mut head).await.is_err() {
                return started.elapsed();
            }
            let len =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            if s.read_exact(&mut payload).await.is_err() {
                return started.elapsed();
            }
            let reply = match (head[3], head[4]) {
                (4, 0) => vec![0, 0, 0, 4, 1, 0, 0, 0, 0], // SETTINGS ack
                (6, 0) => {
                    let mut r = vec![0, 0, 8, 6, 1, 0, 0, 0, 0]; // PING ack
                    r.extend_from_slice(&payload);
                    r
                }
                (7, _) => return started.elapsed(), // GOAWAY
                _ => continue,
            };
            if s.write_all(&reply).await.is_err() {
                return started.elapsed();
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_idle_http2_connections_are_closed_and_healthz_answers_meanwhile() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "max_connections = 64\nheader_timeout_secs = 2\n").await;
    let mut idle = Vec::new();
    for _ in 0..70 {
        idle.push(idle_h2(d.port).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        health_within(&d, 2).await,
        "healthz behind 70 idle connections"
    );
    for h in idle {
        let lived = tokio::time::timeout(Duration::from_secs(20), h)
            .await
            .expect("the idle connection is closed")
            .expect("task");
        assert!(lived < Duration::from_secs(15), "{lived:?}");
    }
    assert!(health_within(&d, 2).await);
    d.stop().await;
}
