//! The three-tier cascade and the tools on top of it, against the testbed and
//! real Chromium, with the bundled `testshop` strategy pointed at the test's testbed.

use crate::common;

use std::time::Duration;

use common::{shop, shutdown_and_check, truth};
use idpool::lease::cascade::RunOptions;
use idpool::routing::BreakerState;
use idpool::tools;
use idpool_testbed::{Fault, FaultKind, data};
use serde_json::{Value, json};

fn fault(kind: FaultKind, prefix: &str, status: u16) -> Fault {
    Fault::of(kind, Some(prefix), status)
}

fn tiers_of(page: &Value) -> Vec<(u64, String)> {
    page["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            (
                a["tier"].as_u64().expect("tier"),
                a["outcome"].as_str().expect("outcome").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn get_reviews_returns_ground_truth_through_each_tier_and_the_cascade() {
    let env = shop(1).await;
    let pool = env.pool();
    let item = "B0TESTA1";
    let expect = truth(item);
    assert!(expect.len() > 20, "want several pages");
    for only in [Some(vec![1]), Some(vec![2]), Some(vec![3]), None] {
        let opts = RunOptions {
            only_tiers: only.clone(),
            ..RunOptions::default()
        };
        let r = tools::get_reviews::run(
            pool.leases(),
            json!({"item": item, "strategy": "testshop", "pages": 10}),
            opts,
        )
        .await
        .expect("get_reviews")
        .body;
        assert_eq!(
            r["reviews"].as_array().expect("reviews"),
            &expect,
            "tiers {only:?}"
        );
        assert_eq!(r["has_more"], false);
        let pages = r["pages"].as_array().expect("pages");
        assert_eq!(
            pages.len(),
            expect.len().div_ceil(data::PER_PAGE),
            "stops at the last page"
        );
        let used: Vec<u64> = pages
            .iter()
            .map(|p| p["tier"].as_u64().expect("tier"))
            .collect();
        match &only {
            Some(t) => assert!(used.iter().all(|u| *u == u64::from(t[0])), "{used:?}"),
            None => assert!(
                used.iter().all(|u| *u == 1),
                "the cascade should stay on the cheapest tier: {used:?}"
            ),
        }
    }
    // An item URL picks the strategy by host and yields the id.
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": env.url(&format!("/product/{item}?ref=x")).as_str()}),
        RunOptions::default(),
    )
    .await
    .expect("by URL")
    .body;
    assert_eq!(
        (
            r["strategy"].as_str(),
            r["item"].as_str(),
            r["count"].as_u64()
        ),
        (Some("testshop"), Some(item), Some(10))
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_blocked_tier_is_skipped_until_its_cooldown_passes() {
    let env = shop(1).await;
    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Error, "/ajax/", 403)));
    let pool = env.pool();
    let call = || {
        tools::get_reviews::run(
            pool.leases(),
            json!({"item": "B0SKIP", "strategy": "testshop"}),
            RunOptions {
                slot: Some(0),
                ..Default::default()
            },
        )
    };
    let out = call().await.expect("first");
    assert_eq!(
        out.provenance,
        Some(tools::Provenance {
            slot: 0,
            tier: 2,
            attempts: 2
        }),
        "the tool says who served it, typed: slot 0 on tier 2, after tier 1's block"
    );
    let r = out.body;
    assert_eq!(
        tiers_of(&r["pages"][0]),
        [(1, "tier_block".to_string()), (2, "ok".to_string())],
        "a block of tier 1 only (`[tier_block]` status 403) falls through to tier 2"
    );
    assert_eq!(
        r["pages"][0]["attempts"][0]["detail"], "[tier_block] status 403",
        "the attempt says why"
    );
    let r = call().await.expect("second").body;
    assert_eq!(
        tiers_of(&r["pages"][0]),
        [(1, "skipped".to_string()), (2, "ok".to_string())]
    );
    assert_eq!(
        pool.breaker(0, "testshop").state,
        BreakerState::Closed,
        "one blocked tier is not a breaker failure"
    );
    env.testbed.set_modes(|m| m.fault = None);
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(601)).await;
    tokio::time::resume();
    let r = call().await.expect("after the cooldown").body;
    assert_eq!(tiers_of(&r["pages"][0]), [(1, "ok".to_string())]);
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_challenge_goes_to_the_browser_and_later_calls_stay_cheap() {
    let env = shop(2).await;
    env.testbed.set_modes(|m| m.challenge = true);
    let pool = env.pool();
    let call = || {
        tools::get_reviews::run(
            pool.leases(),
            json!({"item": "B0CH", "strategy": "testshop"}),
            RunOptions {
                slot: Some(0),
                ..Default::default()
            },
        )
    };
    let r = call().await.expect("first").body;
    assert_eq!(
        tiers_of(&r["pages"][0]),
        [(1, "challenge".to_string()), (3, "ok".to_string())]
    );
    assert_eq!(
        r["reviews"].as_array().expect("reviews"),
        &truth("B0CH")[..10]
    );
    assert_eq!(
        r["pages"][0]["requests"], 2,
        "the browser's navigation counts toward the call's request budget"
    );
    let r = call().await.expect("second").body;
    assert_eq!(
        tiers_of(&r["pages"][0]),
        [(1, "ok".to_string())],
        "the browser's clearance should serve tier 1 now"
    );
    shutdown_and_check(&pool).await;
}

