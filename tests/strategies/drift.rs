//! Selector drift, as an operator meets it: the shop renames the review
//! rating's class (the testbed's layout change); within a window of calls the
//! field is `drifting` in `pool_status`, `/metrics` and an event, and results
//! carry the warning; after the shop changes back it clears within a window.

use crate::common;

use common::daemon::Daemon;
use serde_json::{Value, json};

async fn reviews(d: &Daemon, item: &str) -> Value {
    let r = reqwest::Client::new()
        .post(d.url("/api/v1/tools/get_reviews"))
        .json(&json!({"item": item, "strategy": "testshop"}))
        .send()
        .await
        .expect("get_reviews");
    assert_eq!(r.status(), 200);
    r.json().await.expect("JSON")
}

async fn get(d: &Daemon, path: &str) -> String {
    reqwest::get(d.url(path))
        .await
        .expect("GET")
        .text()
        .await
        .expect("text")
}

fn rating_warned(r: &Value) -> bool {
    r["warnings"].as_array().is_some_and(|w| {
        w.iter()
            .any(|w| w.as_str().is_some_and(|s| s.contains("`rating`")))
    })
}

async fn rating_drifting(d: &Daemon) -> Value {
    let status: Value = serde_json::from_str(&get(d, "/api/v1/slots").await).expect("JSON");
    status["drift"]["testshop"]["reviews"]["fields"]["rating"].clone()
}

/// Kinds of the recent events about field `rating`.
async fn rating_events(d: &Daemon) -> Vec<String> {
    let v: Value = serde_json::from_str(&get(d, "/api/v1/events/recent").await).expect("JSON");
    v["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["detail"]["field"] == "rating")
        .filter_map(|e| e["kind"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_renamed_field_drifts_within_a_window_and_clears_after_it() {
    let env = common::shop(1).await;
    let d = Daemon::start(&env, 1, "").await;
    // Its history: twenty pages where every review has its rating.
    for i in 0..20 {
        let r = reviews(&d, &format!("B0DRIFT{i:02}")).await;
        assert!(r["count"].as_u64().unwrap_or(0) > 0, "{r}");
        assert!(r["reviews"][0]["rating"].is_number(), "{r}");
        assert!(r.get("warnings").is_none(), "no warning yet: {r}");
    }
    assert_eq!(rating_drifting(&d).await["drifting"], false);

    env.testbed.set_modes(|m| m.layout_change = true);
    let mut drifted_after = None;
    for i in 0..10 {
        let r = reviews(&d, &format!("B0LAYOUT{i:02}")).await;
        assert!(
            r["reviews"][0]["rating"].is_null(),
            "the selector misses now: {r}"
        );
        if rating_warned(&r) {
            drifted_after = Some(i + 1);
            break;
        }
    }
    let n = drifted_after.expect("drifting within 10 calls");
    assert!(n <= 10, "{n}");
    let f = rating_drifting(&d).await;
    assert_eq!(f["drifting"], true, "{f}");
    assert_eq!(f["baseline"], 0.0, "{f}");
    let metrics = get(&d, "/metrics").await;
    assert!(
        metrics.contains(
            "idpool_extract_field_drifting{strategy=\"testshop\",operation=\"reviews\",field=\"rating\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains(
        "idpool_extract_field_drifting{strategy=\"testshop\",operation=\"reviews\",field=\"title\"} 0"
    ));
    assert!(rating_events(&d).await.contains(&"drifting".to_string()));

    env.testbed.set_modes(|m| m.layout_change = false);
    let mut cleared_after = None;
    for i in 0..10 {
        let r = reviews(&d, &format!("B0BACK{i:02}")).await;
        assert!(r["reviews"][0]["rating"].is_number(), "{r}");
        if !rating_warned(&r) {
            cleared_after = Some(i + 1);
            break;
        }
    }
    assert!(
        cleared_after.is_some(),
        "cleared within the window of 10 pages"
    );
    assert_eq!(rating_drifting(&d).await["drifting"], false);
    assert!(
        rating_events(&d)
            .await
            .contains(&"drift_cleared".to_string())
    );
    let metrics = get(&d, "/metrics").await;
    assert!(metrics.contains(
        "idpool_extract_field_drifting{strategy=\"testshop\",operation=\"reviews\",field=\"rating\"} 0"
    ));
    d.stop().await;
}

#[tokio::test]
async fn an_operations_expect_rules_are_checked_on_live_results() {
    let env = common::shop(1).await;
    let shop = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("testshop");
    env.write(
        "strategies/testshop.toml",
        &format!(
            "{shop}\n[operations.reviews.expect]\nmin_items = 15\n\
             [operations.reviews.expect.fields.rating]\nrange = [1, 4]\n"
        ),
    );
    let pool = env.pool();
    let r = idpool::tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0TESTA1", "strategy": "testshop"}),
        idpool::lease::cascade::RunOptions::default(),
    )
    .await
    .expect("get_reviews")
    .body;
    let warnings: Vec<String> = r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    assert!(
        warnings
            .contains(&"testshop/reviews expect: items: expected at least 15, got 10".to_string()),
        "{warnings:?}"
    );
    // Every review rated 5 breaks the range, and is named.
    let fives: Vec<usize> = r["reviews"]
        .as_array()
        .expect("reviews")
        .iter()
        .enumerate()
        .filter(|(_, v)| v["rating"] == 5)
        .map(|(i, _)| i)
        .collect();
    assert!(!fives.is_empty(), "the ground truth has 5-star reviews");
    for i in fives {
        let want =
            format!("testshop/reviews expect: item {i} `rating`: expected a number in 1..4, got 5");
        assert!(warnings.contains(&want), "{want} in {warnings:?}");
    }
    common::shutdown_and_check(&pool).await;
}
