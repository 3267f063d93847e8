//! A SIGKILLed fleet daemon's Chromium (issue 36): the browsers of its own
//! slots and of a spare holding an adopted identity outlive it, and do not
//! outlive its next start, or `idpool doctor` run in between.

use crate::common;

use std::time::Duration;

use common::daemon::Daemon;
use common::fleet::{Redis, held, node, rest, within};
use common::{chromium_browsers_under, shop};
use serde_json::json;

/// Browser scrapes on `d` at once, so its slots each launch a Chromium.
async fn browse(env: &common::Env, d: &Daemon, n: usize) {
    let url = format!("{}/product/B0ORPHAN", env.testbed.https_url());
    let calls = (0..n).map(|_| rest(d, "scrape", json!({"url": url, "mode": "browser"})));
    for (code, v) in futures_util::future::join_all(calls).await {
        assert_eq!(code, 200, "{v}");
    }
}

/// `idpool doctor` with `node`'s config: its `leftover browsers` line.
async fn doctor_leftovers(env: &common::Env, node: &str) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path(&format!("{node}/idpool.toml")))
        .arg("doctor")
        .output()
        .await
        .expect("idpool doctor runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("leftover browsers"))
        .unwrap_or_default()
        .to_string()
}

fn kill(d: Daemon) {
    d.signal(libc::SIGKILL);
    // Dropping it reaps the daemon (it has exited: no SIGTERM is sent).
    std::thread::sleep(Duration::from_millis(300));
    drop(d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_fleet_daemons_browsers_end_at_its_next_start_and_with_doctor() {
    let env = shop(1).await;
    let redis = Redis::start(&env).await;
    let cluster = "lease_ttl_secs = 3\nadopt = true\nspare_slots = 1";
    let a = node(&env, &redis, "a", 1, "lease_ttl_secs = 3", "").await;
    let b = node(&env, &redis, "b", 1, cluster, "").await;
    // b adopts a's identity into its spare when a dies.
    kill(a);
    let adopted = within(Duration::from_secs(10), || async {
        held(&b).await.contains(&"a/0".to_string())
    })
    .await;
    assert!(adopted.is_some(), "b did not adopt a/0");
    let data = env.path("b/data/slots");
    let (own, spare) = (data.join("0/chromium"), data.join("1/chromium"));
    let running = || {
        (
            chromium_browsers_under(&own).len(),
            chromium_browsers_under(&spare).len(),
        )
    };

    // Chromium in b's own slot and in its spare, then b SIGKILLed: both
    // outlive it.
    browse(&env, &b, 4).await;
    assert_eq!(running(), (1, 1), "both of b's slots run a Chromium");
    kill(b);
    assert_eq!(
        running(),
        (1, 1),
        "a SIGKILLed daemon's browsers outlive it"
    );

    // `idpool doctor` ends them (no daemon runs on that data dir).
    let line = doctor_leftovers(&env, "b").await;
    assert!(
        line.starts_with("warn") && line.contains("ended 2 Chromium") && line.contains("slot 1"),
        "{line}"
    );
    assert_eq!(running(), (0, 0), "doctor left a browser running");
    assert!(doctor_leftovers(&env, "b").await.starts_with("ok"));

    // Again, and this time the next start of b ends them.
    let b = node(&env, &redis, "b", 1, cluster, "").await;
    let adopted = within(Duration::from_secs(10), || async {
        held(&b).await.contains(&"a/0".to_string())
    })
    .await;
    assert!(
        adopted.is_some(),
        "b holds a/0 again: {} {} {}",
        common::fleet::status(&b, true).await,
        redis
            .cli(&["ZRANGE", "idpool:unhosted", "0", "-1", "WITHSCORES"])
            .await,
        redis.cli(&["HGETALL", "idpool:holdings"]).await
    );
    browse(&env, &b, 4).await;
    assert_eq!(running(), (1, 1));
    kill(b);
    let b = node(&env, &redis, "b", 1, cluster, "").await;
    assert_eq!(
        running(),
        (0, 0),
        "b's next start left an earlier life's Chromium"
    );
    // A running daemon's own browsers are not doctor's to end.
    let _ = within(Duration::from_secs(10), || async {
        held(&b).await.contains(&"a/0".to_string())
    })
    .await;
    browse(&env, &b, 2).await;
    let before = running();
    assert!(before.0 + before.1 >= 1);
    assert!(doctor_leftovers(&env, "b").await.starts_with("ok"));
    assert_eq!(running(), before);
    b.stop().await;
    assert_eq!(running(), (0, 0));
}
