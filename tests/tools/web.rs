//! The open web with the default config: any public host through the generic
//! strategy, private addresses refused by both tiers, `robots.txt` obeyed
//! and its refusals naming the rule, politeness per host. "Public" hosts are
//! `*.web.test` names the test resolves itself (`security.resolve`) to the
//! testbed on 127.0.0.1; 127.0.0.2 stands in for a private address.

use crate::common;

use common::{Env, free_base_port, shutdown_and_check};
use idpool::tools;
use idpool_testbed::site;
use serde_json::{Value, json};

/// The default `[security]` and `[web]`, except that the test names where
/// its hosts live and that only the testbed's own address is allowed.
fn open_web(env: &Env, extra: &str) {
    open_web_slots(env, 1, extra);
}

fn open_web_slots(env: &Env, slots: usize, extra: &str) {
    env.write_config_private(
        slots,
        true,
        free_base_port(slots),
        "[\"127.0.0.1\"]",
        &format!(
            "[security.resolve]\n\"news.web.test\" = \"127.0.0.1\"\n\"intranet.web.test\" = \"127.0.0.2\"\n\n{extra}"
        ),
    );
}

fn web_url(env: &Env, host: &str, path: &str) -> String {
    format!("https://{host}:{}{path}", env.testbed.https_addr.port())
}

async fn scrape(pool: &idpool::pool::Pool, args: Value) -> idpool::error::Result<Value> {
    tools::scrape::run(pool.leases(), args, &Default::default())
        .await
        .map(|o| o.body)
}