/// A browser navigation that fails says why, in the attempt and in the
/// call's error.
#[tokio::test]
async fn a_failed_browser_attempt_carries_the_net_error() {
    let env = shop(1).await;
    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Reset, "/js-reviews/", 0)));
    let pool = env.pool();
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0NETERR", "strategy": "testshop"}),
        RunOptions {
            only_tiers: Some(vec![3]),
            ..RunOptions::default()
        },
    )
    .await
    .expect_err("the connection is reset");
    let msg = e.to_string();
    assert!(
        msg.contains("tier 3: failed: browser navigation to"),
        "{msg}"
    );
    assert!(msg.contains("net::ERR_"), "{msg}");
    shutdown_and_check(&pool).await;
}

/// A block of tier 1, then a challenge on tier 2: the challenge still takes
/// the call to the browser, on the same slot, in one pass (the demo's path).
#[tokio::test]
async fn a_tier_block_then_a_challenge_still_goes_to_the_browser() {
    let env = shop(1).await;
    env.testbed.set_modes(|m| {
        m.challenge = true;
        m.fault = Some(Fault {
            remaining: Some(1),
            ..fault(FaultKind::Error, "/ajax/", 403)
        });
    });
    let pool = env.pool();
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0TBCH", "strategy": "testshop"}),
        RunOptions::default(),
    )
    .await
    .expect("through the browser")
    .body;
    assert_eq!(
        tiers_of(&r["pages"][0]),
        [
            (1, "tier_block".to_string()),
            (2, "challenge".to_string()),
            (3, "ok".to_string())
        ]
    );
    assert_eq!(r["pages"][0]["requests"], 3);
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn empty_items_and_login_walls() {
    let env = shop(2).await;
    let pool = env.pool();
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "EMPTY7", "strategy": "testshop"}),
        RunOptions::default(),
    )
    .await
    .expect("empty")
    .body;
    assert_eq!(
        (r["count"].as_u64(), r["has_more"].as_bool()),
        (Some(0), Some(false))
    );
    for s in 0..2 {
        let b = pool.breaker(s, "testshop");
        assert_eq!((b.state, b.failures), (BreakerState::Closed, 0));
    }
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "LOGIN7", "strategy": "testshop"}),
        RunOptions::default(),
    )
    .await
    .expect_err("login wall");
    let msg = e.to_string();
    // A login wall (`[login]`) ends the slot at once, on every tier, and
    // the call moves on to the other slot, but it is no block of the
    // identity: no breaker failure, the slot is `logged_out` for the site.
    assert_eq!(msg.matches("tier 1: login_required").count(), 2, "{msg}");
    assert!(
        msg.contains("login_required (401), [login] body has"),
        "why: {msg}"
    );
    assert!(!msg.contains("tier 2") && !msg.contains("tier 3"), "{msg}");
    for s in 0..2 {
        assert_eq!(pool.breaker(s, "testshop").failures, 0, "{msg}");
        assert_eq!(
            pool.leases().sites().login(s, "testshop").state,
            idpool::strategy::LoginState::LoggedOut
        );
    }
    // A ban page (a captcha) is a block of the identity: one breaker failure each.
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "BAN7", "strategy": "testshop"}),
        RunOptions::default(),
    )
    .await
    .expect_err("banned");
    let msg = e.to_string();
    assert_eq!(msg.matches("tier 1: hard_block").count(), 2, "{msg}");
    let failures: Vec<u32> = (0..2)
        .map(|s| pool.breaker(s, "testshop").failures)
        .collect();
    assert_eq!(failures, [1, 1], "{msg}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn every_slot_blocked_fails_within_the_budget_and_lists_the_attempts() {
    let env = shop(3).await;
    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Error, "/", 403)));
    let pool = env.pool();
    let e = tools::extract::run(
        pool.leases(),
        json!({"strategy": "testshop", "operation": "product", "params": {"item": "B0ALL"}}),
        RunOptions::default(),
    )
    .await
    .expect_err("blocked everywhere");
    let msg = e.to_string();
    println!("{msg}");
    assert!(
        msg.contains("failed on 2 slot(s)"),
        "the default budget is 2 slots: {msg}"
    );
    assert_eq!(
        msg.matches("tier 2: tier_block (403)").count(),
        2,
        "tier 2 on 2 slots, never the browser after a block: {msg}"
    );
    assert!(!msg.contains("tier 3"), "{msg}");
    let blocked: Vec<u32> = (0..3)
        .map(|s| pool.breaker(s, "testshop").failures)
        .collect();
    assert_eq!(blocked.iter().sum::<u32>(), 2, "{blocked:?}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn extract_and_list_strategies() {
    let env = shop(1).await;
    let pool = env.pool();
    let r = tools::extract::run(
        pool.leases(),
        json!({"strategy": "testshop", "operation": "product", "params": {"item": "B0PROD"}}),
        RunOptions::default(),
    )
    .await
    .expect("product")
    .body;
    assert_eq!(r["items"][0]["title"], data::product_name("B0PROD"));
    assert_eq!(r["items"][0]["ratings"], data::review_count("B0PROD"));
    let e = tools::extract::run(
        pool.leases(),
        json!({"strategy": "testshop", "operation": "nope", "params": {}}),
        RunOptions::default(),
    )
    .await
    .expect_err("unknown op");
    assert!(
        e.to_string().contains(
            "has no operation `nope` (it has: account_reviews, product, reviews, top_reviews)"
        ),
        "{e}"
    );
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0X", "strategy": "testshop", "page": "two"}),
        RunOptions::default(),
    )
    .await
    .expect_err("bad type");
    assert!(
        e.to_string().contains("argument `page` has the wrong type"),
        "{e}"
    );
    let list = tools::list_strategies::run(&pool.registry());
    let shop = list["strategies"]
        .as_array()
        .expect("list")
        .iter()
        .find(|s| s["name"] == "testshop")
        .expect("testshop listed");
    assert_eq!(shop["operations"]["reviews"]["tiers"], json!([1, 2, 3]));
    assert_eq!(
        shop["operations"]["reviews"]["params"]["required"],
        json!(["item"])
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn call_cli_runs_a_tool_and_prints_json() {
    let env = shop(1).await;
    let run = |tool: &str, args: &str| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
            .arg("--config")
            .arg(env.path("idpool.toml"))
            .args(["call", tool, "--args", args])
            .output()
    };
    let out = run(
        "get_reviews",
        r#"{"item": "B0CLI9", "strategy": "testshop", "pages": 2}"#,
    )
    .await
    .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json on stdout");
    assert_eq!(
        v["reviews"].as_array().expect("reviews"),
        &truth("B0CLI9")[..v["count"].as_u64().expect("count") as usize]
    );
    // No daemon answers: the fallback to in-process is said on stderr.
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        said.contains("no daemon answers at") && said.contains("`get_reviews` runs in-process"),
        "{said}"
    );
    let slots = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("idpool.toml"))
        .arg("slots")
        .output()
        .await
        .expect("runs");
    let said = String::from_utf8_lossy(&slots.stderr).into_owned();
    assert!(slots.status.success(), "{said}");
    assert!(said.contains("`slots` runs in-process"), "{said}");
    assert!(
        String::from_utf8_lossy(&slots.stdout).starts_with("slot 0  "),
        "{}",
        String::from_utf8_lossy(&slots.stdout)
    );
    let out = run("nope", "{}").await.expect("runs");
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("unknown tool `nope`")
    );
    let out = run("extract", "{not json").await.expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--args is not valid JSON"));
    let out = run(
        "extract",
        r#"{"strategy": "testshop", "operation": "product", "params": {"item": "LOGIN1"}}"#,
    )
    .await
    .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("extract failed: `product` of `testshop` failed")
    );
}

