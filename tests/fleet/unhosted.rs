//! Identities without a host (issue 59): a real `redis-server`, daemons
//! that die with more identities than the fleet has room for. Every
//! operator view counts and lists them within a lease TTL of their
//! daemon's registration lapsing; a daemon that joins takes them, signed-in
//! ones first, then the longest waiting, into its spare slot and then its
//! `adopt_beyond_spares` slot; the daemon that comes back takes the rest in
//! its first beat.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::fleet::{Redis, held, node, node_with, rest, status, within};

const TTL: u64 = 3;

/// The unhosted count `d`'s `pool_status` gives.
async fn unhosted(d: &common::daemon::Daemon) -> u64 {
    status(d, false).await["cluster"]["unhosted"]
        .as_u64()
        .unwrap_or(0)
}

/// `idpool fleet` against daemon `name`'s port: its output.
async fn fleet_cli(env: &common::Env, name: &str, d: &common::daemon::Daemon) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path(name).join("idpool.toml"))
        .args(["fleet", "--url", &d.url("")])
        .output()
        .await
        .expect("idpool fleet runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `idpool doctor` with daemon `name`'s config: its `fleet` line, and all
/// it printed.
async fn doctor_fleet(env: &common::Env, name: &str) -> (String, String) {
    let doctor = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path(name).join("idpool.toml"))
        .arg("doctor")
        .output()
        .await
        .expect("doctor");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&doctor.stdout),
        String::from_utf8_lossy(&doctor.stderr)
    );
    let line = (out.lines().find(|l| l.contains("fleet:")))
        .unwrap_or("")
        .to_string();
    (line, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn identities_without_a_host_are_shown_everywhere_and_taken_signed_in_first() {
    let env = common::shop(1).await;
    let redis = Redis::start(&env).await;
    let ttl = format!("lease_ttl_secs = {TTL}");
    // z (one identity) dies first; a (three, one signed in) later.
    let z = node(&env, &redis, "z", 1, &ttl, "").await;
    let opts = common::fleet::NodeOpts {
        slots: 3,
        cluster: &ttl,
        role: "admin",
        ..Default::default()
    };
    let a = node_with(&env, &redis, "a", &opts).await;

    // a/2 signs in (a person's session, imported), and the fleet has it.
    common::fleet::import_signed_in(&env, &a, 2).await;
    let (code, v) = rest(
        &a,
        "extract",
        json!({"strategy": "testshop", "operation": "account_reviews",
            "params": {"item": "ACCT1"}, "slot": 2}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let signed = within(Duration::from_secs(5), || async {
        redis
            .cli(&["HGET", "idpool:identities", "a/2"])
            .await
            .contains("\"signed_in\":[\"testshop\"]")
    })
    .await;
    assert!(signed.is_some(), "the fleet never had a/2 signed in");
    assert_eq!(unhosted(&a).await, 0);

    let written = within(Duration::from_secs(5), || async {
        redis
            .cli(&["HEXISTS", "idpool:identities", "z/0"])
            .await
            .trim()
            == "1"
    })
    .await;
    assert!(written.is_some(), "z's record never reached the fleet");
    // z dies: a, still alive, sees its one identity without a host: first
    // as a silent daemon's (two beats without one, before its registration
    // lapses), then as one the fleet lists.
    z.signal(libc::SIGKILL);
    let killed = Instant::now();
    let first = parking_lot::Mutex::new(None);
    let seen = within(Duration::from_secs(TTL + 3), || async {
        let c = status(&a, false).await["cluster"].clone();
        let shown = c["unhosted"] == json!(1);
        if shown {
            first.lock().get_or_insert(c["unhosted_silent"].clone());
        }
        shown && c["unhosted_silent"] == json!(0)
    })
    .await;
    assert!(seen.is_some(), "z/0 never showed without a host");
    assert_eq!(
        first.lock().take(),
        Some(json!(1)),
        "first shown as a silent daemon's, before its registration lapsed"
    );
    println!(
        "z SIGKILLed: a's pool_status listed z/0 without a host after {:?} (TTL {TTL} s)",
        killed.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // a dies too. b joins with one spare slot and one beyond the spares.
    a.signal(libc::SIGKILL);
    let b = node(
        &env,
        &redis,
        "b",
        1,
        &format!("{ttl}\nadopt = true\nspare_slots = 1\nadopt_beyond_spares = 1"),
        "",
    )
    .await;
    // a's lapse is found by b's beats; b then adopts two of the four.
    let taken = within(Duration::from_secs(3 * TTL + 5), || async {
        held(&b).await.len() == 3
    })
    .await;
    assert!(
        taken.is_some(),
        "b never filled its room: {}",
        status(&b, false).await
    );
    let mut h = held(&b).await;
    h.sort();
    assert_eq!(
        h,
        ["a/2", "b/0", "z/0"],
        "the signed-in one first, then the longest waiting: {}",
        status(&b, true).await
    );
    // Every operator view: pool_status, the fleet view, idpool fleet,
    // /metrics, doctor.
    let two = within(Duration::from_secs(TTL), || async {
        unhosted(&b).await == 2
    })
    .await;
    assert!(two.is_some(), "{}", status(&b, false).await);
    let s = status(&b, true).await;
    assert!(
        s["cluster"]["unhosted_oldest_secs"].as_u64().is_some(),
        "{s}"
    );
    let listed = &s["fleet"]["unhosted"];
    assert_eq!(listed["count"], json!(2), "{listed}");
    let mut ids: Vec<&str> = (listed["listed"].as_array().expect("listed").iter())
        .map(|u| {
            assert_eq!(u["last_node"], json!("a"), "{u}");
            assert!(u["waiting_secs"].as_u64().is_some(), "{u}");
            u["fleet_id"].as_str().expect("fleet id")
        })
        .collect();
    ids.sort();
    assert_eq!(ids, ["a/0", "a/1"]);
    let hosted: Vec<(String, bool)> = (s["fleet"]["identities"].as_array().expect("identities"))
        .iter()
        .map(|i| {
            (
                i["fleet_id"].as_str().unwrap_or("").to_string(),
                i["hosted"] == json!(true),
            )
        })
        .collect();
    assert!(hosted.contains(&("a/0".to_string(), false)), "{hosted:?}");
    assert!(hosted.contains(&("a/2".to_string(), true)), "{hosted:?}");
    let table = fleet_cli(&env, "b", &b).await;
    assert!(table.contains("2 identities without a host"), "{table}");
    assert!(
        table.contains("a/0") && table.contains("last on a"),
        "{table}"
    );
    let page = reqwest::get(b.url("/api/v1/slots"))
        .await
        .expect("slots")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(
        page["cluster"]["unhosted"],
        json!(2),
        "what the status page reads"
    );
    let metrics = reqwest::get(b.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("idpool_fleet_unhosted_identities 2"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("unhosted"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (line, out) = doctor_fleet(&env, "b").await;
    assert!(
        line.starts_with("warn") && line.contains("2 identities have no daemon"),
        "{out}"
    );
    // b's adoptions said which was signed in and which took a slot beyond
    // the spares.
    let events = reqwest::get(b.url("/api/v1/events/recent"))
        .await
        .expect("events")
        .json::<Value>()
        .await
        .unwrap_or(Value::Null);
    let adopted: Vec<&Value> = (events["events"].as_array().into_iter().flatten())
        .filter(|e| e["kind"] == json!("identity_adopted"))
        .collect();
    assert_eq!(adopted.len(), 2, "{events}");
    assert!(
        adopted
            .iter()
            .any(|e| e["detail"]["fleet_id"] == json!("a/2")
                && e["detail"]["signed_in"] == json!(["testshop"])),
        "{adopted:?}"
    );
    assert!(
        adopted
            .iter()
            .any(|e| e["detail"]["beyond_spares"] == json!(true)),
        "{adopted:?}"
    );

    // a comes back: it takes its two in its first beat; none is without a
    // host within a TTL of its restart.
    let restarted = Instant::now();
    let a2 = node_with(&env, &redis, "a", &opts).await;
    let back = within(Duration::from_secs(TTL), || async {
        unhosted(&b).await == 0
    })
    .await;
    assert!(back.is_some(), "{}", status(&b, true).await);
    println!(
        "a restarted: none without a host after {:?}",
        restarted.elapsed()
    );
    let mut h = held(&a2).await;
    h.sort();
    assert_eq!(h, ["a/0", "a/1"], "a/2 stays with b");
    let table = fleet_cli(&env, "b", &b).await;
    assert!(table.contains("no identity is without a host"), "{table}");

    // A daemon whose heartbeats take longer than a third of the TTL (its
    // registration as the fleet has it): doctor says so, with the fix.
    let slow = json!({"node": "slowpoke", "advertise": "http://127.0.0.1:9", "identities": [],
        "spare": 0, "version": "0", "beat_ms": 1500});
    redis.cli(&["SADD", "idpool:nodes", "slowpoke"]).await;
    redis
        .cli(&[
            "SET",
            "idpool:node:slowpoke",
            &slow.to_string(),
            "PX",
            "60000",
        ])
        .await;
    let (line, out) = doctor_fleet(&env, "b").await;
    assert!(
        line.starts_with("warn")
            && line.contains("slowpoke (1500 ms)")
            && line.contains("lease_ttl_secs"),
        "{out}"
    );
}
