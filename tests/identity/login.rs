//! Account identities (issue 16, items 2, 3 and 6): a slot signed in on the
//! testbed shop through an imported session (each format, holding a cookie
//! from a real sign-in), its login state per strategy, members-only reviews
//! through every tier, login walls that move a call instead of benching
//! identities, the fallback operation, and session expiry.

use crate::common;

use common::daemon::{Daemon, Mcp, add_key};
use common::{Env, shop, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::request::SessionFormat as Format;
use idpool::strategy::{LoginState, Outcome};
use idpool::tools;
use idpool_testbed::accounts;
use serde_json::{Value, json};

/// Sign in on the testbed as the test account; the session cookie's value.
async fn sign_in(env: &Env) -> String {
    common::sign_in(env).await
}

/// The session cookie in each format's real shape.
fn session_file(format: Format, token: &str) -> String {
    let c = accounts::COOKIE;
    match format {
        Format::Netscape => format!("# Netscape HTTP Cookie File\n#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\t{c}\t{token}\n"),
        Format::Json => json!([{"domain": "127.0.0.1", "hostOnly": true, "httpOnly": true, "name": c,
            "path": "/", "sameSite": "unspecified", "secure": false, "session": true, "storeId": "0",
            "value": token}])
        .to_string(),
        _ => json!({"cookies": [{"name": c, "value": token, "domain": "127.0.0.1", "path": "/",
            "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}], "origins": []})
        .to_string(),
    }
}

fn members_reviews(item: &str) -> Value {
    json!({"strategy": "testshop", "operation": "account_reviews", "params": {"item": item}})
}

fn ids(items: &Value) -> Vec<String> {
    items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn each_format_signs_a_slot_in_and_members_reviews_come_through_every_tier() {
    let env = shop(1).await;
    let pool = env.pool();
    assert_eq!(
        pool.leases().sites().login(0, "testshop").state,
        LoginState::Unknown
    );
    for format in [Format::Netscape, Format::Json, Format::StorageState] {
        // The last file's session is dead: only this one can sign the slot in.
        env.testbed.expire_sessions();
        let token = sign_in(&env).await;
        let r = pool
            .services()
            .session_files
            .import_session(0, &session_file(format, &token), Format::Auto)
            .await
            .expect("import");
        assert_eq!(
            r.login.get("testshop"),
            Some(&LoginState::LoggedIn),
            "{format:?}: {r:?}"
        );
    }
    let state = pool.leases().sites().login(0, "testshop");
    assert!(
        state
            .evidence
            .as_deref()
            .is_some_and(|e| e.contains("[session.logged_in]")),
        "{state:?}"
    );
    let truth: Vec<String> = common::truth("ACCT1")
        .iter()
        .take(10)
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect();
    for tier in [1u8, 2, 3] {
        let opts = RunOptions {
            only_tiers: Some(vec![tier]),
            ..RunOptions::default()
        };
        let r = tools::extract::run(pool.leases(), members_reviews("ACCT1"), opts)
            .await
            .unwrap_or_else(|e| panic!("tier {tier}: {e}"));
        assert_eq!(
            r.provenance.map(|p| p.tier),
            Some(tier),
            "the typed provenance names the tier that served"
        );
        let r = r.body;
        assert_eq!(r["tier"], tier, "{r}");
        assert_eq!(ids(&r["items"]), truth, "tier {tier}");
        assert!(r.get("fallback").is_none(), "{r}");
    }
    let status = pool.reports().status_now();
    assert_eq!(
        status["slots"][0]["login"]["testshop"]["state"], "logged_in",
        "{status}"
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_login_wall_moves_the_call_and_without_a_signed_in_slot_the_fallback_runs() {
    let env = shop(2).await;
    let pool = env.pool();
    let token = sign_in(&env).await;
    pool.services()
        .session_files
        .import_session(0, &session_file(Format::Netscape, &token), Format::Auto)
        .await
        .expect("slot 0 signs in");
    // Slot 1 is asked first (this MCP session's last call was there):
    // signed out, so the call moves to slot 0.
    pool.leases().sites().remember("s", "testshop", 1);
    let opts = RunOptions {
        session: Some("s".into()),
        ..RunOptions::default()
    };
    let r = tools::extract::run(pool.leases(), members_reviews("ACCT2"), opts)
        .await
        .expect("served by the signed-in slot")
        .body;
    assert_eq!(r["slot"], 0, "{r}");
    let walled: Vec<&Value> = r["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter(|a| a["outcome"] == Outcome::LoginRequired.as_str())
        .collect();
    assert!(
        walled
            .iter()
            .any(|a| a["slot"] == 1 && a["detail"].is_string()),
        "{r}"
    );
    assert_eq!(
        pool.leases().sites().login(1, "testshop").state,
        LoginState::LoggedOut
    );
    for s in 0..2 {
        assert_eq!(
            pool.breaker(s, "testshop").failures,
            0,
            "a login wall is no block"
        );
    }

    // The session expires: slot 0 meets the wall, no slot is signed in, and
    // the product page's top reviews come back, labelled.
    env.testbed.expire_sessions();
    let r = tools::extract::run(
        pool.leases(),
        members_reviews("ACCT2"),
        RunOptions::default(),
    )
    .await
    .expect("the fallback")
    .body;
    assert_eq!(r["fallback"]["operation"], "top_reviews", "{r}");
    assert_eq!(r["fallback"]["instead_of"], "account_reviews");
    assert_eq!(r["operation"], "account_reviews");
    let top: Vec<String> = common::truth("ACCT2")
        .iter()
        .take(3)
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(ids(&r["items"]), top, "{r}");
    assert_eq!(
        pool.leases().sites().login(0, "testshop").state,
        LoginState::LoggedOut
    );
    let change =
        pool.events().recent().into_iter().find(|e| {
            e.kind == "login_state" && e.slot == Some(0) && e.detail["to"] == "logged_out"
        });
    assert!(change.is_some_and(|e| e.detail["from"] == "logged_in"));
    for s in 0..2 {
        assert_eq!(pool.breaker(s, "testshop").failures, 0);
    }
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn without_a_fallback_the_call_fails_at_once_naming_the_fix() {
    let env = shop(1).await;
    let text = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("testshop");
    env.write(
        "strategies/testshop.toml",
        &text.replace("fallback_operation = \"top_reviews\"\n", ""),
    );
    let pool = env.pool();
    let e = tools::extract::run(
        pool.leases(),
        members_reviews("ACCT3"),
        RunOptions::default(),
    )
    .await
    .expect_err("nobody is signed in");
    assert!(e.to_string().contains("needs a signed-in identity"), "{e}");
    // Now known to be signed out: the next call sends nothing at all.
    let before = env.testbed.log().len();
    let e = tools::extract::run(
        pool.leases(),
        members_reviews("ACCT3"),
        RunOptions::default(),
    )
    .await
    .expect_err("still nobody");
    let msg = e.to_string();
    assert!(msg.contains("slot 0: logged_out"), "{msg}");
    assert!(
        msg.contains("idpool login --slot N --strategy testshop")
            && msg.contains("idpool session import"),
        "{msg}"
    );
    assert_eq!(env.testbed.log().len(), before, "a request was sent");
    shutdown_and_check(&pool).await;
}

/// The daemon's view: `/metrics` carries the login state, expiry flips it.
#[tokio::test]
async fn the_daemon_reports_login_states_in_metrics() {
    let env = shop(1).await;
    let admin = add_key(&env, "root", "admin").await;
    let d = Daemon::start(&env, 1, "").await;
    let http = reqwest::Client::new();
    let token = sign_in(&env).await;
    let r = http
        .post(d.url("/api/v1/slots/0/session-import"))
        .bearer_auth(&admin)
        .json(&json!({"session": session_file(Format::Netscape, &token)}))
        .send()
        .await
        .expect("import");
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["login"]["testshop"], "logged_in", "{body}");
    let metric = |state: &str| {
        format!("idpool_slot_login_state{{slot=\"0\",strategy=\"testshop\",state=\"{state}\"}} 1")
    };
    let metrics = || async {
        http.get(d.url("/metrics"))
            .bearer_auth(&admin)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    };
    let m = metrics().await;
    assert!(m.contains(&metric("logged_in")), "{m}");
    env.testbed.expire_sessions();
    let mut c = Mcp::new(&d, Some(&admin));
    assert!(c.initialize().await.status.is_success());
    let r = c.tool(1, "extract", members_reviews("ACCT4")).await;
    assert_eq!(
        r["result"]["structuredContent"]["fallback"]["operation"], "top_reviews",
        "{r}"
    );
    let m = metrics().await;
    assert!(m.contains(&metric("logged_out")), "{m}");
    d.stop().await;
}

/// While a person signs slot 0 in (its browser held by the live view), a
/// browser call goes to slot 1 and says why; once the session ends, slot 0's
/// browser serves again.
#[tokio::test]
async fn a_slot_being_signed_in_lends_its_browser_to_no_call() {
    use idpool::services::LoginLimits;
    let env = shop(2).await;
    let pool = env.pool();
    let session = pool
        .services()
        .logins
        .start(0, "testshop", LoginLimits::default())
        .expect("a login session");
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while session.status().state != "waiting" {
            assert!(!session.status().done, "{:?}", session.status());
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the sign-in page is open");
    assert!(pool.services().logins.open_on(0) && !pool.services().logins.open_on(1));
    let product =
        || json!({"strategy": "testshop", "operation": "product", "params": {"item": "B0LIVE"}});
    pool.leases().sites().remember("s", "testshop", 0);
    let opts = RunOptions {
        only_tiers: Some(vec![3]),
        session: Some("s".into()),
        ..RunOptions::default()
    };
    let r = tools::extract::run(pool.leases(), product(), opts)
        .await
        .expect("served elsewhere")
        .body;
    assert_eq!(r["slot"], 1, "{r}");
    let skipped = r["attempts"].as_array().expect("attempts").iter().any(|a| {
        a["slot"] == 0
            && a["outcome"] == "skipped"
            && a["detail"]
                .as_str()
                .is_some_and(|d| d.contains("signing this slot in"))
    });
    assert!(skipped, "{r}");
    session.cancel();
    assert_eq!(session.done().await.state, "cancelled");
    assert!(!pool.services().logins.open_on(0));
    let opts = RunOptions {
        only_tiers: Some(vec![3]),
        slot: Some(0),
        ..RunOptions::default()
    };
    let r = tools::extract::run(pool.leases(), product(), opts)
        .await
        .expect("slot 0 again")
        .body;
    assert_eq!(r["slot"], 0, "{r}");
    shutdown_and_check(&pool).await;
}

/// Issue 55: with nobody signed in, an operation that `requires_login`
/// still asks its page once, signed out: what the page shows is the result
/// (a members' item whose page is public comes back with its reviews, no
/// fallback); a sign-in wall runs the fallback and is remembered, so the
/// next call goes to the fallback without asking the walled page again.
#[tokio::test]
async fn with_nobody_signed_in_the_page_decides_once_and_a_wall_is_remembered() {
    let env = shop(1).await;
    let pool = env.pool();
    // Any page of the shop says the slot is signed out.
    let top = json!({"strategy": "testshop", "operation": "top_reviews", "params": {"item": "P1"}});
    tools::extract::run(pool.leases(), top, RunOptions::default())
        .await
        .expect("top reviews");
    assert_eq!(
        pool.leases().sites().login(0, "testshop").state,
        LoginState::LoggedOut
    );
    // A page that shows its reviews to everyone: read, not a fallback.
    let r = tools::extract::run(pool.leases(), members_reviews("P1"), RunOptions::default())
        .await
        .expect("the public page's reviews")
        .body;
    assert!(r.get("fallback").is_none_or(Value::is_null), "{r}");
    let want: Vec<String> = common::truth("P1")
        .iter()
        .take(10)
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(ids(&r["items"]), want, "{r}");
    // A members-only item: one signed-out request meets the wall, the
    // fallback answers.
    let asked = |from: usize| {
        env.testbed.log()[from..]
            .iter()
            .filter(|e| e.path.contains("ACCT6") && !e.path.starts_with("/product/"))
            .count()
            + env.testbed.log()[from..]
                .iter()
                .filter(|e| e.path.starts_with("/ajax/reviews"))
                .count()
    };
    let before = env.testbed.log().len();
    let r = tools::extract::run(
        pool.leases(),
        members_reviews("ACCT6"),
        RunOptions::default(),
    )
    .await
    .expect("the fallback")
    .body;
    assert_eq!(r["fallback"]["operation"], "top_reviews", "{r}");
    assert_eq!(
        asked(before),
        1,
        "one signed-out request for the walled page"
    );
    // Remembered: the next call does not ask the walled page again.
    let before = env.testbed.log().len();
    let r = tools::extract::run(
        pool.leases(),
        members_reviews("ACCT6"),
        RunOptions::default(),
    )
    .await
    .expect("the fallback again")
    .body;
    assert_eq!(r["fallback"]["operation"], "top_reviews", "{r}");
    assert_eq!(asked(before), 0, "the wall is remembered");
    assert_eq!(
        pool.breaker(0, "testshop").failures,
        0,
        "a wall is no block"
    );
    // A retired identity asks anew.
    pool.leases().retire(0, "test").await.expect("retired");
    let before = env.testbed.log().len();
    let r = tools::extract::run(
        pool.leases(),
        members_reviews("ACCT6"),
        RunOptions::default(),
    )
    .await
    .expect("the fallback after retirement")
    .body;
    assert_eq!(r["fallback"]["operation"], "top_reviews", "{r}");
    assert_eq!(asked(before), 1, "a new identity asks the page once");
    shutdown_and_check(&pool).await;
}
