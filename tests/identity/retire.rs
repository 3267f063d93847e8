//! Retirement (issue 15, item 5): a burned identity gets a fresh jar,
//! Chromium profile, proxy session and calibration, by hand or by policy,
//! and keeps its slot number.

use crate::common;

use std::sync::Arc;

use common::proxies::{Seen, basic_user, http_connect_proxy};
use common::{Env, free_base_port, shutdown_and_check};
use idpool::request::FetchRequest;
use parking_lot::Mutex;
use serde_json::json;

/// One slot behind proxy `port` with a `{session}` user name, plus `extra`
/// lines in `[pool]`.
fn config(env: &Env, port: u16, extra: &str) {
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port");
    env.write(
        "idpool.toml",
        &format!(
            "[server]\nlisten = \"{listen}\"\n\n[pool]\nsize = 1\nbase_port = {}\ndata_dir = \"data\"\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n\
             proxies = [\"http://u-{{slot}}-{{session}}:pw@127.0.0.1:{port}\"]\n{extra}\n\
             [security]\nallow_private_networks = true\nextra_root_certs = [\"testbed/ca.pem\"]\n",
            free_base_port(1)
        ),
    );
}

fn cookie_sent(env: &Env, path: &str) -> Option<String> {
    env.testbed
        .log()
        .into_iter()
        .find(|e| e.path == path)
        .expect("logged")
        .cookie
}

#[tokio::test]
async fn retire_slot_gives_a_fresh_identity() {
    let env = Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = http_connect_proxy(seen.clone()).await;
    config(&env, port, "");
    let pool = env.pool();
    let slot = pool.leases().slots_for_tests()[0].clone();
    let old = slot.identity();
    slot.jar().insert_set_cookie("old=1; Path=/", &env.url("/"));
    pool.fetch(FetchRequest::get(env.url("/product/B0RET?before")), Some(0))
        .await
        .expect("before");
    assert!(cookie_sent(&env, "/product/B0RET?before").is_some_and(|c| c.contains("old=1")));
    pool.browse(env.url("/product/B0RET?browser"), None, Some(0))
        .await
        .expect("browser");
    slot.calibration_settled().await;
    assert_eq!(slot.calibration_status().state, "calibrated");
    let dir = env.path("data/slots/0");
    std::fs::write(dir.join("chromium/idpool-marker"), b"old profile").expect("marker");
    let users_before: Vec<String> = seen.lock().auth.iter().map(|a| basic_user(a)).collect();
    assert!(
        users_before
            .iter()
            .all(|u| *u == format!("u-0-{}", old.session))
    );

    let r = idpool::tools::retire_slot::run(pool.leases(), json!({"slot": 0}))
        .await
        .expect("retired");
    assert_eq!(r["generation"], 1, "{r}");
    assert_eq!(r["old_generation"], 0, "{r}");
    let new = slot.identity();
    assert_ne!(new.session, old.session);
    assert_eq!(r["session"], new.session);
    assert!(!slot.browser_facts().running, "the browser was closed");
    assert!(dir.join("retired/0/chromium/idpool-marker").is_file());
    assert!(dir.join("retired/0/cookies.json").is_file());
    assert!(
        !dir.join("chromium/idpool-marker").exists(),
        "a new profile dir"
    );
    assert_eq!(
        slot.calibration_status().state,
        "pending",
        "recalibrated at next launch"
    );

    let before = seen.lock().auth.len();
    pool.fetch(FetchRequest::get(env.url("/product/B0RET?after")), Some(0))
        .await
        .expect("after");
    assert!(
        !cookie_sent(&env, "/product/B0RET?after").is_some_and(|c| c.contains("old=1")),
        "the old cookie is not sent"
    );
    pool.browse(env.url("/product/B0RET?browser2"), None, Some(0))
        .await
        .expect("browser again");
    slot.calibration_settled().await;
    let users: Vec<String> = seen.lock().auth[before..]
        .iter()
        .map(|a| basic_user(a))
        .collect();
    assert!(!users.is_empty());
    assert!(
        users.iter().all(|u| *u == format!("u-0-{}", new.session)),
        "the proxy sees the new session on both tiers: {users:?}"
    );
    let cal = slot.calibration_status();
    assert_eq!((cal.state, cal.runs), ("calibrated", 2), "{cal:?}");
    assert!(
        pool.events()
            .recent()
            .iter()
            .any(|e| e.kind == "slot_retired")
    );
    shutdown_and_check(&pool).await;
    drop(pool);

    // From the command line, without a daemon.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("idpool.toml"))
        .args(["retire", "--slot", "0", "--json"])
        .output()
        .await
        .expect("idpool retire");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["generation"], 2, "{v}");
    assert!(!text.contains(":pw@"), "{text}");
}

/// `pool.retire.after_hard_blocks = 2`: the second hard block on one
/// strategy retires the identity by itself.
#[tokio::test]
async fn two_hard_blocks_retire_the_identity() {
    let env = Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = http_connect_proxy(seen.clone()).await;
    config(
        &env,
        port,
        "[pool.retire]\nafter_hard_blocks = 2\nretired_keep = 1",
    );
    let pool = env.pool();
    let slot = pool.leases().slots_for_tests()[0].clone();
    let first = slot.identity();
    for n in 0..2 {
        let f = pool
            .fetch(
                FetchRequest::get(env.url(&format!("/ap/signin?n={n}"))),
                Some(0),
            )
            .await
            .expect("answered");
        assert_eq!(f.outcome, idpool::strategy::Outcome::HardBlock);
        if n == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            assert_eq!(slot.identity(), first, "one block is not enough");
        }
    }
    for _ in 0..50 {
        if slot.identity().generation == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(slot.identity().generation, 1, "retired by policy");
    let ev = pool
        .events()
        .recent()
        .into_iter()
        .find(|e| e.kind == "slot_retired")
        .expect("event");
    assert_eq!(ev.detail["reason"], "hard_blocks");
    shutdown_and_check(&pool).await;
}

/// A retirement by policy in the daemon leaves an audit line of its own
/// (the daemon's `retire_slot`), besides the event.
#[tokio::test]
async fn the_daemon_audits_a_retirement_by_policy() {
    use common::daemon::{Daemon, Mcp};
    let env = Env::new(1).await;
    let d = Daemon::start_with(&env, 1, "", "[pool.retire]\nafter_hard_blocks = 1\n", &[]).await;
    let mut mcp = Mcp::new(&d, None);
    mcp.initialize().await;
    let r = mcp
        .tool(
            2,
            "scrape",
            json!({"url": env.url("/ap/signin?daemon").as_str(), "mode": "http"}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let audit = env.path("data/audit.log");
    let mut line = None;
    for _ in 0..100 {
        line = std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("\"transport\":\"policy\""))
            .map(str::to_string);
        if line.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let line = line.expect("an audit line for the automatic retirement");
    let v: serde_json::Value = serde_json::from_str(&line).expect("json line");
    assert_eq!(v["tool"], "retire_slot");
    assert_eq!(v["args"]["reason"], "hard_blocks");
    assert_eq!(v["slot"], 0);
    d.stop().await;
}