#[tokio::test]
async fn a_public_host_works_by_default_private_addresses_and_robots_rules_are_refused() {
    let env = Env::new(1).await;
    open_web(&env, "[web]\nmin_interval_ms = 0\n");
    let pool = env.pool();
    let article = web_url(&env, "news.web.test", "/site/article");
    for mode in ["http", "browser"] {
        let r = scrape(&pool, json!({"url": article, "mode": mode}))
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            (r["outcome"].as_str(), r["via"].as_str()),
            (Some("ok"), Some(mode))
        );
        assert!(
            r["content"]
                .as_str()
                .unwrap_or("")
                .contains(site::ARTICLE_P1),
            "{mode}: {r}"
        );
    }
    // Each open-web host is routed on its own (its breakers, its politeness).
    assert!(
        pool.reports()
            .strategy_names()
            .contains(&"web:news.web.test".to_string()),
        "{:?}",
        pool.reports().strategy_names()
    );

    // A name resolving to a private address: refused by the HTTP tier's
    // guard and by the browser's egress, before any connection.
    for mode in ["http", "browser"] {
        let e = scrape(
            &pool,
            json!({"url": web_url(&env, "intranet.web.test", "/site/"), "mode": mode}),
        )
        .await
        .expect_err("private");
        let msg = e.to_string();
        assert!(
            msg.contains("127.0.0.2") && msg.contains("private"),
            "{mode}: {msg}"
        );
    }

    // robots.txt: the disallowed path is refused with its rule, in both
    // modes; the longer Allow beside it wins.
    for mode in ["http", "browser"] {
        let e = scrape(
            &pool,
            json!({"url": web_url(&env, "news.web.test", "/site/private/secret"), "mode": mode}),
        )
        .await
        .expect_err("disallowed");
        assert!(
            e.to_string().contains(
                "robots.txt disallows /site/private/secret: `Disallow: /site/private/` (line 3, User-agent: *)"
            ),
            "{mode}: {e}"
        );
    }
    let log = env.testbed.log();
    assert!(
        !log.iter()
            .any(|l| l.path.starts_with("/site/private/secret")),
        "a disallowed page was requested"
    );
    scrape(
        &pool,
        json!({"url": web_url(&env, "news.web.test", "/site/private/open"), "mode": "http"}),
    )
    .await
    .expect("Allow: /site/private/open");
    // robots.txt is read once per origin and kept.
    let robots = env
        .testbed
        .log()
        .iter()
        .filter(|l| l.path == "/robots.txt")
        .count();
    assert_eq!(robots, 1, "robots.txt fetched {robots} times");
    shutdown_and_check(&pool).await;

    // A closed list: with public_web off, the host is not fetched at all.
    open_web(&env, "[web]\nmin_interval_ms = 0\n");
    let cfg = std::fs::read_to_string(env.path("idpool.toml"))
        .expect("cfg")
        .replace("[security]\n", "[security]\npublic_web = false\n");
    env.write("idpool.toml", &cfg);
    let pool = env.pool();
    let e = scrape(&pool, json!({"url": article}))
        .await
        .expect_err("closed");
    assert!(e.to_string().contains("security.public_web is off"), "{e}");
    shutdown_and_check(&pool).await;

    // respect_robots = false: the operator's call.
    open_web(&env, "[web]\nmin_interval_ms = 0\nrespect_robots = false\n");
    let pool = env.pool();
    scrape(
        &pool,
        json!({"url": web_url(&env, "news.web.test", "/site/private/secret"), "mode": "http"}),
    )
    .await
    .expect("robots not consulted");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn an_open_web_host_is_paced_politely_by_default() {
    let env = Env::new(1).await;
    open_web(&env, "");
    let pool = env.pool();
    for path in ["/site/", "/site/about"] {
        scrape(
            &pool,
            json!({"url": web_url(&env, "news.web.test", path), "mode": "http"}),
        )
        .await
        .expect("page");
    }
    // The default `[web] min_interval_ms = 1000` on one slot: the second
    // call starts at least a second after the first (whose first request
    // is robots.txt).
    let starts: Vec<(String, u64)> = (env.testbed.log().iter())
        .map(|l| (l.path.clone(), l.at_ms))
        .collect();
    let paths: Vec<&str> = starts.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/robots.txt", "/site/", "/site/about"]);
    // The pool spaces its starts a second apart; the testbed sees them
    // arrive with a few ms of scheduling jitter either way (without the
    // interval the gap is a few ms).
    assert!(starts[2].1 - starts[0].1 >= 900, "{starts:?}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn scrape_formats_selectors_actions_headers_and_captures() {
    let env = Env::new(1).await;
    common::seat_plain_desktop(&env, 0);
    open_web(&env, "[web]\nmin_interval_ms = 0\n");
    let pool = env.pool();
    let host = |path: &str| web_url(&env, "news.web.test", path);
    let origin = web_url(&env, "news.web.test", "");

    // Markdown of the main content: the article, absolute links and
    // images, none of the furniture around it.
    let r = scrape(&pool, json!({"url": host("/site/article")}))
        .await
        .expect("article");
    let md = r["content"].as_str().expect("content");
    assert_eq!(r["title"], "Kettles compared");
    for kept in [
        site::ARTICLE_P1.to_string(),
        site::ARTICLE_P2.to_string(),
        "# Kettles compared".to_string(),
        format!("[who we are]({origin}/site/about)"),
        format!("[the first post]({origin}/site/blog/post-1)"),
        format!("![Boiling times chart]({origin}/site/img/chart.png)"),
    ] {
        assert!(md.contains(&kept), "{kept} not in {md}");
    }
    for noise in [
        "ADVERTISEMENT",
        "Footer",
        "We use cookies",
        "Share this",
        "Legal notice",
        "Home",
    ] {
        assert!(!md.contains(noise), "{noise} in {md}");
    }
    let whole = scrape(
        &pool,
        json!({"url": host("/site/article"), "only_main_content": false}),
    )
    .await
    .expect("whole page");
    let whole = whole["content"].as_str().expect("content");
    for kept in [
        "ADVERTISEMENT",
        "Footer",
        "We use cookies",
        "Share this",
        site::ARTICLE_P1,
    ] {
        assert!(whole.contains(kept), "{kept} not in {whole}");
    }
    assert!(
        whole.contains(&format!("[Home]({origin}/site/)")),
        "{whole}"
    );

    // Several formats in one call, each paged on its own.
    let r = scrape(
        &pool,
        json!({"url": host("/site/article"), "format": ["links", "raw_html", "html", "text"], "max_chars": 20000}),
    )
    .await
    .expect("formats");
    assert_eq!(r["format"], "links");
    let f = &r["formats"];
    // The first format's text is `content`, said once.
    let links = r["content"].as_str().expect("links");
    assert!(f["links"]["content"].is_null(), "{}", f["links"]);
    assert!(
        f["links"]["total_chars"].as_u64() > Some(0),
        "{}",
        f["links"]
    );
    // Each URL once (fragments dropped), the first link's text.
    assert_eq!(links.matches("/site/about)").count(), 1, "{links}");
    assert!(
        links.contains(&format!("- [About us]({origin}/site/about)")),
        "{links}"
    );
    assert!(links.contains("(https://elsewhere.test/share)"), "{links}");
    assert!(
        f["raw_html"]["content"]
            .as_str()
            .unwrap_or("")
            .contains("class=\"cookie-banner\"")
    );
    let html = f["html"]["content"].as_str().expect("html");
    assert!(
        html.starts_with("<article>") && !html.contains("cookie"),
        "{html}"
    );
    assert!(
        html.contains(&format!("src=\"{origin}/site/img/chart.png\"")),
        "{html}"
    );
    assert!(
        f["text"]["content"]
            .as_str()
            .unwrap_or("")
            .contains(site::ARTICLE_P2)
    );

    // Ad-hoc selectors on the review page: the strategy's fields, from its
    // own CSS, equal to the ground truth the strategy extraction returns.
    let reviews = env.url("/product-reviews/B0SELECT?page=1");
    let r = scrape(
        &pool,
        json!({"url": reviews.as_str(), "mode": "http", "items": "div.review", "selectors": {
            "id": {"attr": "data-review-id"}, "author": ".review-author",
            "rating": {"css": ".review-rating", "number": true}, "title": ".review-title",
            "body": ".review-body", "date": {"css": ".review-date", "regex": "Reviewed on (\\S+)"},
            "verified": {"css": ".review-verified", "exists": true},
            "helpful": {"css": ".review-helpful", "number": true}}}),
    )
    .await
    .expect("selectors");
    let truth: Vec<Value> = (idpool_testbed::data::page("B0SELECT", 1).0.into_iter())
        .map(|r| {
            json!({"id": r.id, "author": r.author, "rating": r.rating, "title": r.title,
            "body": r.body, "date": r.date, "verified": r.verified, "helpful": r.helpful})
        })
        .collect();
    assert!(!truth.is_empty());
    assert_eq!(r["data"], Value::Array(truth));
    let one = scrape(
        &pool,
        json!({"url": host("/site/article"), "selectors": {"h": "h1"}}),
    )
    .await
    .expect("one object");
    assert_eq!(one["data"], json!({"h": "Kettles compared"}));
    let e = scrape(
        &pool,
        json!({"url": host("/site/article"), "selectors": {"h": "h1[["}}),
    )
    .await
    .expect_err("bad css");
    assert!(
        e.to_string().contains("`selectors`") && e.to_string().contains("h1[["),
        "{e}"
    );
    assert!(!e.to_string().contains('\n'), "one line: {e}");
    let e = scrape(
        &pool,
        json!({"url": host("/site/article"), "mode": "browser", "wait_for": "p[["}),
    )
    .await
    .expect_err("bad wait_for");
    let msg = e.to_string();
    assert!(
        msg.starts_with("`wait_for`: `p[[` is not a valid CSS selector (") && !msg.contains('\n'),
        "{msg}"
    );

    // Headers go out with the HTTP tier; the connection's own are refused.
    scrape(
        &pool,
        json!({"url": host("/site/about"), "mode": "http", "headers": {"X-Idpool-Test": "yes"}}),
    )
    .await
    .expect("headers");
    let sent = env
        .testbed
        .log()
        .into_iter()
        .rev()
        .find(|l| l.path == "/site/about")
        .expect("logged");
    assert!(
        sent.header_order
            .iter()
            .any(|(k, v)| k == "x-idpool-test" && v == "yes"),
        "{:?}",
        sent.header_order
    );
    let e = scrape(
        &pool,
        json!({"url": host("/site/about"), "headers": {"Host": "x"}}),
    )
    .await
    .expect_err("host header");
    assert!(e.to_string().contains("header `Host` cannot be set"), "{e}");

    // A "load more" only a click reveals: without the click three items,
    // after it six.
    let before = scrape(
        &pool,
        json!({"url": host("/site/more"), "format": "text", "mode": "browser"}),
    )
    .await
    .expect("more");
    let before = before["content"].as_str().expect("text");
    assert!(
        before.contains("Item 3") && !before.contains("Item 4"),
        "{before}"
    );
    let after = scrape(
        &pool,
        json!({"url": host("/site/more"), "format": "text", "actions": [
            {"type": "click", "selector": "#load-more"},
            {"type": "wait", "selector": "#items li:nth-child(6)"}]}),
    )
    .await
    .expect("clicked");
    assert_eq!(after["via"], "browser", "actions need the browser");
    let text = after["content"].as_str().expect("text");
    for item in site::MORE_FIRST.iter().chain(site::MORE_LATER) {
        assert!(text.contains(item), "{item} not in {text}");
    }
    let e = scrape(
        &pool,
        json!({"url": host("/site/more"), "mode": "http", "actions": [{"type": "click", "selector": "#x"}]}),
    )
    .await
    .expect_err("actions over HTTP");
    assert!(e.to_string().contains("need the browser"), "{e}");
    let e = scrape(
        &pool,
        json!({"url": host("/site/more"), "actions": [{"type": "click", "selector": "#nothing"}]}),
    )
    .await
    .expect_err("no such element");
    assert!(
        e.to_string()
            .contains("actions[0] (click): no element matches `#nothing`"),
        "{e}"
    );

    // A screenshot of the viewport, then of the whole page, and a PDF.
    let shot = scrape(
        &pool,
        json!({"url": host("/site/long"), "format": "screenshot"}),
    )
    .await
    .expect("screenshot");
    let (w, h) = png_of(&shot);
    let vp = &shot["screenshot"]["viewport"];
    assert_eq!(
        (vp["width"].as_u64(), vp["height"].as_u64()),
        (Some(u64::from(w)), Some(u64::from(h))),
        "the PNG is the viewport"
    );
    assert_eq!(w, 1366, "the profile's default width");
    assert!(h < site::LONG_HEIGHT, "only the viewport: {h}");
    assert_eq!(
        (
            shot["screenshot"]["width"].as_u64(),
            shot["screenshot"]["height"].as_u64()
        ),
        (Some(u64::from(w)), Some(u64::from(h)))
    );
    let full = scrape(
        &pool,
        json!({"url": host("/site/long"), "format": ["screenshot", "markdown"], "full_page": true}),
    )
    .await
    .expect("full page");
    let (fw, fh) = png_of(&full);
    // The whole page is as wide as its layout: the window less the
    // vertical scroll bar a person's Chromium shows (no flag hides it).
    assert!((1336..1366).contains(&fw), "full page {fw} px wide");
    assert!(fh > site::LONG_HEIGHT, "full page {fh} px high");
    assert!(full["content"].as_str().unwrap_or("").contains("The end."));
    let pdf = scrape(
        &pool,
        json!({"url": host("/site/article"), "format": "pdf"}),
    )
    .await
    .expect("pdf");
    let media = pdf["media"].as_array().expect("media");
    assert_eq!(media[0]["type"], "resource");
    assert_eq!(media[0]["mime_type"], "application/pdf");
    let bytes = b64(media[0]["data"].as_str().expect("data"));
    assert!(bytes.starts_with(b"%PDF-"), "not a PDF");
    // Page objects: `/Type /Page`, not `/Type /Pages` (the page tree).
    let pages = (bytes.windows(12))
        .filter(|w| w.starts_with(b"/Type /Page") && w[11] != b's')
        .count();
    assert!(pages > 0, "no page in the PDF");
    shutdown_and_check(&pool).await;
}

fn b64(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// The PNG in a result's `media`: its width and height, from its IHDR.
fn png_of(r: &Value) -> (u32, u32) {
    let m = &r["media"][0];
    assert_eq!(m["type"], "image");
    assert_eq!(m["mime_type"], "image/png");
    let png = b64(m["data"].as_str().expect("data"));
    idpool::tools::scrape::png_size(&png).expect("a PNG")
}

#[tokio::test]
async fn map_lists_the_sitemaps_urls_and_the_start_pages_links_within_the_host() {
    let env = Env::new(1).await;
    open_web(&env, "[web]\nmin_interval_ms = 0\n");
    let pool = env.pool();
    let origin = web_url(&env, "news.web.test", "");
    let map = |args: Value| {
        let pool = pool.clone();
        async move {
            tools::map::run(pool.leases(), args, &Default::default())
                .await
                .map(|o| o.body)
        }
    };
    let r = map(json!({"url": format!("{origin}/site/")}))
        .await
        .expect("map");
    let mut expected: Vec<String> = (site::SITEMAP_PAGES.iter().chain(site::SITEMAP_BLOG))
        .map(|p| format!("{origin}{p}"))
        .collect();
    assert_eq!(r["from_sitemaps"], expected.len());
    // Linked from the start page and in no sitemap; the other site, the
    // subdomain and mailto: are left out, fragments dropped.
    for p in [
        "/site/private/secret",
        "/site/private/open",
        "/site/about?ref=home",
    ] {
        expected.push(format!("{origin}{p}"));
    }
    let links: Vec<String> = serde_json::from_value(r["links"].clone()).expect("links");
    assert_eq!(links, expected);
    assert_eq!(
        r["sitemaps"],
        json!([
            format!("{origin}/sitemap.xml"),
            format!("{origin}/sitemaps/pages.xml.gz"),
            format!("{origin}/sitemaps/blog.xml")
        ]),
        "robots.txt names the index, which names a gzipped and a plain sitemap"
    );
    assert_eq!(r["truncated"], false);

    let r = map(json!({"url": format!("{origin}/site/"), "limit": 4}))
        .await
        .expect("limit");
    assert_eq!(r["links"], json!(expected[..4]));
    assert_eq!(
        (r["count"].as_u64(), r["truncated"].as_bool()),
        (Some(4), Some(true))
    );
    let r = map(json!({"url": format!("{origin}/site/"), "search": "BLOG/"}))
        .await
        .expect("search");
    assert_eq!(
        r["links"],
        json!(
            expected
                .iter()
                .filter(|u| u.contains("blog/"))
                .collect::<Vec<_>>()
        )
    );
    let r = map(
        json!({"url": format!("{origin}/site/"), "include_subdomains": true, "sitemap": "skip"}),
    )
    .await
    .expect("subdomains");
    let links: Vec<String> = serde_json::from_value(r["links"].clone()).expect("links");
    assert!(
        links.contains(&"https://blog.news.web.test/hello".to_string()),
        "{links:?}"
    );
    assert!(
        !links.iter().any(|l| l.contains("elsewhere.test")),
        "{links:?}"
    );
    assert_eq!(r["from_sitemaps"], 0);
    let e = map(json!({"url": format!("{origin}/site/"), "limit": 0}))
        .await
        .expect_err("limit 0");
    assert!(e.to_string().contains("`limit`"), "{e}");
    shutdown_and_check(&pool).await;
}

/// A map is one person on the site: its start page and every sitemap come
/// from one identity, not round robin over the pool's.
#[tokio::test]
async fn map_holds_one_identity_for_the_whole_call() {
    let env = Env::new(2).await;
    open_web_slots(&env, 2, "[web]\nmin_interval_ms = 0\n");
    let pool = env.pool();
    let origin = web_url(&env, "news.web.test", "");
    let r = tools::map::run(
        pool.leases(),
        json!({"url": format!("{origin}/site/")}),
        &Default::default(),
    )
    .await
    .expect("map")
    .body;
    assert_eq!(r["sitemaps"].as_array().map(Vec::len), Some(3), "{r}");
    let requests: Vec<u64> = pool
        .leases()
        .slots_for_tests()
        .iter()
        .map(|s| s.health().requests)
        .collect();
    // The start page and three sitemaps (and robots.txt) on slot 0 alone.
    assert!(
        requests[0] >= 4 && requests[1] == 0,
        "requests per slot: {requests:?}"
    );
    shutdown_and_check(&pool).await;
}

/// The paths of a crawl's pages, in order.
fn paths(r: &Value) -> Vec<String> {
    (r["pages"].as_array().expect("pages").iter())
        .map(|p| {
            let u = url::Url::parse(p["url"].as_str().expect("url")).expect("a URL");
            match u.query() {
                Some(q) => format!("{}?{q}", u.path()),
                None => u.path().to_string(),
            }
        })
        .collect()
}

#[tokio::test]
async fn crawl_is_bounded_breadth_first_obeys_robots_and_runs_as_a_job() {
    let env = Env::new(1).await;
    open_web(&env, "[web]\nmin_interval_ms = 0\n");
    let pool = env.pool();
    let start = web_url(&env, "news.web.test", "/site/");
    let crawl = |args: Value| {
        let pool = pool.clone();
        async move { tools::crawl::run(&common::job_desk(&pool), args, &Default::default()).await }
    };
    let r = crawl(json!({"url": start, "max_depth": 1, "max_pages": 50, "format": "text"}))
        .await
        .expect("crawl");
    assert_eq!(r["status"], "completed");
    assert_eq!(
        paths(&r),
        [
            "/site/",
            "/site/blog/",
            "/site/about",
            "/site/article",
            "/site/search",
            "/site/more",
            "/site/private/open",
            "/site/about?ref=home"
        ],
        "breadth-first, each URL once, one host, depth 1"
    );
    let article = &r["pages"][3];
    assert_eq!(
        (article["status"].as_u64(), article["title"].as_str()),
        (Some(200), Some("Kettles compared"))
    );
    assert!(
        article["content"]
            .as_str()
            .unwrap_or("")
            .contains(site::ARTICLE_P1)
    );
    assert_eq!(article["depth"], 1);
    let skipped = r["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0]["url"]
            .as_str()
            .unwrap_or("")
            .ends_with("/site/private/secret")
    );
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("`Disallow: /site/private/`")
    );
    assert!(
        !env.testbed
            .log()
            .iter()
            .any(|l| l.path.starts_with("/site/private/secret")),
        "robots.txt honoured"
    );

    // exclude, max_pages, max_depth.
    let r = crawl(json!({"url": start, "max_depth": 2, "max_pages": 3, "exclude": ["/site/blog/**", "/site/about"]}))
        .await
        .expect("bounded");
    assert_eq!(paths(&r), ["/site/", "/site/article", "/site/search"]);
    let r = crawl(json!({"url": start, "max_depth": 0}))
        .await
        .expect("depth 0");
    assert_eq!(paths(&r), ["/site/"]);
    let r =
        crawl(json!({"url": start, "max_depth": 3, "max_pages": 20, "include": ["/site/blog/**"]}))
            .await
            .expect("include");
    assert_eq!(
        paths(&r),
        [
            "/site/",
            "/site/blog/",
            "/site/blog/post-1",
            "/site/blog/post-2",
            "/site/blog/post-3",
            "/site/blog/archive"
        ]
    );
    let e = crawl(json!({"url": start, "max_pages": 100_000}))
        .await
        .expect_err("cap");
    assert!(e.to_string().contains("web.max_crawl_pages"), "{e}");
    let e = crawl(json!({"url": start, "include": ["/a/[b"]}))
        .await
        .expect_err("glob");
    assert!(
        e.to_string().contains("`include`: `/a/[b` is not a glob"),
        "{e}"
    );

    // As a job: the id at once, the pages through crawl_status, paged.
    let job = crawl(
        json!({"url": start, "max_depth": 1, "max_pages": 50, "async": true, "format": "links"}),
    )
    .await
    .expect("async");
    let id = job["id"].as_str().expect("id").to_string();
    let status = |args: Value| {
        let pool = pool.clone();
        async move {
            tools::crawl_status::run(&common::job_desk(&pool), args, &Default::default()).await
        }
    };
    let mut done = Value::Null;
    for _ in 0..100 {
        done = status(json!({"id": id})).await.expect("status");
        if done["status"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(done["status"], "completed");
    assert_eq!(paths(&done).len(), 8);
    assert_eq!(done["next_start_index"], Value::Null);
    let rest = status(json!({"id": id, "start_index": 6}))
        .await
        .expect("paged");
    assert_eq!(paths(&rest), ["/site/private/open", "/site/about?ref=home"]);
    let e = status(json!({"id": "nope"})).await.expect_err("unknown id");
    assert!(e.to_string().contains("no crawl `nope`"), "{e}");
    // Finished jobs are kept in the data dir: a new pool reads them back.
    shutdown_and_check(&pool).await;
    drop(pool);
    let pool = env.pool();
    let again = tools::crawl_status::run(
        &common::job_desk(&pool),
        json!({"id": id}),
        &Default::default(),
    )
    .await
    .expect("kept");
    assert_eq!(paths(&again), paths(&done));
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_crawl_stops_within_a_second_of_being_cancelled() {
    let env = Env::new(1).await;
    // Slow on purpose: a page every 700 ms.
    open_web(&env, "[web]\nmin_interval_ms = 700\n");
    let pool = env.pool();
    let start = web_url(&env, "news.web.test", "/site/");
    let site_requests = || {
        env.testbed
            .log()
            .iter()
            .filter(|l| l.path.starts_with("/site/"))
            .count()
    };
    let args = json!({"url": start, "max_depth": 2, "max_pages": 20, "async": true});
    let job = tools::crawl::run(&common::job_desk(&pool), args, &Default::default())
        .await
        .expect("async");
    let id = job["id"].as_str().expect("id").to_string();
    while site_requests() < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let asked = std::time::Instant::now();
    let r = tools::crawl_status::run(
        &common::job_desk(&pool),
        json!({"id": id, "cancel": true}),
        &Default::default(),
    )
    .await
    .expect("cancel");
    assert_eq!(r["status"], "cancelled");
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    let at_cancel = site_requests();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(site_requests(), at_cancel, "requests after the cancel");
    assert!(r["pages_done"].as_u64().unwrap_or(0) >= 1);

    // A call that waits is cancelled by dropping it (what an MCP cancel does).
    let before = site_requests();
    let opts = idpool::lease::cascade::RunOptions::default();
    let desk = common::job_desk(&pool);
    let sync = tools::crawl::run(
        &desk,
        json!({"url": start, "max_depth": 2, "max_pages": 20}),
        &opts,
    );
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(1600), sync)
            .await
            .is_err()
    );
    let at_drop = site_requests();
    assert!(at_drop > before, "it ran");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(
        site_requests(),
        at_drop,
        "requests after the call was dropped"
    );
    shutdown_and_check(&pool).await;
}
