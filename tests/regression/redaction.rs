//! Finding 8: a failed scrape left the URL's password and `api_key` in clear
//! in `last_error`, which viewers read; finding 11: `RUST_LOG=debug` logged
//! cookie values (cookie_store's `Set-Cookie` through `log`).

use serde_json::{Value, json};

use crate::common::daemon::{Daemon, add_key, free_port};

/// `POST /api/v1/tools/{tool}` with `key`: the status and the body.
async fn rest_tool(d: &Daemon, key: Option<&str>, tool: &str, args: Value) -> (u16, Value) {
    let mut b = reqwest::Client::new()
        .post(d.url(&format!("/api/v1/tools/{tool}")))
        .json(&args);
    if let Some(k) = key {
        b = b.bearer_auth(k);
    }
    let r = b.send().await.expect("POST /api/v1/tools");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn viewers_read_no_operator_secret_in_last_error_or_events() {
    let env = crate::common::shop(1).await;
    let operator = add_key(&env, "ops", "operator").await;
    let viewer = add_key(&env, "dash", "viewer").await;
    // The env allows private networks: the closed loopback port is reached
    // (and refused by the kernel), as an unreachable host would be.
    let d = Daemon::start(&env, 1, "").await;
    let closed = free_port();
    let url = format!("http://alice:S3cretPw@127.0.0.1:{closed}/feed?api_key=TOPSECRET&page=2");
    // Enough failures in a row for the breaker to open: its event carries
    // the error too.
    for _ in 0..6 {
        let (status, body) = rest_tool(
            &d,
            Some(&operator),
            "scrape",
            json!({"url": url, "mode": "http"}),
        )
        .await;
        assert!(status >= 400, "the scrape fails: {status} {body}");
    }
    let slots = d.get_text("/api/v1/slots", Some(&viewer)).await;
    let v: Value = serde_json::from_str(&slots).expect("slots JSON");
    let last_error = (v["slots"].as_array().into_iter().flatten())
        .find_map(|s| s["last_error"].as_str())
        .unwrap_or_else(|| panic!("a slot with last_error: {slots}"));
    // The failure is there, named by its host, without its secrets.
    assert!(
        last_error.contains(&format!("127.0.0.1:{closed}")),
        "{last_error}"
    );
    let events = d.get_text("/api/v1/events/recent", Some(&viewer)).await;
    let status_page = d.get_text("/", Some(&viewer)).await;
    let pool_status = rest_tool(&d, Some(&viewer), "pool_status", json!({}))
        .await
        .1;
    for (what, text) in [
        ("/api/v1/slots", slots.clone()),
        ("/api/v1/events/recent", events.clone()),
        ("the status page", status_page),
        ("pool_status", pool_status.to_string()),
    ] {
        assert!(
            !text.contains("S3cretPw") && !text.contains("TOPSECRET"),
            "{what} shows a secret: {text}"
        );
    }
    assert!(last_error.contains("[redacted]"), "{last_error}");
    d.stop().await;
}

#[tokio::test]
async fn debug_logs_carry_no_cookie_value() {
    let env = crate::common::shop(1).await;
    let trace = [("RUST_LOG", "trace".to_string())];
    let d = Daemon::start_with(&env, 1, "", "", &trace).await;
    // The testbed gives a new identity a `tb_sid` session cookie; the second
    // scrape sends it back (so the testbed's log tells its value).
    let page = env.url("/product/B0COOKIE1").to_string();
    let scrape = |d: &Daemon| {
        let url = d.url("/api/v1/tools/scrape");
        let page = page.clone();
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .json(&json!({"url": page, "mode": "http"}))
                .send()
                .await
                .expect("POST scrape");
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
        }
    };
    scrape(&d).await;
    scrape(&d).await;
    d.stop().await;
    let first = std::fs::read_to_string(env.path("daemon.log")).expect("log");
    // Again, with the jar read back from disk (which says so at debug: the
    // proof that RUST_LOG was taken at all), and the cookie sent once more.
    let d = Daemon::start_with(&env, 1, "", "", &trace).await;
    scrape(&d).await;
    d.stop().await;
    let second = std::fs::read_to_string(env.path("daemon.log")).expect("log");
    assert!(
        second.contains("jar loaded"),
        "debug logging is on:\n{second}"
    );
    let sid = (env.testbed.log().iter())
        .filter(|e| e.path.starts_with("/product/B0COOKIE1"))
        .find_map(crate::common::tb_sid)
        .expect("a later scrape sends the session cookie back");
    assert!(sid.len() >= 8, "{sid}");
    for log in [first, second] {
        let leaks: Vec<&str> = log.lines().filter(|l| l.contains(&sid)).take(5).collect();
        assert!(
            leaks.is_empty(),
            "the daemon's log holds the cookie value {sid}:\n{}",
            leaks.join("\n")
        );
    }
}
