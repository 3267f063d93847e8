//! Groundwork for identity fidelity (issue 7): the testbed sees how each client
//! sends a request (HTTP/2 fingerprint, HEADERS priority, header order), for a
//! slot's HTTP tier and its real Chromium alike.

mod common;

use common::{Env, shutdown_and_check};
use idpool::http::FetchRequest;

#[tokio::test]
async fn the_testbed_records_h2_fingerprints_and_header_order_of_both_tiers() {
    let env = Env::new(1).await;
    let pool = env.pool();
    pool.fetch(
        FetchRequest::get(env.url("/product/B0FP?via=http")),
        Some(0),
    )
    .await
    .expect("http tier");
    pool.fetch_browser(env.url("/product/B0FP?via=browser"), None, Some(0))
        .await
        .expect("browser tier");
    let reqwest_h1 = reqwest::Client::new()
        .get(format!("{}/product/B0FP?via=h1", env.testbed.http_url()))
        .header("x-first", "1")
        .header("x-second", "2")
        .send()
        .await
        .expect("plain http");
    assert!(reqwest_h1.status().is_success());
    let log = env.testbed.log();
    let entry = |path: &str| {
        log.iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{path} not in the testbed log"))
            .clone()
    };
    let (http, browser, h1) = (
        entry("/product/B0FP?via=http"),
        entry("/product/B0FP?via=browser"),
        entry("/product/B0FP?via=h1"),
    );
    for (who, e) in [("wreq", &http), ("chromium", &browser)] {
        println!(
            "{who}: {} akamai={:?} priority={:?}\n  {:?}",
            e.ja4,
            e.akamai,
            e.h2_priority,
            e.header_order
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
        );
        assert_eq!(e.protocol.as_deref(), Some("h2"), "{who}");
        let akamai = e.akamai.as_deref().unwrap_or("");
        assert!(
            akamai.starts_with("1:65536;") && akamai.ends_with("|m,a,s,p"),
            "{who}: a Chrome-family HTTP/2 fingerprint: {akamai}"
        );
        let names: Vec<&str> = e.header_order.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            &names[..4],
            [":method", ":authority", ":scheme", ":path"],
            "{who}"
        );
        assert!(names.contains(&"user-agent"), "{who}: {names:?}");
    }
    // Chromium's navigation carries its fetch metadata; the priority is set.
    let sec_fetch_mode = browser
        .header_order
        .iter()
        .find(|(k, _)| k == "sec-fetch-mode")
        .map(|(_, v)| v.as_str());
    assert_eq!(sec_fetch_mode, Some("navigate"));
    assert!(browser.h2_priority.is_some());
    // HTTP/1.1 keeps the order and case the client used.
    assert_eq!(h1.protocol.as_deref(), Some("http/1.1"));
    let names: Vec<&str> = h1.header_order.iter().map(|(k, _)| k.as_str()).collect();
    let first = names.iter().position(|n| n.eq_ignore_ascii_case("x-first"));
    let second = names
        .iter()
        .position(|n| n.eq_ignore_ascii_case("x-second"));
    assert!(first.is_some() && first < second, "{names:?}");
    shutdown_and_check(&pool).await;
}