/// The cascade's tier 3 goes through the same SSRF guard as every request:
/// a tier-3 URL the guard refuses never reaches the browser, and a page the
/// browser was redirected to is refused once it lands.
#[tokio::test]
async fn tier_three_refuses_what_the_guard_refuses_and_redirects_to_it() {
    let env = shop(1).await;
    // The closed list: only strategy hosts (the open web is tests/tools/web.rs's).
    let cfg = std::fs::read_to_string(env.path("idpool.toml")).expect("cfg");
    assert!(cfg.contains("[security]\n"));
    env.write(
        "idpool.toml",
        &cfg.replace("[security]\n", "[security]\npublic_web = false\n"),
    );
    let bundled = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("strategy");
    // Only 127.0.0.1 is the shop's: `localhost` (the same testbed) is not covered.
    let only_ip = bundled.replace(
        r#"hosts = ["127.0.0.1", "localhost"]"#,
        r#"hosts = ["127.0.0.1"]"#,
    );
    assert_ne!(only_ip, bundled, "testshop.toml changed its hosts line");
    let tier3 = "url = \"{base_url}/js-reviews/{item}?page={page}\"";
    assert!(bundled.contains(tier3), "testshop.toml changed its tier 3");
    let elsewhere = format!(
        "{}/js-reviews/B0TESTA1",
        env.url("/")
            .as_str()
            .replace("127.0.0.1", "localhost")
            .trim_end_matches('/')
    );
    let cases = [
        (
            "https://elsewhere.test/js-reviews/{item}".to_string(),
            "elsewhere.test",
        ),
        (
            format!(
                "{{base_url}}/redirect?to={}",
                elsewhere.replace(':', "%3A").replace('/', "%2F")
            ),
            "redirected",
        ),
    ];
    for (url, says) in cases {
        env.write(
            "strategies/testshop.toml",
            &only_ip.replace(tier3, &format!("url = \"{url}\"")),
        );
        let pool = env.pool();
        let opts = RunOptions {
            only_tiers: Some(vec![3]),
            ..RunOptions::default()
        };
        let e = tools::get_reviews::run(
            pool.leases(),
            json!({"item": "B0TESTA1", "strategy": "testshop"}),
            opts,
        )
        .await
        .expect_err("the guard refuses");
        let msg = e.to_string();
        assert_eq!(e.kind(), idpool::ErrorKind::Refused, "{msg}");
        assert!(
            msg.contains(says) && msg.contains("localhost") == (says == "redirected"),
            "{url}: {msg}"
        );
        let facts = pool.leases().slots_for_tests()[0].browser_facts();
        if says == "redirected" {
            assert_eq!(
                facts.launches, 1,
                "the redirect is only seen in the browser"
            );
        } else {
            assert_eq!(facts.launches, 0, "a refused URL launched the browser");
        }
        shutdown_and_check(&pool).await;
    }
}

