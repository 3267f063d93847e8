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

#[tokio::test]
async fn a_slot_calibrated_from_its_browser_sends_the_browsers_navigation_headers() {
    let env = Env::new(1).await;
    let pool = env.pool();
    // The browser's navigation, as the testbed saw it.
    pool.fetch_browser(env.url("/product/B0CAL?via=browser"), None, Some(0))
        .await
        .expect("browser tier");
    let log = env.testbed.log();
    let browser = log
        .iter()
        .find(|e| e.path == "/product/B0CAL?via=browser")
        .expect("browser request logged")
        .clone();
    let nav = idpool::fingerprint::NavigationProfile::from_capture(
        &browser.header_order,
        browser.h2_priority.as_deref(),
    )
    .expect("a browser navigation");
    let slot = &pool.slots()[0];
    slot.calibrate(Some(nav.clone())).expect("calibrate");
    assert_eq!(slot.calibration(), Some(nav));
    pool.fetch(
        FetchRequest::get(env.url("/product/B0CAL?via=http")),
        Some(0),
    )
    .await
    .expect("http tier");
    let log = env.testbed.log();
    let http = log
        .iter()
        .find(|e| e.path == "/product/B0CAL?via=http")
        .expect("http request logged");
    // The browser's first visit had no cookie yet; the HTTP tier's has the
    // one the browser earned, in the place Chromium gives it.
    let strip = |h: &[(String, String)]| -> Vec<(String, String)> {
        h.iter()
            .filter(|(k, _)| k != ":path" && k != "cookie")
            .cloned()
            .collect()
    };
    let names: Vec<&str> = http.header_order.iter().map(|(k, _)| k.as_str()).collect();
    let cookie = names
        .iter()
        .position(|n| *n == "cookie")
        .expect("cookie sent");
    assert_eq!(names.get(cookie + 1), Some(&"priority"), "{names:?}");
    println!(
        "browser: {:?}\nhttp:    {:?}",
        browser.header_order, http.header_order
    );
    assert_eq!(
        strip(&http.header_order),
        strip(&browser.header_order),
        "same header list: names, order, values (the cookie is the same jar's)"
    );
    assert_eq!(
        http.h2_priority, browser.h2_priority,
        "same HEADERS priority"
    );
    assert_eq!(http.akamai, browser.akamai, "same HTTP/2 fingerprint");
    // Back to the emulation's own headers.
    slot.calibrate(None).expect("uncalibrate");
    pool.fetch(
        FetchRequest::get(env.url("/product/B0CAL?via=plain")),
        Some(0),
    )
    .await
    .expect("http tier");
    let log = env.testbed.log();
    let plain = log
        .iter()
        .find(|e| e.path == "/product/B0CAL?via=plain")
        .expect("logged");
    assert_ne!(strip(&plain.header_order), strip(&browser.header_order));
    shutdown_and_check(&pool).await;
}
