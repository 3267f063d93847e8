//! Any shop: `get_reviews` and `extract` on a host no strategy covers go
//! through the generic strategy `web` (the testbed's `/wshop/` under the
//! name `shop.web.test`, which the test resolves itself): reviews across
//! pages linked by `rel=next`, in JSON-LD then microdata; reviews a script
//! draws, through the browser tier; the product with its `source` and a
//! stale structured price named as a disagreement; walls judged as on
//! strategy hosts, and the host's robots.txt obeyed.

use crate::common;

use common::any_shop::{HOST, answered, env, got, two_page_item, url};
use common::shutdown_and_check;
use idpool::lease::cascade::RunOptions;
use idpool::tools;
use idpool_testbed::data;
use serde_json::{Value, json};

async fn reviews(pool: &idpool::pool::Pool, args: Value) -> idpool::error::Result<Value> {
    tools::get_reviews::run(pool.leases(), args, RunOptions::default())
        .await
        .map(|o| o.body)
}

#[tokio::test]
async fn reviews_of_a_shop_without_a_strategy_across_pages_and_through_the_browser() {
    let env = env().await;
    let pool = env.pool();

    let id = two_page_item("WEB");
    let r = reviews(&pool, json!({"item": url(&env, &id), "pages": 5}))
        .await
        .expect("get_reviews");
    assert_eq!(r["strategy"], "web", "{r}");
    assert_eq!(got(&r["reviews"]), answered(&id, false));
    assert_eq!(r["has_more"], false);
    let pages = r["pages"].as_array().expect("pages");
    let seen: Vec<(&str, u64, &str)> = (pages.iter())
        .map(|p| {
            (
                p["source"].as_str().unwrap_or_default(),
                p["tier"].as_u64().unwrap_or_default(),
                p["url"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let second = format!("{}?page=2", url(&env, &id));
    assert_eq!(
        seen,
        [
            ("json-ld", 2, url(&env, &id).as_str()),
            ("microdata", 2, second.as_str())
        ],
        "{r}"
    );
    assert!(
        (r["reviews"].as_array().expect("reviews").iter())
            .all(|x| x["source"] == "json-ld" || x["source"] == "microdata")
    );
    // Routed as the open web routes the host: its own key.
    assert!(
        (pool.reports().strategy_names()).contains(&format!("web:{HOST}")),
        "{:?}",
        pool.reports().strategy_names()
    );

    // Reviews a script draws: the HTTP page's structured data counts them
    // and shows none, so the page goes to the slot's browser.
    let js = two_page_item("JS");
    let r = reviews(&pool, json!({"item": url(&env, &js), "pages": 2}))
        .await
        .expect("get_reviews, scripted");
    assert_eq!(got(&r["reviews"]), answered(&js, false));
    let tiers: Vec<(u64, &str)> = (r["pages"].as_array().expect("pages").iter())
        .map(|p| {
            (
                p["tier"].as_u64().unwrap_or_default(),
                p["source"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(tiers, [(3, "page"), (3, "page")], "{r}");

    // One page at a time: `has_more` says a link continues the list.
    let r = reviews(&pool, json!({"item": url(&env, &id)}))
        .await
        .expect("one page");
    assert_eq!(r["count"], data::PER_PAGE);
    assert_eq!(r["has_more"], true);
    // The generic strategy starts where the caller's URL is.
    let e = reviews(&pool, json!({"item": url(&env, &id), "page": 2}))
        .await
        .expect_err("page 2 of a linked list");
    assert!(e.to_string().contains("next-page links"), "{e}");
    // A product without reviews is an empty answer.
    let r = reviews(&pool, json!({"item": url(&env, "EMPTY7")}))
        .await
        .expect("empty");
    assert_eq!(
        (r["count"].as_u64(), r["has_more"].as_bool()),
        (Some(0), Some(false))
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn the_product_its_source_and_a_stale_structured_price() {
    let env = env().await;
    let pool = env.pool();
    let extract = |params: Value| {
        tools::extract::run(
            pool.leases(),
            json!({"strategy": "web", "operation": "product", "params": params}),
            RunOptions::default(),
        )
    };
    let id = "WEB3";
    let r = extract(json!({"url": url(&env, id)}))
        .await
        .expect("product")
        .body;
    let p = &r["items"][0];
    let cents = data::price_cents(id);
    assert_eq!(p["name"], data::product_name(id), "{r}");
    assert_eq!(p["brand"], "Corner Works");
    assert_eq!(p["sku"], format!("CW-{id}"));
    assert_eq!(p["price"].as_f64(), Some(cents as f64 / 100.0));
    assert_eq!(
        (p["currency"].as_str(), p["availability"].as_str()),
        (Some("USD"), Some("InStock"))
    );
    assert_eq!(p["rating"].as_f64(), Some(data::average_rating(id)));
    assert_eq!(p["review_count"], data::review_count(id));
    assert_eq!(p["breadcrumbs"], json!(["Home", "Kitchen"]));
    assert_eq!(p["source"], "json-ld");
    assert!(p.get("disagreements").is_none(), "{p}");
    assert_eq!(
        (r["strategy"].as_str(), r["tier"].as_u64()),
        (Some("web"), Some(2))
    );

    // The page shows another price than its structured data: said, and
    // `trust: page` takes the page's.
    let diff = "DIFF1";
    let shown = idpool_testbed::web_shop::shown_price_cents(diff) as f64 / 100.0;
    let stale = data::price_cents(diff) as f64 / 100.0;
    let r = extract(json!({"url": url(&env, diff)}))
        .await
        .expect("product")
        .body;
    assert_eq!(
        r["items"][0]["disagreements"],
        json!([{"field": "price", "structured": stale, "page": shown}])
    );
    assert_eq!(r["items"][0]["price"].as_f64(), Some(stale));
    let r = extract(json!({"url": url(&env, diff), "trust": "page"}))
        .await
        .expect("trusted")
        .body;
    assert_eq!(r["items"][0]["price"].as_f64(), Some(shown));
    assert_eq!(r["items"][0]["trusted"], "page");
    let e = extract(json!({"url": url(&env, diff), "trust": "either"}))
        .await
        .expect_err("bad trust");
    assert!(e.to_string().contains("`trust`"), "{e}");

    // `web` is listed with its operations.
    let list = tools::list_strategies::run(&pool.registry());
    let web = (list["strategies"].as_array().expect("list").iter())
        .find(|s| s["name"] == "web")
        .cloned()
        .expect("web listed");
    assert!(web["operations"]["product"]["params"]["properties"]["trust"].is_object());
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn walls_on_a_shop_without_a_strategy_are_judged_as_on_strategy_hosts() {
    let env = env().await;
    let pool = env.pool();
    // A sign-in page: `login_required`, not a block.
    let e = reviews(&pool, json!({"item": url(&env, "LOGIN1")}))
        .await
        .expect_err("a sign-in wall");
    assert!(e.to_string().contains("login_required"), "{e}");
    // A captcha page: a block of the identity, counted by its breaker.
    let e = reviews(&pool, json!({"item": url(&env, "BAN1")}))
        .await
        .expect_err("a captcha");
    assert!(e.to_string().contains("hard_block"), "{e}");
    // A bot-management vendor's interstitial: a block, named by its marker.
    let e = reviews(&pool, json!({"item": url(&env, "DD1")}))
        .await
        .expect_err("a vendor's wall");
    assert!(e.to_string().contains("captcha-delivery.com"), "{e}");
    // A page that is a sign-in form by its title (no redirect, no path).
    let e = reviews(&pool, json!({"item": url(&env, "MEMBERS1")}))
        .await
        .expect_err("a sign-in page");
    assert!(
        e.to_string().contains("login_required") && e.to_string().contains("titled"),
        "{e}"
    );
    // The host's robots.txt holds for the generic strategy as for `scrape`.
    let private = format!(
        "https://{HOST}:{}/site/private/secret",
        env.testbed.https_addr.port()
    );
    let e = reviews(&pool, json!({"item": private}))
        .await
        .expect_err("robots.txt disallows it");
    assert!(e.to_string().contains("robots.txt disallows"), "{e}");
    let status = pool.reports().status_now();
    let breaker = &status["slots"][0]["breakers"][format!("web:{HOST}")];
    assert_eq!(
        breaker["failures"], 2,
        "the captcha and the vendor's wall: {status}"
    );
    shutdown_and_check(&pool).await;
}
