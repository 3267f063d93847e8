//! The testbed itself, through the pool's HTTP tier: challenge, review
//! endpoints, faults on demand, the control endpoint (the binary's own test
//! is `crates/testbed/tests/process.rs`).

use crate::common;

use std::time::Duration;

use idpool::request::FetchRequest;
use idpool::strategy::Outcome;
use idpool_testbed::{Fault, FaultKind, data};

fn fault(kind: FaultKind) -> Fault {
    Fault {
        kind,
        path_prefix: Some("/product/".into()),
        remaining: Some(1),
        delay_ms: 3000,
        status: 500,
        size_mb: 20,
    }
}

#[tokio::test]
async fn js_challenge_stops_plain_http_and_is_a_challenge_outcome() {
    let env = common::Env::new(1).await;
    env.testbed.set_modes(|m| m.challenge = true);
    let pool = env.pool();
    let f = pool
        .fetch(FetchRequest::get(env.url("/product/B0CH1")), None)
        .await
        .expect("fetch");
    assert_eq!(f.response.status, 503);
    assert_eq!(f.outcome, Outcome::Challenge);
    assert!(f.response.text().contains("tb_clearance"));
    assert_eq!(
        pool.breaker(0, "testbed").failures,
        0,
        "a challenge is not a breaker failure"
    );
}

#[tokio::test]
async fn review_endpoints_agree_on_the_data() {
    let env = common::Env::new(1).await;
    let pool = env.pool();
    let item = "B0DATA7";
    let total = data::review_count(item);

    let page1 = pool
        .fetch(
            FetchRequest::get(env.url(&format!("/product-reviews/{item}?page=1"))),
            None,
        )
        .await
        .expect("html");
    let html = page1.response.text();
    assert_eq!(
        html.matches("class=\"review\"").count(),
        total.min(data::PER_PAGE)
    );
    assert!(html.contains(&data::review(item, 0).title));

    let mut req = FetchRequest::get(env.url("/ajax/reviews"));
    req.method = http::Method::POST;
    req.headers.push((
        "content-type".into(),
        "application/x-www-form-urlencoded".into(),
    ));
    req.body = Some(format!("item={item}&page=1").into());
    let ajax = pool.fetch(req, None).await.expect("ajax");
    let json: serde_json::Value = serde_json::from_slice(&ajax.response.body).expect("json");
    assert_eq!(json["total"], total);
    assert_eq!(json["has_more"], total > data::PER_PAGE);
    assert!(
        json["html"][0]
            .as_str()
            .expect("fragment")
            .contains(&data::review(item, 0).id)
    );

    // Rendered by JavaScript only: no review text in the static HTML.
    let js = pool
        .fetch(
            FetchRequest::get(env.url(&format!("/js-reviews/{item}"))),
            None,
        )
        .await
        .expect("js");
    assert!(!js.response.text().contains(&data::review(item, 0).title));
    assert!(js.response.text().contains("id=\"reviews\""));

    let empty = pool
        .fetch(FetchRequest::get(env.url("/product/EMPTY9")), None)
        .await
        .expect("empty");
    assert_eq!(empty.outcome, Outcome::Empty);
}

#[tokio::test]
async fn faults_become_clear_failures() {
    let env = common::Env::new(1).await;
    env.write(
        "idpool.toml",
        &format!(
            "{}\n[http]\ntimeout_secs = 1\nmax_body_bytes = 1048576\nmax_redirects = 5\n",
            std::fs::read_to_string(env.path("idpool.toml")).expect("cfg")
        ),
    );
    let pool = env.pool();
    let url = env.url("/product/B0FAULT");

    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Reset)));
    let e = pool
        .fetch(FetchRequest::get(url.clone()), None)
        .await
        .expect_err("reset");
    assert!(e.is_retryable(), "{e}");

    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Truncate)));
    let e = pool
        .fetch(FetchRequest::get(url.clone()), None)
        .await
        .expect_err("truncated");
    assert!(e.is_retryable(), "{e}");

    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Huge)));
    let e = pool
        .fetch(FetchRequest::get(url.clone()), None)
        .await
        .expect_err("huge");
    assert!(
        e.to_string().contains("larger than http.max_body_bytes"),
        "{e}"
    );

    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::RedirectLoop)));
    let e = pool
        .fetch(FetchRequest::get(url.clone()), None)
        .await
        .expect_err("loop");
    assert!(e.to_string().contains("redirect"), "{e}");

    env.testbed
        .set_modes(|m| m.fault = Some(fault(FaultKind::Slow)));
    let e = pool
        .fetch(FetchRequest::get(url.clone()), None)
        .await
        .expect_err("slow");
    assert_eq!(e.kind(), idpool::ErrorKind::Timeout, "{e}");

    // After the faults, the same slot works and no breaker moved.
    let ok = pool
        .fetch(FetchRequest::get(url), None)
        .await
        .expect("recovered");
    assert_eq!(ok.outcome, Outcome::Ok);
    assert_eq!(pool.breaker(0, "testbed").failures, 0);
}

