//! `scrape`: formats, paging through a huge page, auto mode, and the SSRF guard.

use crate::common;

use common::{Env, shutdown_and_check};
use idpool::tools;
use idpool_testbed::{Fault, FaultKind, data};
use serde_json::{Value, json};

#[tokio::test]
async fn markdown_text_and_links_of_a_testbed_page() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let url = env.url("/product/B0MD");
    let md = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str()}),
        &Default::default(),
    )
    .await
    .expect("markdown")
    .body;
    let content = md["content"].as_str().expect("content");
    assert!(
        content.contains(&format!("# {}", data::product_name("B0MD"))),
        "{content}"
    );
    // Links come out absolute.
    assert!(
        content.contains(&format!(
            "[See all reviews]({})",
            env.url("/product-reviews/B0MD?page=1")
        )),
        "{content}"
    );
    assert_eq!(
        (
            md["via"].as_str(),
            md["tier"].as_u64(),
            md["status"].as_u64()
        ),
        (Some("http"), Some(2), Some(200))
    );
    let text = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "format": "text"}),
        &Default::default(),
    )
    .await
    .expect("text")
    .body;
    assert!(
        text["content"]
            .as_str()
            .expect("text")
            .contains(&data::product_name("B0MD"))
    );
    let links = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "format": "links"}),
        &Default::default(),
    )
    .await
    .expect("links")
    .body;
    assert_eq!(
        links["content"],
        format!(
            "- [Hello, sign in]({})\n- [See all reviews]({})",
            env.url("/signin"),
            env.url("/product-reviews/B0MD?page=1")
        )
    );
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "format": "docx"}),
        &Default::default(),
    )
    .await
    .expect_err("bad format");
    assert!(e.to_string().contains("invalid scrape arguments"), "{e}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn start_index_pages_through_a_huge_page_without_gap_or_overlap() {
    let env = Env::new(1).await;
    env.testbed.set_modes(|m| {
        m.fault = Some(Fault {
            kind: FaultKind::Huge,
            path_prefix: Some("/product/HUGE".into()),
            remaining: None,
            delay_ms: 0,
            status: 200,
            size_mb: 1,
        })
    });
    let pool = env.pool();
    let url = env.url("/product/HUGE1");
    let full = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "max_chars": 2_000_000}),
        &Default::default(),
    )
    .await
    .expect("whole")
    .body;
    let total = full["total_chars"].as_u64().expect("total") as usize;
    assert!(total > 500_000, "{total}");
    let mut joined = String::new();
    let mut start = Some(0u64);
    let mut calls = 0;
    while let Some(s) = start {
        let piece = tools::scrape::run(
            pool.leases(),
            json!({"url": url.as_str(), "max_chars": 100_000, "start_index": s}),
            &Default::default(),
        )
        .await
        .expect("piece")
        .body;
        joined.push_str(piece["content"].as_str().expect("content"));
        // The budget is the answer's: its text is said once.
        assert!(text_chars(&piece) <= 100_000, "{}", text_chars(&piece));
        start = piece["next_start_index"].as_u64();
        calls += 1;
    }
    assert_eq!(calls, total.div_ceil(100_000));
    assert_eq!(joined, full["content"].as_str().expect("content"));

    // Several formats share the budget, each paged on its own to its end.
    let mut joined = [String::new(), String::new()];
    let mut start = Some(0u64);
    while let Some(s) = start {
        let piece = tools::scrape::run(
            pool.leases(),
            json!({"url": url.as_str(), "format": ["markdown", "text"], "max_chars": 100_000, "start_index": s}),
            &Default::default(),
        )
        .await
        .expect("piece of two formats")
        .body;
        assert!(text_chars(&piece) <= 100_000, "{}", text_chars(&piece));
        joined[0].push_str(piece["content"].as_str().expect("content"));
        let text = &piece["formats"]["text"];
        joined[1].push_str(text["content"].as_str().expect("text"));
        start = [&piece, text]
            .iter()
            .filter_map(|p| p["next_start_index"].as_u64())
            .min();
    }
    assert_eq!(joined[0], full["content"].as_str().expect("content"));
    let whole_text = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "format": "text", "max_chars": 2_000_000}),
        &Default::default(),
    )
    .await
    .expect("whole text")
    .body;
    assert_eq!(joined[1], whole_text["content"].as_str().expect("text"));
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn auto_mode_falls_back_to_the_browser_on_a_challenge() {
    let env = Env::new(1).await;
    env.testbed.set_modes(|m| m.challenge = true);
    let pool = env.pool();
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": env.url("/product/B0AUTO").as_str()}),
        &Default::default(),
    )
    .await
    .expect("auto")
    .body;
    assert_eq!(
        (r["via"].as_str(), r["tier"].as_u64()),
        (Some("browser"), Some(3))
    );
    assert!(
        r["content"]
            .as_str()
            .expect("content")
            .contains(&data::product_name("B0AUTO"))
    );
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": env.url("/product/B0AUTO2").as_str(), "mode": "http", "slot": 0}),
        &Default::default(),
    )
    .await
    .map(|r| r.body["via"].clone());
    assert_eq!(
        e.expect("the slot passed the challenge in auto mode"),
        "http"
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn the_guard_refuses_foreign_hosts_private_addresses_files_and_private_redirects() {
    let env = Env::new(1).await;
    // The open web (the default): a name that does not resolve says so;
    // with a closed list, only strategy hosts and allowed_hosts are fetched.
    for (public_web, says) in [
        (true, "cannot resolve `no-strategy.test`"),
        (
            false,
            "host `no-strategy.test` is not covered by any strategy or security.allowed_hosts (security.public_web is off)",
        ),
    ] {
        env.write_config(1, true);
        let cfg = std::fs::read_to_string(env.path("idpool.toml")).expect("cfg");
        let cfg = cfg.replace(
            "[security]\n",
            &format!("[security]\npublic_web = {public_web}\n"),
        );
        env.write("idpool.toml", &cfg);
        let pool = env.pool();
        let e = tools::scrape::run(
            pool.leases(),
            json!({"url": "https://no-strategy.test/page"}),
            &Default::default(),
        )
        .await
        .expect_err("refused");
        assert!(e.to_string().contains(says), "{e}");
        if public_web {
            shutdown_and_check(&pool).await;
            continue;
        }
        let e = tools::scrape::run(
            pool.leases(),
            json!({"url": "file:///etc/passwd"}),
            &Default::default(),
        )
        .await
        .expect_err("file");
        assert!(
            e.to_string().contains("scheme `file` is not allowed"),
            "{e}"
        );
        shutdown_and_check(&pool).await;
    }

    // Guard on: 127.0.0.1 is allowed by name but refused as a private address.
    env.write_config_with(1, true, common::free_base_port(1), "");
    let cfg = std::fs::read_to_string(env.path("idpool.toml"))
        .expect("cfg")
        .replace(
            "allow_private_networks = true",
            "allow_private_networks = false",
        );
    env.write("idpool.toml", &cfg);
    let pool = env.pool();
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": env.url("/").as_str()}),
        &Default::default(),
    )
    .await
    .expect_err("private");
    assert!(
        e.to_string()
            .contains("is a private, loopback or link-local address"),
        "{e}"
    );
    for mode in ["http", "browser"] {
        let e = tools::scrape::run(
            pool.leases(),
            json!({"url": env.url("/").as_str(), "mode": mode}),
            &Default::default(),
        )
        .await
        .expect_err("private");
        assert!(e.to_string().contains("private"), "{mode}: {e}");
    }
    shutdown_and_check(&pool).await;

    // Only the testbed's address is allowed: a redirect to another private address is refused.
    let cfg = cfg.replace(
        "allow_private_networks = false",
        "allow_private_networks = [\"127.0.0.1\"]\nallowed_hosts = [\"127.0.0.3\", \"127.0.0.2\"]",
    );
    env.write("idpool.toml", &cfg);
    let pool = env.pool();
    tools::scrape::run(
        pool.leases(),
        json!({"url": env.url("/").as_str(), "mode": "http"}),
        &Default::default(),
    )
    .await
    .expect("the testbed itself is allowed");
    for target in ["http://127.0.0.3/admin", "http://127.0.0.2:1/"] {
        let url = env.url(&format!("/redirect?to={target}"));
        let e = tools::scrape::run(
            pool.leases(),
            json!({"url": url.as_str(), "mode": "http"}),
            &Default::default(),
        )
        .await
        .expect_err("private redirect");
        let msg = format!("{e}");
        assert!(
            msg.contains("redirect") && msg.contains("private"),
            "{target}: {msg}"
        );
    }
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn hosts_in_allowed_hosts_work_without_a_strategy() {
    let env = Env::new(1).await;
    let _ = std::fs::remove_file(env.path("strategies/alt.toml"));
    let cfg = std::fs::read_to_string(env.path("idpool.toml"))
        .expect("cfg")
        .replace(
            "[security]\n",
            "[security]\nallowed_hosts = [\"localhost\"]\n",
        );
    env.write("idpool.toml", &cfg);
    let pool = env.pool();
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": env.alt_url("/product/B0GEN").as_str()}),
        &Default::default(),
    )
    .await
    .expect("generic fallback")
    .body;
    assert_eq!(r["outcome"], "ok");
    // The generic markers still recognise a captcha page.
    env.testbed
        .set_modes(|m| m.rate_limit = Some(idpool_testbed::RateLimit::captcha(1, 600, 600)));
    tools::scrape::run(
        pool.leases(),
        json!({"url": env.alt_url("/product/B0GEN").as_str(), "mode": "http"}),
        &Default::default(),
    )
    .await
    .expect("first request of the new window");
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": env.alt_url("/product/B0GEN").as_str(), "mode": "http"}),
        &Default::default(),
    )
    .await
    .expect_err("captcha");
    assert!(e.to_string().contains("hard_block"), "{e}");
    shutdown_and_check(&pool).await;
}

