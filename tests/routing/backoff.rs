//! Backing off for real (issue 14): a site that rate-limits or blocks gets
//! less traffic, never more. The testbed's limits stand in for the shop; its
//! request log is the judge of what the pool sent.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Mcp};
use common::{chromium_browsers_under, shop};
use idpool_testbed::{LogEntry, RateLimit};
use serde_json::{Value, json};

/// The `tb_sid` identity a logged request carried (`None`: it had none yet).
fn identity(e: &LogEntry) -> Option<String> {
    common::tb_sid(e)
}

/// Requests the shop received per identity, and how many of them were refused.
fn per_identity(log: &[LogEntry]) -> BTreeMap<String, (usize, usize)> {
    let mut out: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for e in log {
        let id = identity(e).unwrap_or_else(|| "(none)".into());
        let n = out.entry(id).or_default();
        n.0 += 1;
        if e.status != 200 {
            n.1 += 1;
        }
    }
    out
}

/// A tools/call result: `Ok(structured)` or `Err(the error's facts in _meta)`.
fn outcome(answer: &Value) -> Result<Value, Value> {
    let result = &answer["result"];
    if result["isError"] == true {
        let facts = result["_meta"]["idpool/error"].clone();
        assert_eq!(facts["message"], result["content"][0]["text"], "{answer}");
        Err(facts)
    } else {
        Ok(result["structuredContent"].clone())
    }
}

