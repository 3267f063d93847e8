//! A fleet for real (issue 19): a real `redis-server` on loopback, three
//! daemons, one testbed. The testbed's request log judges the fleet-wide
//! budget; the daemons' own reports, the proxies they go through and their
//! audit logs judge leases, adoption, forwarding and the outage.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::fleet::{Redis, held, most_at_once, node, rest, status, within};
use common::proxies::{Seen, http_connect_proxy};
use common::shop;
use idpool_testbed::{LogEntry, RateLimit};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// Requests a second the fleet may send the shop (`R`).
const R: u32 = 4;

/// The bundled testshop strategy held to `R` requests a second, fixed.
fn budgeted(env: &common::Env) {
    let path = env.path("strategies/testshop.toml");
    let text = std::fs::read_to_string(&path).expect("testshop");
    let text = text.replace(
        "[politeness]\n",
        &format!(
            "[politeness]\nmax_requests_per_minute = {}\nadaptive = false\n",
            R * 60
        ),
    );
    let text = text.replace(
        "global_max_in_flight = 16",
        &format!("global_max_in_flight = {IN_FLIGHT}"),
    );
    std::fs::write(&path, text).expect("write testshop");
}

/// Requests the fleet may have in flight at the shop at once (one place
/// for each of the three daemons: each keeps at least one).
const IN_FLIGHT: usize = 3;

