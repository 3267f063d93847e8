//! Sticky calls (issue 15, item 4): a multi-page call, and consecutive calls
//! of one MCP session for a strategy, stay on one identity while the site
//! admits it; `sticky: false` goes round-robin.

use crate::common;

use common::{shop, shutdown_and_check, truth};
use idpool::lease::cascade::RunOptions;
use idpool::tools;
use idpool_testbed::data;
use serde_json::{Value, json};

/// An item with at least `pages` pages of reviews.
fn item_with_pages(pages: usize) -> String {
    (0..1000)
        .map(|n| format!("B0STICKY{n}"))
        .find(|id| data::review_count(id) > (pages - 1) * data::PER_PAGE)
        .expect("such an item")
}

fn slots_of(r: &Value) -> Vec<u64> {
    r["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .map(|p| p["slot"].as_u64().expect("slot"))
        .collect()
}

fn launches(pool: &idpool::pool::Pool) -> u64 {
    pool.leases()
        .slots_for_tests()
        .iter()
        .map(|s| s.browser_facts().launches)
        .sum()
}

/// Three pages of a challenged item: one browser, one slot, every review;
/// the same call with `sticky: false` hops and pays for a second browser.
#[tokio::test]
async fn a_multi_page_call_stays_on_one_identity() {
    let env = shop(2).await;
    env.testbed.set_modes(|m| m.challenge = true);
    let item = item_with_pages(3);
    let pool = env.pool();
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": item, "strategy": "testshop", "pages": 3}),
        RunOptions::default(),
    )
    .await
    .expect("three pages")
    .body;
    let slots = slots_of(&r);
    assert_eq!(slots.len(), 3, "{r}");
    assert!(
        slots.iter().all(|s| *s == slots[0]),
        "the call hopped: {slots:?}"
    );
    assert_eq!(r["slot"], slots[0], "one slot, said once");
    assert_eq!(launches(&pool), 1, "one browser for the whole call");
    let want = truth(&item);
    assert_eq!(r["reviews"].as_array().expect("reviews"), &want[..30]);
    shutdown_and_check(&pool).await;

    // A fresh pool (no clearance anywhere), round-robin.
    let _ = std::fs::remove_dir_all(env.path("data"));
    let pool = env.pool();
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": item, "strategy": "testshop", "pages": 3, "sticky": false}),
        RunOptions::default(),
    )
    .await
    .expect("three pages, round-robin")
    .body;
    let slots = slots_of(&r);
    assert!(slots.contains(&0) && slots.contains(&1), "{slots:?}");
    assert!(
        r.get("slot").is_none(),
        "the call moved: no single slot: {r}"
    );
    assert_eq!(launches(&pool), 2, "each identity passed its own challenge");
    shutdown_and_check(&pool).await;
}

/// Consecutive calls of one MCP session stay on its slot; another session
/// and `sticky: false` take turns.
#[tokio::test]
async fn a_sessions_calls_stay_on_its_slot() {
    let env = shop(2).await;
    let pool = env.pool();
    let call = |session: Option<&str>, sticky: bool| {
        let opts = RunOptions {
            session: session.map(str::to_string),
            ..RunOptions::default()
        };
        let pool = pool.clone();
        async move {
            let r = tools::extract::run(
                pool.leases(),
                json!({"strategy": "testshop", "operation": "reviews",
                       "params": {"item": "B0SESSION"}, "sticky": sticky}),
                opts,
            )
            .await
            .expect("call")
            .body;
            r["slot"].as_u64().expect("slot")
        }
    };
    let first = call(Some("a"), true).await;
    for _ in 0..4 {
        assert_eq!(call(Some("a"), true).await, first, "session a moved");
    }
    let rotated: Vec<u64> = [call(None, false).await, call(None, false).await].to_vec();
    assert_ne!(
        rotated[0], rotated[1],
        "round-robin takes turns: {rotated:?}"
    );
    shutdown_and_check(&pool).await;
}