/// A call sends at most `cascade.max_requests_per_call` requests to the
/// site, whatever its slot budget: the testbed's own log counts them.
#[tokio::test]
async fn a_call_sends_no_more_requests_than_its_budget() {
    let env = shop(3).await;
    env.write_config_with(
        3,
        true,
        common::free_base_port(3),
        "[cascade]\nretry_slots = 3\nmax_requests_per_call = 3\nbackoff_base_ms = 0\n",
    );
    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Error, "/", 403)));
    let pool = env.pool();
    // Requests for the item's pages (a browser's error page may also ask
    // for /favicon.ico, which no budget can stop).
    let sent = || {
        env.testbed
            .log()
            .iter()
            .filter(|e| e.path.starts_with("/product/B0BUDGET"))
            .count()
    };
    let before = sent();
    let e = tools::extract::run(
        pool.leases(),
        json!({"strategy": "testshop", "operation": "product", "params": {"item": "B0BUDGET"}}),
        RunOptions::default(),
    )
    .await
    .expect_err("blocked everywhere");
    let msg = e.to_string();
    assert_eq!(sent() - before, 3, "{msg}");
    assert!(msg.contains("its budget of 3 requests spent"), "{msg}");
    assert_eq!(msg.matches("tier_block (403)").count(), 3, "{msg}");
    // Within budget, a result says what it spent.
    env.testbed.set_modes(|m| m.fault = None);
    let r = tools::extract::run(
        pool.leases(),
        json!({"strategy": "testshop", "operation": "product", "params": {"item": "B0BUDGET"}}),
        RunOptions::default(),
    )
    .await
    .expect("extract")
    .body;
    assert!(
        r["requests"].as_u64().is_some_and(|n| (1..=3).contains(&n)),
        "{r}"
    );
    shutdown_and_check(&pool).await;
}

