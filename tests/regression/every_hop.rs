//! Issue 54's findings, one test each: a bundle's proxy session pasted
//! into the slot's proxy URL (finding 1), host grants checked on the first
//! URL only (finding 2), a click in a browser session acting without a
//! lease (finding 4), and `browser_open` naming its recording twice. Every
//! test here failed on 125f00e. The daemon-level findings (recordings and
//! tools of a key's grants, a foreign session's slot) are in
//! `grants_cover.rs`.

use std::sync::Arc;

use crate::common;

use common::{Env, free_base_port, ref_of, shop, shutdown_and_check};
use idpool::error::ErrorKind;
use idpool::lease::cascade::RunOptions;
use idpool::routing::Scope;
use idpool::routing::grants::Grant;
use idpool::tools;
use serde_json::json;

const PASS: &str = "a long enough passphrase";

/// A bundle's contents as an export writes them, with `identity.session`,
/// `profile` and the storageState given.
fn contents(session: &str, profile: &str, storage: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "contents": 1,
        "exported_at": 1_700_000_000u64,
        "from_slot": 0,
        "profile": profile,
        "user_agent": "Mozilla/5.0 (X11; Linux x86_64)",
        "identity": {"session": session, "generation": 0, "born": 1_700_000_000u64},
        "proxy": null,
        "proxy_secrets": false,
        "calibration": null,
        "session": storage,
        "sites": {},
    }))
    .expect("contents")
}

/// Sealed at a small cost: the test is about what is inside.
fn sealed(contents: &[u8]) -> Vec<u8> {
    idpool::identity::bundle::seal_with(contents, PASS, (1024, 1, 1)).expect("sealed")
}

#[tokio::test]
async fn a_bundle_cannot_rewrite_the_slot_proxy() {
    let env = Env::new(1).await;
    env.write(
        "idpool.toml",
        &format!(
            "[pool]\nsize = 1\nbase_port = {}\ndata_dir = \"data\"\nstrategies_dir = \"strategies\"\n\
             profiles_dir = \"profiles\"\nproxies = [\"http://user-{{session}}:PASSWORD@127.0.0.1:18996\"]\n\n\
             [security]\nallow_private_networks = true\n",
            free_base_port(1)
        ),
    );
    let pool = env.pool();
    let identity_file = env.path("data/slots/0/identity.json");
    let before_file = std::fs::read(&identity_file).expect("identity.json");
    let before = pool.reports().status_now()["slots"][0].clone();
    let session = before["identity"]["session"]
        .as_str()
        .expect("session")
        .to_string();
    assert_eq!(before["proxy"], "http://***@127.0.0.1:18996", "{before}");

    let empty = r#"{"cookies":[],"origins":[]}"#;
    // What the attack used: a session that carries a user, a host and a
    // fragment of its own; and the other values a bundle carries.
    let hostile = [
        (
            contents("x@127.0.0.2:18999/#", "default", empty),
            "identity.session",
        ),
        (contents("", "default", empty), "identity.session"),
        (contents("0a1b2c", "../../etc/passwd", empty), "profile"),
        (
            contents(
                "0a1b2c",
                "default",
                r#"{"cookies":[],"origins":[{"origin":"https://shop.test/#x@127.0.0.2","localStorage":[]}]}"#,
            ),
            "origins[0]",
        ),
    ];
    for (plain, field) in hostile {
        let e = pool
            .services()
            .bundles
            .import(0, sealed(&plain), PASS)
            .await
            .expect_err("a hostile bundle is refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains(field), "names `{field}`: {e}");
        // Nothing was seated: the same session, the same upstream, the same file.
        let now = pool.reports().status_now()["slots"][0].clone();
        assert_eq!(now["identity"]["session"], session.as_str(), "{now}");
        assert_eq!(now["proxy"], "http://***@127.0.0.1:18996", "{now}");
        assert_eq!(
            std::fs::read(&identity_file).expect("identity.json"),
            before_file
        );
    }
    // A bundle the pool itself could have made is seated, and the password
    // shows nowhere a viewer reads.
    let ok = pool
        .services()
        .bundles
        .import(0, sealed(&contents("00ff00ff00ff", "default", empty)), PASS)
        .await
        .expect("a well-formed bundle is seated");
    assert_eq!(ok.proxy_session, "00ff00ff00ff");
    let status = pool.reports().status_now();
    assert_eq!(status["slots"][0]["identity"]["session"], "00ff00ff00ff");
    assert_eq!(status["slots"][0]["proxy"], "http://***@127.0.0.1:18996");
    for text in [
        status.to_string(),
        serde_json::to_string(&pool.events().recent()).expect("events"),
    ] {
        assert!(
            !text.contains("PASSWORD"),
            "a viewer reads the proxy password: {text}"
        );
    }
    shutdown_and_check(&pool).await;
}

/// An open-web pool where `shop.example.test` and `www.example.test` live on
/// the testbed, beside `testshop` (127.0.0.1).
async fn example_test(breaker: &str) -> (Env, idpool::pool::Pool) {
    let env = shop(1).await;
    env.write_config_private(
        1,
        true,
        free_base_port(1),
        "true",
        &format!(
            "[security.resolve]\n\"shop.example.test\" = \"127.0.0.1\"\n\"www.example.test\" = \"127.0.0.1\"\n\n\
             [web]\nmin_interval_ms = 0\nrespect_robots = false\n\n{breaker}"
        ),
    );
    let pool = env.pool();
    (env, pool)
}

/// A key granted `hosts=*.example.test`, calling `tool`, as an MCP session.
fn granted(tool: &str) -> RunOptions {
    let grant = Grant::parse("hosts=*.example.test").expect("grant");
    let now = idpool::routing::grants::unix_now();
    RunOptions {
        caller: Some("agent".into()),
        session: Some("mcp-1".into()),
        scope: Scope::of("agent", &[grant], tool, now).map(Arc::new),
        ..RunOptions::default()
    }
}

fn not_granted(r: idpool::Result<tools::Output>, host: &str, what: &str) {
    match r {
        Ok(o) => panic!(
            "{what}: served, though the key is not granted {host}: {}",
            o.body
        ),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::NotGranted, "{what}: {e}");
            assert!(e.message().contains(host), "{what} names {host}: {e}");
        }
    }
}