/// The scenario: a shop that lets each identity make 30 requests per
/// 10 s and then answers a captcha page with status 429 for 20 s, without
/// `Retry-After`; 10 MCP clients make 10 `get_reviews` calls each on a pool
/// of 2 slots.
#[tokio::test]
async fn a_rate_limited_shop_gets_its_limit_and_one_trial_per_rest() {
    const LIMIT: usize = 30;
    const MAX_IN_FLIGHT: usize = 4; // testshop's politeness.max_in_flight
    let env = shop(2).await;
    env.testbed.set_modes(|m| {
        m.rate_limit = Some(RateLimit {
            max: LIMIT as u32,
            window_secs: 10,
            block_secs: 20,
            status: 429,
            retry_after: None,
        })
    });
    let d = Daemon::start(&env, 2, "").await;
    let mut clients = Vec::new();
    for _ in 0..10 {
        let mut c = Mcp::new(&d, None);
        assert!(c.initialize().await.status.is_success());
        clients.push(c);
    }
    // Each identity's first call alone, so the shop knows it by one cookie.
    for slot in 0..2 {
        let a = clients[0]
            .tool(
                1,
                "get_reviews",
                json!({"item": "B0RATE", "strategy": "testshop", "slot": slot}),
            )
            .await;
        assert!(outcome(&a).is_ok(), "{a}");
    }
    let started = Instant::now();
    let runs = clients.iter().enumerate().map(|(i, c)| async move {
        let mut ends = Vec::new();
        for k in 0..10u64 {
            let a = c
                .tool(
                    10 + k,
                    "get_reviews",
                    json!({"item": format!("B0RATE{i}"), "strategy": "testshop"}),
                )
                .await;
            ends.push(outcome(&a));
        }
        ends
    });
    let ends: Vec<Result<Value, Value>> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();
    let burst = started.elapsed();
    let ok = ends.iter().filter(|e| e.is_ok()).count();
    let failed: Vec<&Value> = ends.iter().filter_map(|e| e.as_ref().err()).collect();
    let log = env.testbed.log();
    let seen = per_identity(&log);
    println!(
        "burst of 100 calls: {ok} ok, {} failed in {burst:?}; the shop saw {} requests, per identity (requests, refused): {seen:?}",
        failed.len(),
        log.len()
    );
    assert!(
        burst < Duration::from_secs(10),
        "the burst outlasted the shop's window"
    );
    // Each identity had exactly its limit's worth of content (its first call included).
    assert_eq!(ok, 2 * LIMIT - 2, "{failed:?}");
    let mut longest = 0.0f64;
    for e in &failed {
        let secs = e["retry_after"]
            .as_f64()
            .unwrap_or_else(|| panic!("no retry_after: {e}"));
        assert!(secs > 0.0, "{e}");
        let text = e["message"].as_str().unwrap_or_default();
        assert!(
            text.contains("testshop") && text.contains("retry after"),
            "{e}"
        );
        longest = longest.max(secs);
    }
    // The shop's side: per identity, its limit plus the requests already on
    // their way when the first captcha came back (at most max_in_flight), and
    // no browser anywhere. (Each identity's first request carried no cookie
    // yet: its limit's worth shows as LIMIT - 1 under its cookie.)
    assert_eq!(seen.get("(none)"), Some(&(2, 0)), "{seen:?}");
    assert_eq!(seen.len(), 3, "two identities: {seen:?}");
    for (id, (requests, refused)) in seen.iter().filter(|(id, _)| *id != "(none)") {
        assert!(
            *requests <= LIMIT - 1 + MAX_IN_FLIGHT && *refused <= MAX_IN_FLIGHT,
            "identity {id} got {requests} requests, {refused} refused"
        );
    }
    assert!(
        log.iter().all(|e| !e.path.starts_with("/js-reviews")),
        "the browser tier was tried"
    );
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
    // Operators see both identities resting, and the site-wide budget cut
    // (both were pushed back).
    let status = outcome(&clients[2].tool(100, "pool_status", json!({})).await).expect("status");
    for slot in 0..2 {
        let b = &status["slots"][slot]["breakers"]["testshop"];
        assert_eq!(
            (b["state"].as_str(), b["cause"].as_str()),
            (Some("open"), Some("rate_limited")),
            "{b}"
        );
    }
    assert_eq!(status["strategies"]["testshop"]["cuts"], 1, "{status}");
    let metrics = reqwest::get(d.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for needle in [
        "idpool_breaker_resting{slot=\"0\",strategy=\"testshop\"} 1",
        "idpool_strategy_budget_rpm{strategy=\"testshop\"} ",
        "idpool_strategy_budget_cuts_total{strategy=\"testshop\"} 1",
    ] {
        assert!(metrics.contains(needle), "missing `{needle}`");
    }

    // The official TypeScript SDK takes the failure as it is (a tool
    // result, not a protocol error) and hands over retry_after.
    let out = common::daemon::node_client(
        &[
            "--transport",
            "http",
            "--url",
            &d.url("/mcp"),
            "--tool",
            "get_reviews",
            "--tool-args",
            &json!({"item": "B0TS", "strategy": "testshop"}).to_string(),
        ],
        &[],
    )
    .await;
    assert_eq!(out["isError"], true, "{out}");
    let facts = &out["meta"]["idpool/error"];
    assert_eq!(facts["kind"], "unavailable", "{out}");
    assert!(
        facts["retry_after"].as_f64().is_some_and(|r| r > 0.0),
        "{out}"
    );
    assert!(
        out["text"]
            .as_str()
            .is_some_and(|t| t.contains("retry after")),
        "{out}"
    );

    // After the rest (longer than the shop's 20 s penalty here), each slot's
    // one trial succeeds and closes its breaker.
    tokio::time::sleep(Duration::from_secs_f64(longest + 0.2)).await;
    for slot in 0..2 {
        let a = clients[1]
            .tool(
                200,
                "get_reviews",
                json!({"item": "B0AFTER", "strategy": "testshop", "slot": slot}),
            )
            .await;
        assert!(outcome(&a).is_ok(), "slot {slot} after its rest: {a}");
    }
    let after = per_identity(&env.testbed.log());
    println!("with the trials: {after:?}");
    for (id, (requests, _)) in after.iter().filter(|(id, _)| *id != "(none)") {
        assert_eq!(
            *requests,
            seen[id].0 + 1,
            "identity {id}: one trial, nothing more"
        );
    }
    d.stop().await;
}

/// A `get_reviews` call on `pool` (one page of `item`).
async fn reviews(pool: &idpool::pool::Pool, item: &str) -> idpool::error::Result<Value> {
    idpool::tools::get_reviews::run(
        pool.leases(),
        json!({"item": item, "strategy": "testshop"}),
        idpool::lease::cascade::RunOptions::default(),
    )
    .await
    .map(|o| o.body)
}

/// `Retry-After: 7` on the 429: the identity is sent nothing for 7 s, and
/// calls meanwhile fail at once saying when to come back.
#[tokio::test]
async fn retry_after_seven_means_seven_seconds_of_silence() {
    let env = shop(1).await;
    env.testbed.set_modes(|m| {
        m.rate_limit = Some(RateLimit {
            max: 3,
            window_secs: 600,
            block_secs: 5,
            status: 429,
            retry_after: Some(7),
        })
    });
    let pool = env.pool();
    for _ in 0..3 {
        reviews(&pool, "B0SEVEN").await.expect("within the limit");
    }
    let e = reviews(&pool, "B0SEVEN").await.expect_err("429");
    assert!(e.to_string().contains("tier 1: rate_limited (429)"), "{e}");
    assert!(
        !e.to_string().contains("tier 2"),
        "a rate limit tries no other tier: {e}"
    );
    let told = e.retry_after().expect("retry_after");
    assert!(
        told > Duration::from_secs(6) && told <= Duration::from_secs(7),
        "{told:?}"
    );
    let log = env.testbed.log();
    let refused = log.last().expect("the 429").clone();
    assert_eq!(refused.status, 429);
    // Calls keep coming: none reaches the shop until the 7 s are over.
    let until = Instant::now() + told;
    let mut refused_calls = 0;
    while Instant::now() + Duration::from_millis(300) < until {
        let e = reviews(&pool, "B0SEVEN").await.expect_err("resting");
        assert_eq!(e.kind(), idpool::error::ErrorKind::Unavailable, "{e}");
        assert!(e.retry_after().is_some_and(|r| r <= told), "{e}");
        refused_calls += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(refused_calls >= 20, "{refused_calls}");
    assert_eq!(
        env.testbed.log().len(),
        log.len(),
        "a request went out while resting"
    );
    tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
    let r = reviews(&pool, "B0SEVEN").await.expect("after the 7 s");
    assert_eq!(r["pages"][0]["trial"], true, "{r}");
    let next = env.testbed.log().last().expect("the trial").clone();
    assert!(
        next.at_ms >= refused.done_ms + 7000,
        "the trial came {} ms after the 429",
        next.at_ms - refused.done_ms
    );
    common::shutdown_and_check(&pool).await;
}

/// Blocks of the identity stop it on every tier; no block or rate limit
/// ever takes the browser.
#[tokio::test]
async fn a_block_of_the_identity_stops_every_tier_and_none_reaches_the_browser() {
    let env = shop(1).await;
    let pool = env.pool();
    // A captcha (status 200, `[block]` body marker) on the AJAX endpoint.
    env.testbed
        .set_modes(|m| m.rate_limit = Some(RateLimit::captcha(1, 600, 600)));
    reviews(&pool, "B0ID").await.expect("first request");
    let before = env.testbed.log().len();
    let e = reviews(&pool, "B0ID").await.expect_err("captcha");
    let text = e.to_string();
    assert!(text.contains("tier 1: hard_block"), "{text}");
    assert!(
        !text.contains("tier 2") && !text.contains("tier 3"),
        "{text}"
    );
    assert_eq!(env.testbed.log().len(), before + 1, "one request: {text}");
    assert_eq!(pool.breaker(0, "testshop").failures, 1);
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
    common::shutdown_and_check(&pool).await;
}

/// With every breaker open a call returns at once, without a request; in
/// `wait` mode it waits for the earliest admission.
#[tokio::test]
async fn every_breaker_open_fails_at_once_or_waits_when_told() {
    for wait in [false, true] {
        let env = shop(2).await;
        let mode = if wait { "wait" } else { "fail" };
        env.write_config_with(
            2,
            true,
            common::free_base_port(2),
            &format!("[breaker]\nthreshold = 1\ncooldown_secs = 2\nwhen_all_open = \"{mode}\"\n"),
        );
        let pool = env.pool();
        env.testbed.set_modes(|m| {
            m.fault = Some(idpool_testbed::Fault::of(
                idpool_testbed::FaultKind::Error,
                None,
                401,
            ))
        });
        reviews(&pool, "B0OPEN")
            .await
            .expect_err("both slots blocked");
        for s in 0..2 {
            assert_eq!(
                pool.breaker(s, "testshop").state,
                idpool::routing::BreakerState::Open
            );
        }
        let sent = env.testbed.stats().total;
        if !wait {
            let arrived = Instant::now();
            let e = reviews(&pool, "B0OPEN").await.expect_err("all open");
            let took = arrived.elapsed();
            assert!(took < Duration::from_millis(50), "took {took:?}");
            assert_eq!(env.testbed.stats().total, sent, "a request was sent");
            assert_eq!(e.kind(), idpool::error::ErrorKind::Unavailable);
            assert!(
                e.retry_after().is_some_and(|r| r <= Duration::from_secs(2)),
                "{e}"
            );
            let text = e.to_string();
            assert!(
                text.contains("`testshop`") && text.contains("2 of 2"),
                "{text}"
            );
        } else {
            env.testbed.set_modes(|m| m.fault = None);
            let arrived = Instant::now();
            let r = reviews(&pool, "B0OPEN")
                .await
                .expect("the earliest admission");
            assert!(
                arrived.elapsed() > Duration::from_millis(1500),
                "{:?}",
                arrived.elapsed()
            );
            assert_eq!(r["pages"][0]["trial"], true, "{r}");
            assert_eq!(
                env.testbed.stats().total,
                sent + 1,
                "the trial is one request"
            );
        }
        common::shutdown_and_check(&pool).await;
    }
}

/// `workers` callers making `get_reviews` calls for `long`; a failed call
/// waits what it was told to (or 50 ms). Returns (ok, failed).
async fn load(pool: &idpool::pool::Pool, workers: usize, long: Duration) -> (usize, usize) {
    let until = Instant::now() + long;
    let runs = (0..workers).map(|w| async move {
        let (mut ok, mut failed) = (0, 0);
        let mut k = 0;
        while Instant::now() < until {
            k += 1;
            match reviews(pool, &format!("B0LOAD{w}X{k}")).await {
                Ok(_) => ok += 1,
                Err(e) => {
                    failed += 1;
                    let wait = e.retry_after().unwrap_or(Duration::from_millis(50));
                    tokio::time::sleep(wait.min(until.saturating_duration_since(Instant::now())))
                        .await;
                }
            }
        }
        (ok, failed)
    });
    futures_util::future::join_all(runs)
        .await
        .into_iter()
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

/// Under a site-wide limit (every identity gets 429s), the strategy's
/// budget halves; once the limit lifts, successes grow it back. pool_status
/// shows it.
#[tokio::test]
async fn the_adaptive_budget_halves_under_a_site_wide_limit_and_recovers_after_it_lifts() {
    let env = shop(2).await;
    // The bundled testshop, growing back faster than the default +1/min per success.
    let text = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("testshop");
    env.write(
        "strategies/testshop.toml",
        &text.replace(
            "global_max_in_flight = 16\n",
            "global_max_in_flight = 16\nincrease_per_success = 20\n",
        ),
    );
    env.testbed.set_modes(|m| {
        m.site_limit = Some(idpool_testbed::SiteLimit {
            max_per_sec: 5,
            retry_after: Some(1),
        })
    });
    let pool = env.pool();
    let budget =
        |pool: &idpool::pool::Pool| pool.reports().status_now()["strategies"]["testshop"].clone();
    assert_eq!(
        budget(&pool)["requests_per_minute"],
        Value::Null,
        "no limit at first"
    );
    let (ok, failed) = load(&pool, 6, Duration::from_secs(4)).await;
    let limited = budget(&pool);
    let stats = env.testbed.stats();
    println!(
        "under the limit: {ok} ok, {failed} failed, budget {limited}, {} answered 429 by the site",
        stats.site_limited
    );
    assert!(stats.site_limited > 0, "the site-wide limit was reached");
    assert!(
        limited["cuts"].as_u64().is_some_and(|c| c >= 1),
        "{limited}"
    );
    let cut = limited["requests_per_minute"]
        .as_f64()
        .expect("a budget in force");
    // The first cut halved the rate actually sent (measured over 10 s).
    let cuts: Vec<Value> = pool
        .events()
        .recent()
        .into_iter()
        .filter(|e| e.kind == "budget")
        .map(|e| e.detail)
        .collect();
    println!("budget events: {cuts:?}");
    assert_eq!(cuts[0]["from"], Value::Null, "{cuts:?}");
    assert_eq!(cuts[0]["why"], "cut", "{cuts:?}");
    let first = cuts[0]["to"].as_f64().expect("a rate");
    let sent_before = stats.per_second.values().sum::<u64>() as f64 * 6.0;
    assert!(
        first >= 6.0 && first <= sent_before / 2.0 + 0.1,
        "{first} vs {sent_before}"
    );

    env.testbed.set_modes(|m| m.site_limit = None);
    let limited_before = env.testbed.stats().site_limited;
    let (ok, failed) = load(&pool, 6, Duration::from_secs(3)).await;
    let grown = budget(&pool);
    println!("after the limit lifted: {ok} ok, {failed} failed, budget {grown}");
    assert_eq!(env.testbed.stats().site_limited, limited_before);
    assert_eq!(grown["cuts"], limited["cuts"], "no pushback: no cut");
    let now = grown["requests_per_minute"]
        .as_f64()
        .expect("still in force");
    assert!(
        now >= cut + 20.0 * ok.min(10) as f64 - 0.1,
        "{ok} successes of +20 a minute should have grown {cut} to more than {now}"
    );
    common::shutdown_and_check(&pool).await;
}

/// A tier's own `block` is a block of that tier only: the call falls
/// through to the next tier, and the attempt names the marker.
#[tokio::test]
async fn a_tiers_own_block_falls_through_and_says_why() {
    let env = shop(1).await;
    let text = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("testshop");
    let tier1 = "[operations.reviews.tier1]\n";
    assert!(text.contains(tier1));
    env.write(
        "strategies/testshop.toml",
        &text.replace(tier1, &format!("{tier1}block = {{ status = [418] }}\n")),
    );
    env.testbed.set_modes(|m| {
        m.fault = Some(idpool_testbed::Fault::of(
            idpool_testbed::FaultKind::Error,
            Some("/ajax/"),
            418,
        ))
    });
    let pool = env.pool();
    let r = reviews(&pool, "B0OWN").await.expect("tier 2 serves");
    let attempts = &r["pages"][0]["attempts"];
    assert_eq!(attempts[0]["outcome"], "tier_block", "{r}");
    assert_eq!(attempts[0]["detail"], "[tier1.block] status 418", "{r}");
    assert_eq!(
        (
            attempts[1]["tier"].as_u64(),
            attempts[1]["outcome"].as_str()
        ),
        (Some(2), Some("ok")),
        "{r}"
    );
    assert_eq!(pool.breaker(0, "testshop").failures, 0);
    common::shutdown_and_check(&pool).await;
}
