//! Marketplaces (issue 34, step 2): one strategy serving two storefronts of
//! the testbed shop, `127.0.0.1` (the default) and `localhost`, each with its
//! own base URL, cookie domain and site state. A slot signed in on the second
//! one through a session import reads members-only reviews there through
//! `get_reviews`, with that marketplace's cookies only; a block on one
//! marketplace leaves the slot admitted on the other.

use crate::common;

use common::{Env, shop, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::request::SessionFormat as Format;
use idpool::routing::BreakerState;
use idpool::strategy::LoginState;
use idpool::tools;
use idpool_testbed::accounts;
use serde_json::{Value, json};

/// The bundled testshop with a second marketplace on `localhost`.
async fn two_marketplaces() -> Env {
    let env = shop(1).await;
    let path = env.path("strategies/testshop.toml");
    let text = std::fs::read_to_string(&path).expect("testshop");
    let port = env.testbed.https_addr.port();
    let text = text.replacen(
        "hosts = [\"127.0.0.1\", \"localhost\"]",
        "hosts = [\"127.0.0.1\"]\nmarketplace = \"127.0.0.1\"",
        1,
    ) + &format!(
        "\n[marketplaces.\"localhost\"]\nhosts = [\"localhost\"]\nbase_url = \"https://localhost:{port}\"\n\
         cookie_domain = \"localhost\"\nlocale = \"en-GB\"\n"
    );
    env.write("strategies/testshop.toml", &text);
    env
}

fn ids(reviews: &Value) -> Vec<String> {
    reviews
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn on_slot_0() -> RunOptions {
    RunOptions {
        slot: Some(0),
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn a_slot_signed_in_on_one_marketplace_reads_members_reviews_there_and_a_block_stays_on_its_own()
 {
    let env = two_marketplaces().await;
    let pool = env.pool();
    let names: Vec<String> = pool
        .registry()
        .all()
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(names, ["testshop", "testshop@localhost"]);

    // Signed in on `localhost` only: the session holds that cookie domain.
    let token = common::sign_in(&env).await;
    let file = format!(
        "# Netscape HTTP Cookie File\n#HttpOnly_localhost\tFALSE\t/\tFALSE\t0\t{}\t{token}\n",
        accounts::COOKIE
    );
    let r = pool
        .services()
        .session_files
        .import_session(0, &file, Format::Auto)
        .await
        .expect("import");
    assert_eq!(
        r.login.get("testshop@localhost"),
        Some(&LoginState::LoggedIn),
        "{r:?}"
    );
    assert_ne!(
        r.login.get("testshop"),
        Some(&LoginState::LoggedIn),
        "{r:?}"
    );

    // Members-only reviews through get_reviews on the second marketplace:
    // named by the item's URL, and by `marketplace`.
    let truth: Vec<String> = common::truth("ACCT1")
        .iter()
        .take(10)
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect();
    let port = env.testbed.https_addr.port();
    let url = format!("https://localhost:{port}/product/ACCT1");
    let by_url = tools::get_reviews::run(pool.leases(), json!({"item": url}), on_slot_0())
        .await
        .expect("reviews on localhost")
        .body;
    assert_eq!(by_url["strategy"], "testshop", "{by_url}");
    assert_eq!(by_url["marketplace"], "localhost", "{by_url}");
    assert_eq!(ids(&by_url["reviews"]), truth);
    let by_arg = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "ACCT1", "strategy": "testshop", "marketplace": "localhost"}),
        on_slot_0(),
    )
    .await
    .expect("reviews with `marketplace`")
    .body;
    assert_eq!(ids(&by_arg["reviews"]), truth);
    // The default marketplace's cookies are not that session: its wall stands.
    let walled = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "ACCT1", "strategy": "testshop"}),
        on_slot_0(),
    )
    .await;
    assert!(walled.is_err(), "{walled:?}");
    assert_eq!(
        pool.leases().sites().login(0, "testshop@localhost").state,
        LoginState::LoggedIn
    );
    assert_ne!(
        pool.leases().sites().login(0, "testshop").state,
        LoginState::LoggedIn
    );
    // A marketplace that does not exist, or one the URL contradicts, is named.
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "ACCT1", "strategy": "testshop", "marketplace": "nowhere.test"}),
        on_slot_0(),
    )
    .await
    .expect_err("unknown marketplace");
    assert!(
        e.to_string().contains("no marketplace `nowhere.test`"),
        "{e}"
    );
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": format!("https://localhost:{port}/product/ACCT1"), "strategy": "testshop", "marketplace": "127.0.0.1"}),
        on_slot_0(),
    )
    .await
    .expect_err("contradiction");
    assert!(e.to_string().contains("marketplace `localhost`"), "{e}");

    // Three captchas on the default marketplace open its breaker for the
    // slot; the other marketplace still admits the slot.
    for _ in 0..3 {
        let _ = tools::get_reviews::run(
            pool.leases(),
            json!({"item": "BAN1", "strategy": "testshop"}),
            on_slot_0(),
        )
        .await;
    }
    assert_eq!(pool.breaker(0, "testshop").state, BreakerState::Open);
    assert_eq!(
        pool.breaker(0, "testshop@localhost").state,
        BreakerState::Closed
    );
    let after = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "ACCT1", "strategy": "testshop", "marketplace": "localhost"}),
        on_slot_0(),
    )
    .await
    .expect("the other marketplace still admits the slot")
    .body;
    assert_eq!(ids(&after["reviews"]), truth);
    let status = pool.reports().status_now();
    assert_eq!(
        status["slots"][0]["login"]["testshop@localhost"]["state"], "logged_in",
        "{status}"
    );
    shutdown_and_check(&pool).await;
}