/// `{base_url}` is the strategy's: no operation may take it as a parameter
/// (a caller's argument would fill the template, unencoded), and a caller's
/// `base_url` argument is refused as an unknown parameter.
#[tokio::test]
async fn a_callers_base_url_never_fills_the_template() {
    let env = shop(1).await;
    let pool = env.pool();
    let elsewhere = env.url("/").as_str().replace("127.0.0.1", "localhost");
    let args = json!({"item": "B0BASE1", "strategy": "testshop", "base_url": elsewhere});
    let e = tools::get_reviews::run(pool.leases(), args, RunOptions::default())
        .await
        .expect_err("not a parameter");
    assert!(e.to_string().contains("no parameter `base_url`"), "{e}");
    shutdown_and_check(&pool).await;
    let bundled = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("strategy");
    let with_param = bundled.replace(
        "[operations.reviews.params.page]",
        "[operations.reviews.params.base_url]\ntype = \"string\"\n\n[operations.reviews.params.page]",
    );
    assert_ne!(with_param, bundled);
    let path = env.path("strategies/testshop.toml");
    env.write("strategies/testshop.toml", &with_param);
    let e = idpool::strategy::TomlStrategy::load(&path).expect_err("reserved");
    assert!(e.to_string().contains("`base_url` is reserved"), "{e}");
}

/// `pool_status` answers from a snapshot: callers between changes share one
/// report, and an event or a request makes the next caller's report new.
#[tokio::test]
async fn pool_status_is_kept_until_the_pool_changes() {
    let env = shop(1).await;
    let pool = env.pool();
    let snap = || pool.reports().status();
    // Nothing changed between two calls: one report (a call may straddle
    // the turn of a second, which builds it again; five tries cannot all).
    assert!(
        (0..5).any(|_| std::sync::Arc::ptr_eq(&snap(), &snap())),
        "the report was built again with nothing changed"
    );
    let before = snap();
    pool.events()
        .emit("reload", None, None, json!({"strategies": 1}));
    assert!(
        !std::sync::Arc::ptr_eq(&before, &snap()),
        "an event left the old report"
    );
    let requests = |v: &Value| v["slots"][0]["requests"].as_u64().expect("requests");
    let before = snap();
    let opts = RunOptions {
        only_tiers: Some(vec![1]),
        ..RunOptions::default()
    };
    tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0TESTA1", "strategy": "testshop"}),
        opts,
    )
    .await
    .expect("get_reviews");
    let after = snap();
    assert!(
        requests(&after) > requests(&before),
        "the report after a request does not count it: {} then {}",
        requests(&before),
        requests(&after)
    );
    // A browser page sends no HTTP request of the slot's own: its browser
    // operations and egress traffic make the report new all the same.
    // (The first page launches the browser, an event; the second is only
    // a page.)
    let ops = |v: &Value| v["slots"][0]["browser"]["total_ops"].as_u64().unwrap_or(0);
    let in_browser = |item: &'static str| {
        let opts = RunOptions {
            only_tiers: Some(vec![3]),
            ..RunOptions::default()
        };
        tools::get_reviews::run(
            pool.leases(),
            json!({"item": item, "strategy": "testshop"}),
            opts,
        )
    };
    in_browser("B0TESTB2")
        .await
        .expect("get_reviews in the browser");
    let before = snap();
    in_browser("B0TESTB3")
        .await
        .expect("get_reviews in the browser");
    let after = snap();
    assert!(
        ops(&after) > ops(&before),
        "the report after a browser page does not count it: {} then {}",
        ops(&before),
        ops(&after)
    );
    // The tool's answer is the snapshot's.
    let out = tools::pool_status::SPEC
        .call(&pool, json!({}), &RunOptions::default())
        .await
        .expect("pool_status");
    assert_eq!(requests(&out.body), requests(&snap()));
    assert!(out.body["as_of"].as_f64().is_some_and(|t| t > 1.7e9));
    shutdown_and_check(&pool).await;
}