/// `scrape` is the cascade: a page every identity is refused on is tried on
/// the next identity within the retry budget (each slot one breaker
/// failure, the error listing every attempt), never in the browser after a
/// block; and a slot whose tier 2 was blocked lately goes straight to its
/// browser. (Before, `scrape` held one lease: one slot, no tier memory.)
#[tokio::test]
async fn scrape_moves_across_identities_and_remembers_a_blocked_tier() {
    let env = common::shop(2).await;
    env.testbed
        .set_modes(|m| m.fault = Some(Fault::of(FaultKind::Error, Some("/product/"), 403)));
    let pool = env.pool();
    let url = env.url("/product/B0SCR");
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str()}),
        &Default::default(),
    )
    .await
    .expect_err("blocked on every identity");
    let msg = e.to_string();
    assert!(msg.contains("failed on 2 slot(s)"), "{msg}");
    assert_eq!(msg.matches("tier 2: tier_block (403)").count(), 2, "{msg}");
    assert!(
        !msg.contains("tier 3"),
        "no block takes a page to the browser: {msg}"
    );
    let failures: u32 = (0..2).map(|s| pool.breaker(s, "testshop").failures).sum();
    assert_eq!(failures, 2, "one breaker failure per identity");
    // The site lets the page through again: slot 0 remembers that tier 2
    // was blocked there and reads the page in its browser.
    // (One failure opens no breaker: the threshold is 3.)
    env.testbed.set_modes(|m| m.fault = None);
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "slot": 0}),
        &Default::default(),
    )
    .await
    .expect("through the browser")
    .body;
    assert_eq!(
        (r["slot"].as_u64(), r["via"].as_str()),
        (Some(0), Some("browser")),
        "{r}"
    );
    shutdown_and_check(&pool).await;
}