fn audit(env: &common::Env, node: &str) -> Vec<Value> {
    std::fs::read_to_string(env.path(&format!("{node}/data/audit.log")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The breaker of `fleet_id` for testshop, as daemon `d` reads the fleet.
async fn fleet_breaker(d: &Daemon, fleet_id: &str) -> String {
    let v = status(d, true).await;
    v["fleet"]["identities"]
        .as_array()
        .and_then(|ids| ids.iter().find(|i| i["fleet_id"] == json!(fleet_id)))
        .and_then(|i| i["breakers"]["testshop"]["state"].as_str())
        .unwrap_or("none")
        .to_string()
}

/// Rest every identity of daemon `d` for testshop: the shop rate-limits
/// each one after one more request (429, `Retry-After: 60`).
async fn rest_identities_of(env: &common::Env, d: &Daemon, slots: usize) {
    for slot in 0..slots {
        for _ in 0..3 {
            let (_, v) = rest(
                d,
                "get_reviews",
                json!({"item": "B0REST", "strategy": "testshop", "slot": slot}),
            )
            .await;
            let s = status(d, false).await;
            if s["slots"][slot]["breakers"]["testshop"]["state"] == json!("open") {
                break;
            }
            let _ = v;
        }
    }
    let s = status(d, false).await;
    for slot in 0..slots {
        assert_eq!(
            s["slots"][slot]["breakers"]["testshop"]["state"],
            json!("open"),
            "slot {slot} did not rest: {}\n{}",
            s["slots"][slot],
            env.testbed.log().len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_daemons_share_one_budget_see_each_others_breakers_and_forward() {
    let env = shop(2).await;
    budgeted(&env);
    let redis = Redis::start(&env).await;
    let a = node(&env, &redis, "a", 2, "", "").await;
    let b = node(&env, &redis, "b", 2, "", "").await;
    let c = node(&env, &redis, "c", 2, "", "").await;
    let fleet = [&a, &b, &c];

    // Every identity is held by exactly one daemon.
    let mut all = BTreeSet::new();
    for d in fleet {
        for id in held(d).await {
            assert!(all.insert(id.clone()), "{id} held twice");
        }
    }
    assert_eq!(all.len(), 6, "{all:?}");

    // Load: 4 callers per daemon for 6 s; the shop judges the budget.
    let start_ms = env.testbed.log().last().map_or(0, |e| e.at_ms);
    let until = Instant::now() + Duration::from_secs(6);
    let callers =
        fleet
            .iter()
            .flat_map(|d| (0..4).map(move |k| (*d, k)))
            .map(|(d, k)| async move {
                let mut n = 0u32;
                while Instant::now() < until {
                    let (code, _) = rest(
                        d,
                        "get_reviews",
                        json!({"item": format!("B0FLEET{k}"), "strategy": "testshop"}),
                    )
                    .await;
                    if code == 200 {
                        n += 1;
                    }
                }
                n
            });
    let ok: u32 = futures_util::future::join_all(callers)
        .await
        .into_iter()
        .sum();
    let per_sec: Vec<(u64, u32)> = env
        .testbed
        .arrivals("/")
        .into_iter()
        .filter(|(s, _)| *s * 1000 > start_ms + 1000)
        .collect();
    println!("fleet budget R = {R}/s: {ok} calls ok; the shop's arrivals per second: {per_sec:?}");
    let max = per_sec.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert!(
        max <= R + 1,
        "the shop saw {max} requests in one second (R = {R})"
    );
    // The budget is used, not just undercut: three daemons alone would each
    // send R a second; together they send about R.
    let total: u32 = per_sec.iter().map(|(_, n)| *n).sum();
    assert!(total >= R * 4, "only {total} requests in 6 s");

    // Slow answers (1.5 s, R starts a second): the fleet keeps at most
    // IN_FLIGHT requests at the shop at once, not IN_FLIGHT per daemon.
    common::slow(&env, "/", 1500);
    let from = env.testbed.log().len();
    let until = Instant::now() + Duration::from_secs(4);
    let callers =
        fleet
            .iter()
            .flat_map(|d| (0..3).map(move |k| (*d, k)))
            .map(|(d, k)| async move {
                while Instant::now() < until {
                    let _ = rest(
                        d,
                        "get_reviews",
                        json!({"item": format!("B0SLOW{k}"), "strategy": "testshop"}),
                    )
                    .await;
                }
            });
    futures_util::future::join_all(callers).await;
    env.testbed.set_modes(|m| m.fault = None);
    let slow_log: Vec<LogEntry> = env.testbed.log().into_iter().skip(from).collect();
    let most = most_at_once(&slow_log);
    println!(
        "slow shop: {} requests, at most {most} at once (fleet bound {IN_FLIGHT})",
        slow_log.len()
    );
    assert!(most <= IN_FLIGHT, "the shop had {most} requests at once");
    assert!(
        slow_log.len() >= 4,
        "too few requests to judge: {}",
        slow_log.len()
    );

    // A breaker opened through a is seen by b within a second.
    env.testbed.set_modes(|m| {
        m.rate_limit = Some(RateLimit {
            max: 1,
            window_secs: 60,
            block_secs: 60,
            status: 429,
            retry_after: Some(60),
        })
    });
    rest_identities_of(&env, &a, 2).await;
    let seen = within(Duration::from_secs(1), || async {
        fleet_breaker(&b, "a/0").await == "open"
    })
    .await;
    assert!(
        seen.is_some(),
        "b did not see a/0's breaker open within 1 s: {}",
        status(&b, true).await["fleet"]
    );
    println!("a/0's breaker opened on a; b saw it after {seen:?}");
    rest_identities_of(&env, &c, 2).await;
    env.testbed.set_modes(|m| m.rate_limit = None);

    // c (every identity resting) serves the call through b, the one
    // daemon with an admitted identity; both audit logs name the hop.
    let (code, v) = rest(
        &c,
        "get_reviews",
        json!({"item": "B0HOP", "strategy": "testshop"}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let truth = common::masked_truth("B0HOP");
    let reviews = v["reviews"].as_array().expect("reviews");
    assert!(!reviews.is_empty());
    assert_eq!(
        reviews[..],
        truth[..reviews.len()],
        "the forwarded call's reviews"
    );
    let on_c = audit(&env, "c");
    let on_b = audit(&env, "b");
    let hop_c = on_c
        .iter()
        .rev()
        .find(|l| l["tool"] == json!("get_reviews"))
        .expect("c audited");
    assert_eq!(hop_c["hop"], json!("to b"), "{hop_c}");
    assert_eq!(hop_c["ok"], json!(true), "{hop_c}");
    let ran_b = on_b
        .iter()
        .find(|l| l["hop"] == json!("from c") && l["args"]["item"] == json!("B0HOP"))
        .expect("b's audit log has no line `from c`");
    // Who served it crosses the wire typed: c's line names b's slot, tier
    // and tries as b's own line does.
    for k in ["slot", "tier", "attempts"] {
        assert!(ran_b[k].is_u64(), "b's line has no {k}: {ran_b}");
        assert_eq!(hop_c[k], ran_b[k], "{k}: c {hop_c} / b {ran_b}");
    }
    // Forwarded once only: b's line is not forwarded on.
    assert!(
        on_b.iter()
            .all(|l| l["hop"] != json!("to a") && l["hop"] != json!("to c"))
    );

    // An item URL and no `strategy`: routed by the strategy its host picks,
    // as the tool resolves it, and forwarded the same way.
    let item_url = env.url("/product/B0HOPURL").to_string();
    let (code, v) = rest(&c, "get_reviews", json!({"item": item_url})).await;
    assert_eq!(code, 200, "an item URL from c: {v}");
    assert_eq!(v["strategy"], json!("testshop"), "{v}");
    let reviews = v["reviews"].as_array().expect("reviews");
    assert_eq!(
        reviews[..],
        common::masked_truth("B0HOPURL")[..reviews.len()],
        "the forwarded call's reviews by URL"
    );
    let by_url = audit(&env, "c")
        .into_iter()
        .rev()
        .find(|l| l["tool"] == json!("get_reviews"))
        .expect("c audited the URL call");
    assert_eq!(by_url["hop"], json!("to b"), "{by_url}");

    // The operator's view of the fleet, from any daemon.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("c/idpool.toml"))
        .args(["slots", "--fleet"])
        .output()
        .await
        .expect("idpool slots --fleet");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "node a",
        "node b",
        "node c",
        "a/0",
        "held by a",
        "c/1",
        "testshop open",
    ] {
        assert!(text.contains(want), "`{want}` missing from:\n{text}");
    }
    assert!(
        text.contains("b/0") && text.contains("testshop closed"),
        "{text}"
    );
    // The Redis password is in each config and nowhere it could leak.
    let fleet_view = status(&c, true).await.to_string();
    assert!(
        !fleet_view.contains(&redis.password),
        "the password is in pool_status"
    );
    assert!(
        fleet_view.contains(&format!("redis://127.0.0.1:{}", redis.port)),
        "{fleet_view}"
    );
    for d in [a, b, c] {
        let log = d.log_text();
        d.stop().await;
        assert!(
            !log.contains(&redis.password),
            "the password is in a daemon's log"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_daemons_identities_are_adopted_and_an_outage_is_survived() {
    let env = shop(2).await;
    let mut redis = Redis::start(&env).await;
    let (seen_a, seen_b) = (
        Arc::new(Mutex::new(Seen::default())),
        Arc::new(Mutex::new(Seen::default())),
    );
    let (pa, pb) = (
        http_connect_proxy(seen_a.clone()).await,
        http_connect_proxy(seen_b.clone()).await,
    );
    // Each daemon reaches the shop through its own gateway; the proxy
    // session (`{session}`) travels with the identity.
    let proxy = |p: u16| format!("proxies = [\"http://u-{{session}}:pw@127.0.0.1:{p}\"]");
    let ttl = 3;
    let a = node(
        &env,
        &redis,
        "a",
        2,
        &format!("lease_ttl_secs = {ttl}"),
        &proxy(pa),
    )
    .await;
    let b = node(
        &env,
        &redis,
        "b",
        1,
        &format!("lease_ttl_secs = {ttl}\nadopt = true\nspare_slots = 2"),
        &proxy(pb),
    )
    .await;

    // a's identities have shop sessions (tb_sid) and proxy sessions.
    let mut sids = Vec::new();
    for slot in 0..2 {
        for _ in 0..2 {
            let (code, v) = rest(
                &a,
                "get_reviews",
                json!({"item": "B0ADOPT", "strategy": "testshop", "slot": slot}),
            )
            .await;
            assert_eq!(code, 200, "{v}");
        }
        sids.push(common::tb_sid(env.testbed.log().last().expect("logged")).expect("a tb_sid"));
    }
    let sa = status(&a, false).await;
    let sessions: Vec<String> = (0..2)
        .map(|i| {
            sa["slots"][i]["identity"]["session"]
                .as_str()
                .expect("session")
                .to_string()
        })
        .collect();
    // The fleet has a's jars before it dies.
    let jars = within(Duration::from_secs(5), || async {
        redis
            .cli(&["EXISTS", "idpool:jar:a/0", "idpool:jar:a/1"])
            .await
            .trim()
            == "2"
    })
    .await;
    assert!(jars.is_some(), "a's jars never reached Redis");
    tokio::time::sleep(Duration::from_secs(2)).await;

    let before_kill_b: Vec<String> = seen_b
        .lock()
        .auth
        .iter()
        .map(|a| common::proxies::basic_user(a))
        .collect();
    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    let adopted = within(Duration::from_secs(ttl + 5), || async {
        let h = held(&b).await;
        h.contains(&"a/0".to_string()) && h.contains(&"a/1".to_string())
    })
    .await;
    assert!(
        adopted.is_some(),
        "b did not adopt a's identities within TTL + 5 s: {}",
        status(&b, false).await
    );
    println!(
        "a SIGKILLed; b adopted both identities after {:?}",
        killed.elapsed()
    );
    let sb = status(&b, false).await;
    for (i, fid) in ["a/0", "a/1"].iter().enumerate() {
        let slot = sb["slots"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["fleet_id"] == json!(fid)))
            .expect("adopted slot");
        // Same proxy session (the same sticky IP at the provider).
        assert_eq!(slot["identity"]["session"], json!(sessions[i]), "{slot}");
        let n = slot["slot"].as_u64().expect("slot number");
        let (code, v) = rest(
            &b,
            "get_reviews",
            json!({"item": "B0ADOPT", "strategy": "testshop", "slot": n}),
        )
        .await;
        assert_eq!(code, 200, "{v}");
        // Same cookies: the shop's session continues.
        let last = env.testbed.log().last().cloned().expect("logged");
        assert_eq!(
            common::tb_sid(&last).as_deref(),
            Some(sids[i].as_str()),
            "the shop saw a new session for {fid}"
        );
    }
    // One source at a time: each of a's proxy sessions reached the shop
    // through a's gateway until a died, and through b's only after.
    let users = |seen: &Arc<Mutex<Seen>>| -> Vec<String> {
        seen.lock()
            .auth
            .iter()
            .map(|a| common::proxies::basic_user(a))
            .collect()
    };
    for s in &sessions {
        let user = format!("u-{s}");
        assert!(
            users(&seen_a).contains(&user),
            "a's gateway never saw {user}"
        );
        assert!(
            users(&seen_b).contains(&user),
            "b's gateway never saw {user}"
        );
    }
    assert_eq!(
        before_kill_b
            .iter()
            .filter(|u| sessions.iter().any(|s| **u == format!("u-{s}")))
            .count(),
        0,
        "b used a's identities while a held them"
    );

    // a comes back: its identities stay with b (never held twice).
    let a2 = node(&env, &redis, "a", 2, &format!("lease_ttl_secs = {ttl}"), "").await;
    assert!(held(&a2).await.is_empty(), "a took back identities b holds");

    // Redis away: both keep serving, and say they are degraded.
    redis.stop();
    let degraded = within(Duration::from_secs(ttl + 3), || async {
        status(&b, false).await["cluster"]["state"] == json!("degraded")
    })
    .await;
    assert!(degraded.is_some(), "b never reported degraded");
    assert!(
        b.get_text("/readyz", None)
            .await
            .contains("cluster: degraded")
    );
    assert!(
        b.get_text("/metrics", None)
            .await
            .contains("idpool_cluster_up 0")
    );
    let (code, v) = rest(
        &b,
        "get_reviews",
        json!({"item": "B0OUT", "strategy": "testshop"}),
    )
    .await;
    assert_eq!(code, 200, "b stopped serving without Redis: {v}");

    // Redis back (empty): leases are taken again, none twice.
    redis.restart().await;
    let back = within(Duration::from_secs(ttl + 5), || async {
        let s = status(&b, false).await;
        s["cluster"]["state"] == json!("up") && s["cluster"]["reconnects"].as_u64() >= Some(1)
    })
    .await;
    assert!(back.is_some(), "b did not reconnect");
    tokio::time::sleep(Duration::from_secs(ttl)).await;
    let (hb, ha) = (held(&b).await, held(&a2).await);
    let both: Vec<&String> = hb.iter().filter(|f| ha.contains(f)).collect();
    assert!(both.is_empty(), "held by a and b: {both:?}");
    for fid in hb.iter() {
        assert_eq!(
            redis
                .cli(&["GET", &format!("idpool:lease:{fid}")])
                .await
                .trim(),
            "b"
        );
    }
    for fid in ha.iter() {
        assert_eq!(
            redis
                .cli(&["GET", &format!("idpool:lease:{fid}")])
                .await
                .trim(),
            "a"
        );
    }
    assert_eq!(hb.len() + ha.len(), 3, "b: {hb:?}, a: {ha:?}");

    // b goes away for good: a takes its own identities back, as b left them.
    b.signal(libc::SIGKILL);
    let regained = within(Duration::from_secs(ttl + 5), || async {
        let h = held(&a2).await;
        h.contains(&"a/0".to_string()) && h.contains(&"a/1".to_string())
    })
    .await;
    assert!(
        regained.is_some(),
        "a did not take its identities back: {}",
        status(&a2, false).await
    );
    let (code, v) = rest(
        &a2,
        "get_reviews",
        json!({"item": "B0BACK", "strategy": "testshop", "slot": 0}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let last = env.testbed.log().last().cloned().expect("logged");
    assert_eq!(
        common::tb_sid(&last).as_deref(),
        Some(sids[0].as_str()),
        "a/0 came back with another shop session"
    );
    a2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_calls_go_where_an_identity_is_signed_in_and_busy_ones_where_there_is_room() {
    let env = shop(1).await;
    let redis = Redis::start(&env).await;
    // a waits at most a second for a free slot; b's one identity is signed in.
    let a = common::fleet::node_with(
        &env,
        &redis,
        "a",
        &common::fleet::NodeOpts {
            slots: 1,
            tail: "[http]\nmax_queue_wait_secs = 1",
            ..Default::default()
        },
    )
    .await;
    let b = common::fleet::node_with(
        &env,
        &redis,
        "b",
        &common::fleet::NodeOpts {
            slots: 1,
            role: "admin",
            ..Default::default()
        },
    )
    .await;
    common::fleet::import_signed_in(&env, &b, 0).await;
    let members = json!({"strategy": "testshop", "operation": "account_reviews", "params": {"item": "ACCT1"}});
    // a's identity is not signed in: the first call learns it (and falls
    // back to top reviews here), the next goes to b's signed-in identity.
    let (code, first) = rest(&a, "extract", members.clone()).await;
    assert_eq!(code, 200, "{first}");
    assert!(first["fallback"].is_object(), "a ran it itself: {first}");
    let seen = within(Duration::from_secs(3), || async {
        let v = status(&a, true).await;
        v["fleet"]["identities"].as_array().is_some_and(|ids| {
            ids.iter().any(|i| {
                i["fleet_id"] == json!("b/0")
                    && i["breakers"]["testshop"]["login"] == json!("logged_in")
            })
        })
    })
    .await;
    assert!(seen.is_some(), "the fleet never showed b/0 signed in");
    let (code, second) = rest(&a, "extract", members).await;
    assert_eq!(code, 200, "{second}");
    assert!(
        second.get("fallback").is_none_or(Value::is_null),
        "not forwarded: {second}"
    );
    let truth: Vec<Value> = common::truth("ACCT1").into_iter().take(10).collect();
    let items = second["items"].as_array().expect("items");
    assert_eq!(items.len(), truth.len(), "{second}");
    let last = audit(&env, "a")
        .into_iter()
        .rev()
        .find(|l| l["tool"] == json!("extract"))
        .expect("audited");
    assert_eq!(last["hop"], json!("to b"), "{last}");

    // Busy: a's one identity takes 4 at once; slow answers keep the rest
    // waiting past a's queue limit, and those are served by b.
    common::slow(&env, "/ajax", 2500);
    let calls = (0..6).map(|k| {
        let a = &a;
        async move {
            rest(
                a,
                "get_reviews",
                json!({"item": format!("B0BUSY{k}"), "strategy": "testshop"}),
            )
            .await
        }
    });
    let ends = futures_util::future::join_all(calls).await;
    env.testbed.set_modes(|m| m.fault = None);
    for (code, v) in &ends {
        assert_eq!(*code, 200, "{v}");
    }
    let hops = audit(&env, "a")
        .into_iter()
        .filter(|l| l["tool"] == json!("get_reviews") && l["hop"] == json!("to b"))
        .count();
    println!("6 slow calls on a: {hops} waited past its queue limit and were served by b");
    assert!(hops >= 1, "no busy call went to b");
    assert!(hops <= 2, "calls went to b that a had room for: {hops}");
    a.stop().await;
    b.stop().await;
}

/// Grants travel with a forwarded call and hold where it runs: a key
/// granted only slot 1 comes in at `a`, which has no slot 1; `a` forwards
/// it to `b`, and `b` serves it on its slot 1, never its slot 0 (which its
/// round robin would take first), and both audit lines say so.
#[tokio::test]
async fn grants_hold_for_a_forwarded_call() {
    let env = shop(2).await;
    let redis = Redis::start(&env).await;
    // The key lives in a's keys file (b knows nothing of it).
    std::fs::create_dir_all(env.path("a")).expect("a");
    std::fs::write(env.path("a/idpool.toml"), "").expect("placeholder config");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("a/idpool.toml"))
        .args([
            "keys", "add", "agent", "--role", "operator", "--grant", "slots=1",
        ])
        .output()
        .await
        .expect("keys add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string();
    let a = node(&env, &redis, "a", 1, "", "").await;
    let b = node(&env, &redis, "b", 2, "", "").await;
    let http = reqwest::Client::new();
    for item in ["B0GRF1", "B0GRF2", "B0GRF3"] {
        let r = http
            .post(a.url("/api/v1/tools/get_reviews"))
            .bearer_auth(&key)
            .json(&json!({"item": item, "strategy": "testshop"}))
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .expect("post");
        let status = r.status();
        let v: Value = r.json().await.expect("json");
        assert_eq!(status, 200, "{item}: {v}");
        assert_eq!(v["slot"], json!(1), "{item} served on b's slot 1: {v}");
        let on_a = audit(&env, "a")
            .into_iter()
            .rev()
            .find(|l| l["args"]["item"] == json!(item))
            .expect("a audited");
        assert_eq!(on_a["hop"], json!("to b"), "{on_a}");
        assert_eq!(on_a["principal"], json!("agent"), "{on_a}");
        let on_b = audit(&env, "b")
            .into_iter()
            .find(|l| l["args"]["item"] == json!(item))
            .expect("b audited");
        assert_eq!(on_b["hop"], json!("from a"), "{on_b}");
        assert_eq!(on_b["slot"], json!(1), "{on_b}");
    }
    // b's slot 0 sent nothing for the key.
    let s = status(&b, false).await;
    assert_eq!(s["slots"][0]["requests"], json!(0), "{}", s["slots"][0]);
    a.stop().await;
    b.stop().await;
}