#[tokio::test]
async fn redirects_out_of_the_allowed_hosts_are_refused() {
    let env = common::Env::new(1).await;
    // The closed list (security.public_web off).
    let cfg = std::fs::read_to_string(env.path("idpool.toml")).expect("cfg");
    env.write(
        "idpool.toml",
        &cfg.replace("[security]\n", "[security]\npublic_web = false\n"),
    );
    let pool = env.pool();
    // /ap/signin is allowed; the guard checks every hop, so a loop ends at the cap.
    let e = pool
        .fetch(FetchRequest::get(env.url("/loop?n=0")), None)
        .await
        .expect_err("loop");
    assert!(e.to_string().contains("redirect"), "{e}");
    let e = pool
        .fetch(
            FetchRequest::get(url::Url::parse("https://not-a-strategy.test/").expect("url")),
            None,
        )
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), idpool::ErrorKind::Refused);
}

/// The limits issue 14's tests need: a per-identity limit answered with a
/// chosen status and `Retry-After`, a site-wide limit, and requests counted
/// per second.
#[tokio::test]
async fn per_identity_and_site_wide_limits_and_the_per_second_count() {
    let env = common::Env::new(1).await;
    let http = env.testbed.http_url();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let get = |sid: &'static str| {
        client
            .get(format!("{http}/product/B0LIM"))
            .header("cookie", format!("tb_sid={sid}"))
            .send()
    };
    env.testbed.set_modes(|m| {
        m.rate_limit = Some(idpool_testbed::RateLimit {
            max: 3,
            window_secs: 60,
            block_secs: 20,
            status: 429,
            retry_after: Some(7),
        })
    });
    for _ in 0..3 {
        assert_eq!(get("one").await.expect("get").status().as_u16(), 200);
    }
    let limited = get("one").await.expect("get");
    assert_eq!(limited.status().as_u16(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");
    assert!(
        limited
            .text()
            .await
            .expect("body")
            .contains("validateCaptcha")
    );
    // Another identity is not limited by the first one's count.
    assert_eq!(get("two").await.expect("get").status().as_u16(), 200);

    env.testbed.shared.reset();
    env.testbed.set_modes(|m| {
        m.rate_limit = None;
        m.site_limit = Some(idpool_testbed::SiteLimit {
            max_per_sec: 3,
            retry_after: None,
        });
    });
    let mut statuses = Vec::new();
    for sid in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"] {
        let r = get(sid).await.expect("get");
        assert!(r.headers().get("retry-after").is_none());
        statuses.push(r.status().as_u16());
    }
    let stats = env.testbed.stats();
    let counted: u64 = stats.per_second.values().sum();
    assert_eq!(counted, 10, "{:?}", stats.per_second);
    // Ten requests span at most three seconds of at most 3 admitted each.
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert!(
        refused >= 1 && refused as u64 == stats.site_limited,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| matches!(s, 200 | 429)),
        "{statuses:?}"
    );
}

/// The shop's accounts (issue 16, item 6): `ACCT…` reviews behind a sign-in
/// wall, the form refusing wrong credentials, the session cookie opening
/// the wall on every tier's endpoint, the account line on each page, and
/// expiry on demand.
#[tokio::test]
async fn accounts_sign_in_open_the_wall_and_expire() {
    use idpool_testbed::accounts;
    let env = common::Env::new(1).await;
    let pool = env.pool();
    let get = |path: &str| FetchRequest::get(env.url(path));
    let sign_in = |password: &str| {
        let mut r = get("/signin");
        r.method = http::Method::POST;
        r.headers.push((
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("email", accounts::EMAIL)
            .append_pair("password", password)
            .append_pair("return_to", "/product-reviews/ACCT1")
            .finish();
        r.body = Some(body.into());
        r
    };
    let walled = pool
        .fetch(get("/product-reviews/ACCT1"), None)
        .await
        .expect("fetch");
    assert_eq!(walled.response.final_url.path(), "/signin");
    let text = walled.response.text();
    assert!(
        text.contains("id=\"signin\"") && text.contains("Hello, sign in"),
        "{text}"
    );
    let top = pool
        .fetch(get("/product/ACCT1"), None)
        .await
        .expect("product");
    assert!(
        top.response.text().contains("class=\"review\""),
        "the product page shows top reviews"
    );

    let wrong = pool.fetch(sign_in("guess"), None).await.expect("post");
    assert!(wrong.response.final_url.as_str().contains("failed=1"));
    assert!(wrong.response.text().contains("signin-error"));
    let right = pool
        .fetch(sign_in(accounts::PASSWORD), None)
        .await
        .expect("post");
    assert_eq!(right.response.final_url.path(), "/product-reviews/ACCT1");
    let text = right.response.text();
    assert!(
        text.contains("data-signed-in=\"true\"") && text.contains("class=\"review\""),
        "{text}"
    );
    assert_eq!(env.testbed.shared.accounts.signins(), 1);
    let mut ajax = get("/ajax/reviews");
    ajax.method = http::Method::POST;
    ajax.headers.push((
        "content-type".into(),
        "application/x-www-form-urlencoded".into(),
    ));
    ajax.body = Some("item=ACCT1&page=1".into());
    let a = pool.fetch(ajax.clone(), None).await.expect("ajax");
    assert_eq!(a.response.status, 200, "{}", a.response.text());

    assert_eq!(env.testbed.expire_sessions(), 1);
    let again = pool
        .fetch(get("/product-reviews/ACCT1"), None)
        .await
        .expect("fetch");
    assert_eq!(again.response.final_url.path(), "/signin");
    let a = pool.fetch(ajax, None).await.expect("ajax");
    assert_eq!(a.response.status, 401);
}
