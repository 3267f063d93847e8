//! Issue 55's finding in the live cascade: an operation that
//! `requires_login` was reported `login_required` on a page that showed its
//! reviews, because the page's signed-out navigation decided before its
//! content was read (every real Amazon review page saved signed out came
//! back that way). The fixtures' side of it is in strategies/fixtures/amazon.

use crate::common;

use common::{shop, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::strategy::LoginState;
use idpool::tools;
use serde_json::json;

#[tokio::test]
async fn a_signed_out_page_that_shows_the_reviews_is_read_not_walled() {
    let env = shop(1).await;
    // The public reviews need a signed-in identity here, and no probe asks
    // the slot first: its first page of reviews is what tells.
    let text = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("testshop");
    let needs_login = text
        .replace(
            "item_id_from_url = \"/(?:product|product-reviews|js-reviews)/([A-Za-z0-9_-]+)\"\n\n[operations.reviews.params.item]",
            "item_id_from_url = \"/(?:product|product-reviews|js-reviews)/([A-Za-z0-9_-]+)\"\nrequires_login = true\n\n[operations.reviews.params.item]",
        )
        .replace("probe_url = \"{base_url}/account\"\n", "");
    assert_ne!(needs_login, text, "testshop.toml changed shape");
    env.write("strategies/testshop.toml", &needs_login);
    let pool = env.pool();
    let opts = RunOptions {
        only_tiers: Some(vec![2]),
        ..RunOptions::default()
    };
    let args = json!({"strategy": "testshop", "operation": "reviews", "params": {"item": "P1"}});
    let r = tools::extract::run(pool.leases(), args, opts)
        .await
        .expect("the page's reviews, signed out or not")
        .body;
    let want: Vec<String> = common::truth("P1")
        .iter()
        .take(10)
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    let got: Vec<String> = r["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(got, want, "{r}");
    assert!(r.get("fallback").is_none_or(|f| f.is_null()), "{r}");
    // The page still says who read it: the slot is known signed out.
    assert_eq!(
        pool.leases().sites().login(0, "testshop").state,
        LoginState::LoggedOut
    );
    shutdown_and_check(&pool).await;
}