#[tokio::test]
async fn host_grants_hold_on_every_redirect_hop_and_after_a_click() {
    let (env, pool) = example_test("").await;
    let port = env.testbed.http_addr.port();
    let direct = format!("http://127.0.0.1:{port}/site/about");
    let via = |host: &str, to: &str| format!("http://{host}:{port}/redirect?to={to}");
    let scrape = |url: String, mode: &str| {
        let pool = &pool;
        let args = json!({"url": url, "mode": mode});
        async move { tools::scrape::run(pool.leases(), args, &granted("scrape")).await }
    };
    // The first URL, as before.
    not_granted(scrape(direct.clone(), "http").await, "testshop", "direct");
    // A redirect that stays on granted hosts is followed on both tiers...
    let inside = via(
        "shop.example.test",
        &format!("http://www.example.test:{port}/site/about"),
    );
    for mode in ["http", "browser"] {
        let r = scrape(inside.clone(), mode)
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"))
            .body;
        assert_eq!(r["status"], 200, "{mode}: {r}");
        assert!(
            r["url"]
                .as_str()
                .is_some_and(|u| u.contains("www.example.test")),
            "{mode}: {r}"
        );
    }
    // ...and one that leaves them stops at the hop, on both tiers.
    let out = via("shop.example.test", &direct);
    not_granted(
        scrape(out.clone(), "http").await,
        "127.0.0.1",
        "the HTTP tier's redirect",
    );
    not_granted(
        scrape(out.clone(), "browser").await,
        "127.0.0.1",
        "the browser's redirect",
    );

    // A browser session: a navigation that is redirected away, and a click
    // on a link to a host the key is not granted.
    let nav = tools::browser_open::run(
        &pool.services().browsing,
        json!({"url": format!("http://shop.example.test:{port}/link?to={direct}")}),
        &granted("browser_open"),
    )
    .await
    .expect("open on a granted host")
    .body;
    let id = nav["session"].as_str().expect("session").to_string();
    not_granted(
        tools::browser_navigate::run(
            &pool.services().browsing,
            json!({"session": id, "url": out}),
            &granted("browser_navigate"),
        )
        .await,
        "127.0.0.1",
        "browser_navigate's redirect",
    );
    let back = tools::browser_navigate::run(
        &pool.services().browsing,
        json!({"session": id, "url": format!("http://shop.example.test:{port}/link?to={direct}")}),
        &granted("browser_navigate"),
    )
    .await
    .expect("back on the granted host")
    .body;
    let go = ref_of(&back, "link", "go on");
    not_granted(
        tools::browser_click::run(
            &pool.services().browsing,
            json!({"session": id, "ref": go}),
            &granted("browser_click"),
        )
        .await,
        "127.0.0.1",
        "a click",
    );
    // The tab did not stay there.
    let snap = tools::browser_snapshot::run(
        &pool.services().browsing,
        json!({"session": id}),
        &granted("browser_snapshot"),
    )
    .await
    .expect("snapshot")
    .body;
    let at = snap["url"].as_str().unwrap_or_default();
    assert!(
        !at.contains("127.0.0.1"),
        "the tab stayed on the refused page: {snap}"
    );
    tools::browser_close::run(
        &pool.services().browsing,
        json!({"session": id}),
        &granted("browser_close"),
    )
    .await
    .expect("close");

    // However a tab came to a page the key may not see (a script moving it
    // between steps; here a session of the same caller opened there before
    // its grants were narrowed), a step that only reads it is refused too.
    let wide = RunOptions {
        scope: None,
        ..granted("browser_open")
    };
    let there = tools::browser_open::run(&pool.services().browsing, json!({"url": direct}), &wide)
        .await
        .expect("open without grants")
        .body;
    let id = there["session"].as_str().expect("session").to_string();
    not_granted(
        tools::browser_snapshot::run(
            &pool.services().browsing,
            json!({"session": id}),
            &granted("browser_snapshot"),
        )
        .await,
        "127.0.0.1",
        "a snapshot of a page off the key's hosts",
    );
    let snap =
        tools::browser_snapshot::run(&pool.services().browsing, json!({"session": id}), &wide)
            .await
            .expect("snapshot")
            .body;
    assert!(
        !snap["url"]
            .as_str()
            .unwrap_or_default()
            .contains("127.0.0.1"),
        "the refused page was left: {snap}"
    );
    tools::browser_close::run(&pool.services().browsing, json!({"session": id}), &wide)
        .await
        .expect("close");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_click_that_loads_a_blocked_page_opens_the_site_breaker() {
    let (env, pool) =
        example_test("[breaker]\nthreshold = 1\n\n[recording]\nwhen = \"always\"\n").await;
    let me = RunOptions {
        caller: Some("agent".into()),
        session: Some("mcp-1".into()),
        ..RunOptions::default()
    };
    let link = env.url("/link?to=/captcha-page");
    let (open, made) = idpool::lease::recordings::collecting(tools::browser_open::run(
        &pool.services().browsing,
        json!({"url": link.as_str()}),
        &me,
    ))
    .await;
    let open = open.expect("open").body;
    let id = open["session"].as_str().expect("session").to_string();
    // The session's recording is named once (its open and its first
    // navigation both note it).
    assert_eq!(made.len(), 1, "one recording, named once: {made:?}");
    let before = pool.reports().status_now();
    assert_eq!(
        before["slots"][0]["breakers"]["testshop"]["state"], "closed",
        "{before}"
    );
    let requests = before["slots"][0]["requests"].as_u64().expect("requests");
    let sent = before["strategies"]["testshop"]["sent_per_minute"]
        .as_f64()
        .unwrap_or(0.0);

    let go = ref_of(&open, "link", "go on");
    let clicked = tools::browser_click::run(
        &pool.services().browsing,
        json!({"session": id, "ref": go}),
        &me,
    )
    .await
    .expect("the click runs")
    .body;
    assert!(
        clicked["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/captcha-page")),
        "{clicked}"
    );
    let after = pool.reports().status_now();
    let b = &after["slots"][0]["breakers"]["testshop"];
    assert_eq!(
        b["state"], "open",
        "the block a click led to opened the site's breaker: {after}"
    );
    assert!(
        after["slots"][0]["requests"].as_u64().expect("requests") > requests,
        "the click's page is one of the slot's requests: {after}"
    );
    assert!(
        after["strategies"]["testshop"]["sent_per_minute"]
            .as_f64()
            .unwrap_or(0.0)
            > sent,
        "the click's page took its turn in the site's budget: {after}"
    );
    tools::browser_close::run(&pool.services().browsing, json!({"session": id}), &me)
        .await
        .expect("close");
    // The session's recording shows the page the click loaded.
    let rec = pool
        .leases()
        .recordings()
        .get(&made[0])
        .expect("the recording");
    let actions = rec["actions"].to_string();
    assert!(actions.contains("captcha-page"), "{actions}");
    shutdown_and_check(&pool).await;
}

/// Finding 5: a recording of a page that loads in ~0.1 s could close before
/// the screencast's first frame (seen 1 run in 10 under load). Every
/// recording now keeps at least the final page's look.
#[tokio::test]
async fn every_recording_of_a_fast_page_has_a_frame() {
    let (env, pool) = example_test("[recording]\nwhen = \"always\"\n").await;
    let url = env.url("/site/about");
    for round in 0..6 {
        let (r, made) = idpool::lease::recordings::collecting(tools::scrape::run(
            pool.leases(),
            json!({"url": url.as_str(), "mode": "browser"}),
            &RunOptions::default(),
        ))
        .await;
        r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(made.len(), 1, "round {round}: {made:?}");
        let rec = pool
            .leases()
            .recordings()
            .get(&made[0])
            .expect("the recording");
        let frames = rec["meta"]["frames"].as_u64().unwrap_or(0);
        assert!(
            frames >= 1,
            "round {round}: a recording without a frame: {}",
            rec["meta"]
        );
    }
    shutdown_and_check(&pool).await;
}
