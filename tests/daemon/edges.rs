//! The daemon's edges under clients that misbehave: silent and half-sent
//! connections are closed within `server.header_timeout_secs` while others are
//! served, and sessions that are never deleted stay within
//! `server.max_sessions_per_key` / `server.max_sessions`.

use crate::common;

use std::time::{Duration, Instant};

use common::daemon::{Daemon, Mcp, add_key};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The daemon's resident memory (VmRSS), in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Descriptors the daemon has open.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("proc fd")
        .count()
}

#[tokio::test]
async fn silent_and_half_sent_connections_are_closed_within_the_header_timeout() {
    // The same raise the daemon does, for the connections this test opens.
    idpool::daemon::listener::raise_file_limit();
    let env = common::Env::new(1).await;
    let d = Daemon::start(&env, 1, "header_timeout_secs = 3\n").await;
    let pid = d.child.id().expect("pid");
    let before = fds(pid);
    let addr = format!("127.0.0.1:{}", d.port);
    let opened = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..2000 {
        silent.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    let mut half = TcpStream::connect(&addr).await.expect("connect");
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow:")
        .await
        .expect("half a header");
    // A normal client is served meanwhile.
    let http = reqwest::Client::new();
    let r = http
        .get(d.url("/healthz"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .expect("a normal client is served while 2,000 connections sit silent");
    assert!(r.status().is_success());
    let mut accepted = 0;
    for _ in 0..40 {
        accepted = fds(pid).saturating_sub(before);
        if accepted >= 2000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        accepted >= 2000,
        "the daemon accepted {accepted} of the silent connections"
    );
    // Every silent connection is closed by the daemon (EOF or reset) within
    // the header timeout and a margin.
    let deadline = opened + Duration::from_secs(3 + 5);
    silent.push(half);
    let mut closed = 0;
    for mut c in silent {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut buf = [0u8; 64];
        match tokio::time::timeout(left, c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => closed += 1,
            Ok(Ok(_)) => closed += 1, // a 408 before closing counts too
            Err(_) => {}
        }
    }
    assert_eq!(
        closed, 2001,
        "silent connections still open past the header timeout"
    );
    assert!(
        fds(pid) < before + 50,
        "the daemon still holds the descriptors: {} (before {before})",
        fds(pid)
    );
    d.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_wait_instead_of_using_up_descriptors() {
    let env = common::Env::new(1).await;
    let d = Daemon::start(&env, 1, "header_timeout_secs = 2\nmax_connections = 64\n").await;
    let pid = d.child.id().expect("pid");
    let before = fds(pid);
    let addr = format!("127.0.0.1:{}", d.port);
    let mut silent = Vec::new();
    for _ in 0..300 {
        silent.push(
            TcpStream::connect(&addr)
                .await
                .expect("connect (the backlog holds it)"),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = fds(pid) - before;
    // The cap, plus the few connections kept for health checks past it.
    let reserve = idpool::daemon::listener::HEALTH_RESERVE;
    assert!(
        held <= 64 + reserve + 2,
        "the daemon holds {held} connections with max_connections = 64 (+{reserve} for health)"
    );
    // Served once the silent ones time out.
    let r = reqwest::Client::new()
        .get(d.url("/healthz"))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("served after the silent connections timed out");
    assert!(r.status().is_success());
    drop(silent);
    d.stop().await;
}

#[tokio::test]
async fn ten_thousand_sessions_never_deleted_stay_within_the_bounds() {
    let env = common::Env::new(1).await;
    let calm = add_key(&env, "calm", "operator").await;
    let flood = add_key(&env, "flood", "operator").await;
    let d = Daemon::start(
        &env,
        1,
        "max_sessions_per_key = 200\nmax_sessions = 300\nanonymous_role = \"viewer\"\n",
    )
    .await;
    let pid = d.child.id().expect("pid");
    let mut calm_client = Mcp::new(&d, Some(&calm));
    assert!(calm_client.initialize().await.status.is_success());
    let mut first_flood = Mcp::new(&d, Some(&flood));
    assert!(first_flood.initialize().await.status.is_success());
    // Warm up (allocator arenas, the first sessions), then measure.
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}});
    let open = |n: usize| {
        let http = http.clone();
        let url = d.url("/mcp");
        let flood = flood.clone();
        let init = init.clone();
        async move {
            for _ in 0..n {
                let r = http
                    .post(&url)
                    .bearer_auth(&flood)
                    .header("accept", "application/json, text/event-stream")
                    .header("content-type", "application/json")
                    .body(init.to_string())
                    .send()
                    .await
                    .expect("initialize");
                assert!(r.status().is_success(), "initialize: {}", r.status());
                r.bytes().await.expect("body");
            }
        }
    };
    // What an idle session holds: 190 of them, all kept (under the bound).
    open(10).await;
    let before = rss_kib(pid);
    open(190).await;
    let per_session = (rss_kib(pid).saturating_sub(before)) * 1024 / 190;
    eprintln!("an idle Streamable HTTP session holds about {per_session} bytes");
    assert!(per_session < 128 * 1024, "{per_session} bytes a session");
    open(300).await;
    let warm = rss_kib(pid);
    let started = Instant::now();
    let workers: Vec<_> = (0..4).map(|_| tokio::spawn(open(2500))).collect();
    for w in workers {
        w.await.expect("flood worker");
    }
    let flood_secs = started.elapsed().as_secs_f64();
    let after = rss_kib(pid);
    eprintln!(
        "10,000 sessions in {flood_secs:.1}s; RSS {warm} KiB after warm-up, {after} KiB after"
    );
    // The calm key's session was never touched, and works; what rmcp holds
    // is within the bound. (Issue 57's CI: a session bound while another
    // request read rmcp's list lost its binding, so no bound could end it;
    // a flood left hundreds, and RSS grew 40-50 MB.)
    let r = calm_client.tool(2, "pool_status", json!({})).await;
    let sessions = &r["result"]["structuredContent"]["server"]["sessions"];
    assert!(
        sessions["http"].as_u64().expect("http") <= 300,
        "{sessions}"
    );
    assert!(
        sessions["evicted"].as_u64().expect("evicted") >= 10_000 - 200,
        "{sessions}"
    );
    // The bound: 300 sessions' worth of growth at most over the warm daemon
    // (measured ≈65 KB a session before the bounds); 32 MiB covers it.
    assert!(
        after < warm + 32 * 1024,
        "RSS grew from {warm} KiB to {after} KiB over 10,000 sessions"
    );
    // The flood's first session was ended: 404, initialize again.
    let a = first_flood
        .post(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        .await;
    assert_eq!(a.status.as_u16(), 404, "an evicted session answers 404");
    let mut again = Mcp::new(&d, Some(&flood));
    assert!(again.initialize().await.status.is_success());
    drop(first_flood);
    let metrics = d.get_text("/metrics", Some(&calm)).await;
    assert!(
        metrics.contains("idpool_mcp_sessions_evicted_total"),
        "{metrics}"
    );
    d.stop().await;
}
