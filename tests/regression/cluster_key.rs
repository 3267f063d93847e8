//! Finding 7: the cluster key was admin on every daemon. With the key and a
//! body claiming `"role": "admin"`, `POST /api/v1/fleet/call/export_session`
//! returned a slot's cookies and `retire_slot` retired it; and a daemon sent
//! the key to whatever address a node record in Redis advertised. Now the
//! key calls only what a fleet forwards, as an operator at most, and goes
//! only to addresses of the form `http://{host}:{port}` on loopback or private
//! networks (or those `cluster.peers` lists).

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::canary::Canary;
use crate::common::daemon::Daemon;
use crate::common::fleet::{CLUSTER_KEY, Redis, node, rest, status};
use crate::common::{Env, shop};
use idpool_testbed::RateLimit;

/// `POST /api/v1/fleet/call/{tool}` with the cluster key, as a daemon
/// would send it, claiming `role`: (HTTP status, body).
async fn fleet_call(d: &Daemon, tool: &str, role: &str, args: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(d.url(&format!("/api/v1/fleet/call/{tool}")))
        .header("x-idpool-cluster-key", CLUSTER_KEY)
        .header("x-idpool-hop", "mallory-node")
        .json(&json!({"args": args, "principal": "mallory", "role": role, "session": null}))
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("POST fleet call");
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

fn audit(env: &Env, node: &str) -> Vec<Value> {
    std::fs::read_to_string(env.path(&format!("{node}/data/audit.log")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_key_cannot_export_a_session_or_retire_a_slot_and_is_never_admin() {
    let env = shop(2).await;
    let redis = Redis::start(&env).await;
    let a = node(&env, &redis, "a", 2, "", "").await;
    // Give slot 0 cookies worth stealing.
    let (code, v) = rest(
        &a,
        "get_reviews",
        json!({"item": "B0KEY", "strategy": "testshop", "slot": 0}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let before = status(&a, false).await["slots"][0]["identity"].clone();
    assert!(before.is_object(), "no identity in pool_status: {before}");

    for (tool, args) in [
        ("export_session", json!({"slot": 0})),
        ("retire_slot", json!({"slot": 0})),
        ("pool_status", json!({})),
    ] {
        let (code, v) = fleet_call(&a, tool, "admin", args).await;
        assert_eq!(code, 403, "{tool} through the cluster key: {v}");
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains("scrape, get_reviews, extract") && msg.contains(tool),
            "{msg}"
        );
        assert!(v.get("result").is_none(), "{v}");
    }
    let after = status(&a, false).await["slots"][0]["identity"].clone();
    assert_eq!(before, after, "the slot's identity changed");
    let lines = audit(&env, "a");
    for tool in ["export_session", "retire_slot"] {
        assert!(
            lines.iter().any(
                |l| l["method"] == json!(format!("POST /api/v1/fleet/call/{tool}"))
                    && l["ok"] == json!(false)
                    && l["error"].as_str().is_some_and(|e| e.starts_with("403"))
            ),
            "no audit line for the refused {tool}"
        );
    }

    // What a fleet forwards still runs, but as an operator whatever the
    // body claims (the dispatcher's audit line says who it ran as).
    let (code, v) = fleet_call(
        &a,
        "get_reviews",
        "admin",
        json!({"item": "B0CAP", "strategy": "testshop"}),
    )
    .await;
    assert_eq!((code, v["end"].as_str()), (200, Some("ok")), "{v}");
    let url = format!("{}/product/B0CAPS", env.testbed.https_url());
    let (code, v) = fleet_call(&a, "scrape", "admin", json!({"url": url})).await;
    assert_eq!((code, v["end"].as_str()), (200, Some("ok")), "{v}");
    let lines = audit(&env, "a");
    let ran: Vec<&Value> = lines
        .iter()
        .filter(|l| l["principal"] == json!("mallory") && l["tool"].is_string())
        .collect();
    assert_eq!(ran.len(), 2, "{ran:?}");
    for l in ran {
        assert_eq!(l["role"], json!("operator"), "a forwarded call ran as {l}");
        assert_eq!(l["hop"], json!("from mallory-node"), "{l}");
    }
    a.stop().await;
}

/// Rest every identity of `d` for testshop (the shop rate-limits each one
/// after one request: 429, `Retry-After: 60`), so its calls are forwarded.
async fn rest_identities(env: &Env, d: &Daemon, slots: usize) {
    env.testbed.set_modes(|m| {
        m.rate_limit = Some(RateLimit {
            max: 1,
            window_secs: 60,
            block_secs: 60,
            status: 429,
            retry_after: Some(60),
        })
    });
    for slot in 0..slots {
        for _ in 0..3 {
            let _ = rest(
                d,
                "get_reviews",
                json!({"item": "B0REST", "strategy": "testshop", "slot": slot}),
            )
            .await;
            let s = status(d, false).await;
            if s["slots"][slot]["breakers"]["testshop"]["state"] == json!("open") {
                break;
            }
        }
    }
    env.testbed.set_modes(|m| m.rate_limit = None);
    let s = status(d, false).await;
    for slot in 0..slots {
        assert_eq!(
            s["slots"][slot]["breakers"]["testshop"]["state"],
            json!("open"),
            "slot {slot} did not rest: {}",
            s["slots"][slot]
        );
    }
}

/// Write a node record into the fleet's Redis, as anyone who can write
/// there could: `name` holds one identity and advertises `advertise`.
async fn plant(redis: &Redis, name: &str, advertise: &str) {
    let record = json!({
        "node": name, "advertise": advertise, "identities": [format!("{name}/0")],
        "spare": 0, "version": "0.0.0",
    });
    redis
        .cli(&["SET", &format!("idpool:node:{name}"), &record.to_string()])
        .await;
    redis.cli(&["SADD", "idpool:nodes", name]).await;
}

/// The daemon `from`'s last `tool` call went `to` (its audit line's hop).
fn hop_of(env: &Env, from: &str, tool: &str) -> Value {
    audit(env, from)
        .into_iter()
        .rev()
        .find(|l| l["tool"] == json!(tool))
        .map_or(Value::Null, |l| l["hop"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_advertise_address_never_gets_the_cluster_key() {
    let env = shop(2).await;
    let redis = Redis::start(&env).await;
    // The canary on 127.0.0.2 stands in for the attacker's host.
    let canary = Canary::start().await;
    let b = node(&env, &redis, "b", 1, "", "").await;
    let a = node(&env, &redis, "a", 1, "", "").await;
    let peers = format!("peers = [\"{}\"]", b.url(""));
    let c = node(&env, &redis, "c", 1, &peers, "").await;
    rest_identities(&env, &a, 1).await;
    rest_identities(&env, &c, 1).await;

    // Planted records sort before `b`, so the old code picked them first.
    // Credentials and a path, and the decimal form of 127.0.0.2: not
    // `http://{host}:{port}`, so never called.
    plant(
        &redis,
        "0creds",
        &format!("http://user:pw@127.0.0.2:{}/x", canary.port),
    )
    .await;
    plant(
        &redis,
        "0decimal",
        &format!("http://{}:{}", 2130706434u32, canary.port),
    )
    .await;
    let (code, v) = rest(
        &a,
        "get_reviews",
        json!({"item": "B0FWD", "strategy": "testshop"}),
    )
    .await;
    assert_eq!(code, 200, "get_reviews through the fleet: {v}");
    assert_eq!(hop_of(&env, "a", "get_reviews"), json!("to b"));
    let url = format!("{}/product/B0FWDS", env.testbed.https_url());
    let (code, v) = rest(&a, "scrape", json!({"url": url})).await;
    assert_eq!(code, 200, "scrape through the fleet: {v}");
    assert_eq!(hop_of(&env, "a", "scrape"), json!("to b"));
    assert_eq!(
        canary.seen(),
        Vec::<String>::new(),
        "a planted address was called"
    );

    // With `cluster.peers` set, a well-formed loopback address that is not
    // listed gets nothing either.
    for name in ["0creds", "0decimal"] {
        redis.cli(&["SREM", "idpool:nodes", name]).await;
    }
    plant(&redis, "0listed", &format!("http://{}", canary.addr())).await;
    let (code, v) = rest(
        &c,
        "get_reviews",
        json!({"item": "B0PEER", "strategy": "testshop"}),
    )
    .await;
    assert_eq!(code, 200, "get_reviews through the fleet: {v}");
    assert_eq!(hop_of(&env, "c", "get_reviews"), json!("to b"));
    assert_eq!(
        canary.seen(),
        Vec::<String>::new(),
        "an unlisted peer was called"
    );
    let refused = c.log_text();
    assert!(refused.contains("is not in cluster.peers"), "{refused}");
    assert!(!refused.contains(CLUSTER_KEY) && !a.log_text().contains("user:pw"));
    for d in [a, b, c] {
        d.stop().await;
    }
}