/// Issue 39, item 3: Firecrawl's names are aliases of ours. The same call
/// in both vocabularies gives the same content; both forms at once are
/// refused, naming them.
#[tokio::test]
async fn firecrawl_names_give_what_our_names_give() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let url = env.url("/product/B0ALIAS");
    let ours = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "format": ["markdown", "links"], "only_main_content": true}),
        &Default::default(),
    )
    .await
    .expect("our names")
    .body;
    let theirs = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "formats": ["markdown", "links"], "onlyMainContent": true}),
        &Default::default(),
    )
    .await
    .expect("Firecrawl's names")
    .body;
    for key in ["content", "links", "status", "final_url", "format"] {
        assert_eq!(ours[key], theirs[key], "`{key}` differs:\n{ours}\n{theirs}");
    }
    assert!(
        ours["content"].as_str().is_some_and(|c| !c.is_empty()),
        "{ours}"
    );
    // Firecrawl's includeTags / excludeTags: only the title and the price,
    // without the price: the title alone.
    let picked = |args: Value| {
        let pool = &pool;
        async move {
            tools::scrape::run(pool.leases(), args, &Default::default())
                .await
                .expect("picked")
                .body["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }
    };
    let ours = picked(json!({"url": url.as_str(), "include_tags": ["#productTitle", ".price"], "exclude_tags": [".price"]})).await;
    let theirs = picked(json!({"url": url.as_str(), "includeTags": ["#productTitle", ".price"], "excludeTags": [".price"]})).await;
    assert_eq!(ours, theirs);
    let title_only = picked(json!({"url": url.as_str(), "include_tags": ["#productTitle"]})).await;
    let with_price =
        picked(json!({"url": url.as_str(), "include_tags": ["#productTitle", ".price"]})).await;
    assert!(
        !title_only.is_empty() && !title_only.contains('$'),
        "{title_only}"
    );
    assert_eq!(ours, title_only, "exclude_tags took the price out");
    assert!(
        with_price.starts_with(&title_only) && with_price.contains('$'),
        "{with_price}"
    );
    let whole = picked(json!({"url": url.as_str()})).await;
    assert!(whole.len() > with_price.len() * 2, "{whole}");
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "include_tags": ["div["]}),
        &Default::default(),
    )
    .await
    .expect_err("a bad selector");
    assert!(e.message().contains("`include_tags`: `div[`"), "{e}");
    let e = tools::scrape::run(
        pool.leases(),
        json!({"url": url.as_str(), "formats": ["markdown"], "format": "markdown"}),
        &Default::default(),
    )
    .await
    .expect_err("both forms");
    assert!(
        e.message()
            .contains("`formats` is Firecrawl's name for `format`"),
        "{e}"
    );
    shutdown_and_check(&pool).await;
}

/// Characters of page text in a `scrape` answer: `content` and every
/// format's `content`.
fn text_chars(answer: &Value) -> usize {
    let formats = answer["formats"]
        .as_object()
        .into_iter()
        .flat_map(|f| f.values());
    std::iter::once(answer)
        .chain(formats)
        .filter_map(|p| p["content"].as_str())
        .map(|t| t.chars().count())
        .sum()
}
