//! The browser's guarded egress (issue 15, item 1): every request a slot's
//! Chromium makes (navigations, redirects, images, `fetch()`, WebSockets)
//! leaves through the daemon's forward proxy, which refuses private,
//! loopback and link-local addresses the config does not allow. A canary
//! listener on 127.0.0.2 stands in for them, with only 127.0.0.1 allowed.

use crate::common;

use common::canary::Canary;
use common::{Env, free_base_port, shop, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::tools;
use serde_json::json;

const ONLY_TESTBED: &str = r#"["127.0.0.1"]"#;

fn reach_out(env: &Env, canary: &Canary) -> url::Url {
    url::Url::parse(&format!(
        "{}/reach-out?to={}",
        env.testbed.http_url(),
        canary.addr()
    ))
    .expect("url")
}

/// An image, a `fetch()` and a WebSocket of an allowed page, all aimed at
/// the canary: refused by the egress (the canary sees nothing, the result
/// says what was refused); once 127.0.0.2 is allowed, all three reach it.
#[tokio::test]
async fn a_page_cannot_make_the_browser_reach_another_address() {
    let canary = Canary::start().await;
    let env = Env::new(1).await;
    env.write_config_private(1, true, free_base_port(1), ONLY_TESTBED, "");
    let pool = env.pool();
    let f = pool
        .browse(reach_out(&env, &canary), Some("#done".into()), Some(0))
        .await
        .expect("the page itself loads");
    assert_eq!(f.response.status, 200);
    assert!(
        canary.seen().is_empty(),
        "the canary was reached: {:?}",
        canary.seen()
    );
    let page = f.response.text();
    for (what, how) in [("image", "error"), ("websocket", "error")] {
        assert!(
            page.contains(&format!("\"{what}\":\"{how}")),
            "{what}: {page}"
        );
    }
    assert!(page.contains("\"fetch\":\"error"), "{page}");
    let refused = f.refused.join("\n");
    assert!(
        refused.contains(&canary.addr()) && refused.contains("private"),
        "the result says what was refused: {refused:?}"
    );
    let facts = pool.leases().slots_for_tests()[0].egress_facts();
    assert!(facts.refused >= 3, "{facts:?}");
    assert!(facts.requests >= 1 && facts.bytes_down > 0, "{facts:?}");
    assert!(
        facts
            .last_refused
            .as_deref()
            .is_some_and(|r| r.contains(&canary.addr())),
        "{facts:?}"
    );
    shutdown_and_check(&pool).await;

    // The same page with 127.0.0.2 allowed: the test above could fail.
    env.write_config_private(
        1,
        true,
        free_base_port(1),
        r#"["127.0.0.1", "127.0.0.2"]"#,
        "",
    );
    let pool = env.pool();
    let f = pool
        .browse(reach_out(&env, &canary), Some("#done".into()), Some(0))
        .await
        .expect("page");
    assert!(f.refused.is_empty(), "{:?}", f.refused);
    assert!(
        f.response.text().contains("\"fetch\":\"answered\""),
        "{}",
        f.response.text()
    );
    let seen = canary.seen().join("\n");
    for path in ["/canary.png", "/canary-fetch", "/canary-ws"] {
        assert!(
            seen.contains(path),
            "{path} did not reach the canary: {seen}"
        );
    }
    shutdown_and_check(&pool).await;
}

/// A main document redirected to the canary is refused before the browser
/// connects: over plain HTTP (the egress forwards) and HTTPS (a CONNECT
/// tunnel), on the `scrape` path.
#[tokio::test]
async fn scrape_refuses_a_redirect_to_another_address() {
    let canary = Canary::start().await;
    let env = Env::new(1).await;
    env.write_config_private(1, true, free_base_port(1), ONLY_TESTBED, "");
    let pool = env.pool();
    for scheme in ["http", "https"] {
        let to = format!("{scheme}://{}/landed", canary.addr());
        let mut url = env.url("/redirect");
        url.query_pairs_mut().append_pair("to", &to);
        let e = tools::scrape::run(
            pool.leases(),
            json!({"url": url.as_str(), "mode": "browser"}),
            &RunOptions::default(),
        )
        .await
        .expect_err("the redirect is refused");
        let msg = e.to_string();
        assert_eq!(e.kind(), idpool::ErrorKind::Refused, "{msg}");
        assert!(
            msg.contains(&canary.addr()) && msg.contains("egress refused"),
            "{scheme}: {msg}"
        );
    }
    assert!(canary.seen().is_empty(), "{:?}", canary.seen());
    // A refusal of ours is no block of the site's: the breaker is untouched.
    let status = pool.reports().status_now();
    let open = status["slots"]
        .as_array()
        .expect("slots")
        .iter()
        .flat_map(|s| s["breakers"].as_object().cloned().unwrap_or_default())
        .filter(|(_, b)| b["state"] != "closed")
        .count();
    assert_eq!(open, 0, "a refusal opened a breaker: {status}");
    shutdown_and_check(&pool).await;
}

/// The cascade's tier 3, sent by the site to the canary, ends in the guard's
/// refusal; the canary sees nothing.
#[tokio::test]
async fn tier_three_refuses_a_redirect_to_another_address() {
    let canary = Canary::start().await;
    let env = shop(1).await;
    env.write_config_private(1, true, free_base_port(1), ONLY_TESTBED, "");
    let bundled = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("strategy");
    let tier3 = "url = \"{base_url}/js-reviews/{item}?page={page}\"";
    assert!(bundled.contains(tier3), "testshop.toml changed its tier 3");
    let to = format!(
        "http%3A%2F%2F{}%2Fjs-reviews",
        canary.addr().replace(':', "%3A")
    );
    env.write(
        "strategies/testshop.toml",
        &bundled.replace(tier3, &format!("url = \"{{base_url}}/redirect?to={to}\"")),
    );
    let pool = env.pool();
    let e = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0TESTA1", "strategy": "testshop"}),
        RunOptions {
            only_tiers: Some(vec![3]),
            ..RunOptions::default()
        },
    )
    .await
    .expect_err("refused");
    let msg = e.to_string();
    assert_eq!(e.kind(), idpool::ErrorKind::Refused, "{msg}");
    assert!(msg.contains(&canary.addr()), "{msg}");
    assert!(canary.seen().is_empty(), "{:?}", canary.seen());
    shutdown_and_check(&pool).await;
}

/// The egress tunnels TLS untouched: the testbed's JA4 of a slot's Chromium
/// through the egress equals that of the same Chromium with the same flags
/// and no proxy at all. (Fresh handshakes are compared: a resumed one adds
/// `pre_shared_key`, whichever way it came.)
#[tokio::test]
async fn the_egress_leaves_the_browsers_fingerprint_alone() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let fresh_ja4 = |via: &str| {
        env.testbed
            .log()
            .into_iter()
            .find(|e| e.path.ends_with(&format!("via={via}")) && !e.resumed)
            .map(|e| e.ja4)
    };
    let mut egress = None;
    for n in 0..3 {
        let via = format!("egress{n}");
        pool.browse(env.url(&format!("/product/B0JA4?via={via}")), None, Some(0))
            .await
            .expect("through the egress");
        egress = fresh_ja4(&via);
        if egress.is_some() {
            break;
        }
        pool.leases().slots_for_tests()[0].browser().close().await;
    }
    let egress = egress.expect("a fresh handshake through the egress");
    assert!(pool.leases().slots_for_tests()[0].egress_facts().requests >= 1);
    let mut raw = None;
    for n in 0..3 {
        let via = format!("raw{n}");
        let url = env.url(&format!("/product/B0JA4?via={via}")).to_string();
        launch_bare_chromium(&env, &pool, &url, &via).await;
        raw = fresh_ja4(&via);
        if raw.is_some() {
            break;
        }
    }
    let raw = raw.expect("a fresh handshake of the bare Chromium");
    assert!(raw.starts_with('t'), "{raw}");
    assert_eq!(egress, raw, "the egress changed the browser's ClientHello");
    // Nor does anything else idpool gives its Chromium (issue 33: screen,
    // pointer, languages, the user-agent override, the namespace's link):
    // a Chromium started with none of idpool's flags has the same JA4 and
    // HTTP/2 fingerprint.
    let plain = common::chromium::Chromium::start(env.path("").as_path()).await;
    let mut bare = None;
    for n in 0..3 {
        let via = format!("plain{n}");
        let page = plain.browser.new_page("about:blank").await.expect("tab");
        page.goto(env.url(&format!("/product/B0JA4?via={via}")).to_string())
            .await
            .expect("plain Chromium navigates");
        bare = fresh_ja4(&via);
        let _ = page.close().await;
        if bare.is_some() {
            break;
        }
    }
    plain.stop().await;
    assert_eq!(
        bare.as_deref(),
        Some(egress.as_str()),
        "JA4 of a Chromium without idpool"
    );
    let akamai = |prefix: &str| {
        env.testbed
            .log()
            .into_iter()
            .find(|e| e.path.contains(&format!("via={prefix}")))
            .and_then(|e| e.akamai)
    };
    assert_eq!(akamai("egress"), akamai("plain"), "HTTP/2 fingerprint");
    assert!(akamai("plain").is_some());
    shutdown_and_check(&pool).await;
}

/// A plain-HTTP page through the slot's egress reaches the site with the
/// same head lines, in the same order and case, as the same Chromium sends
/// with the same flags and no proxy at all (the testbed logs each head's raw
/// lines on its plain-HTTP port). Only the path's `via` differs.
#[tokio::test]
async fn a_plain_http_request_reaches_the_site_as_the_browser_wrote_it() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let lines = |via: &str| {
        env.testbed
            .log()
            .into_iter()
            .find(|e| e.path.ends_with(&format!("via={via}")))
            .map(|e| e.head_lines)
    };
    let page = |via: &str| format!("{}/product/B0H1?via={via}", env.testbed.http_url());
    pool.browse(
        url::Url::parse(&page("egress")).expect("url"),
        None,
        Some(0),
    )
    .await
    .expect("through the egress");
    let through = lines("egress").expect("the testbed saw the page");
    launch_bare_chromium(&env, &pool, &page("bare"), "bare").await;
    let bare = lines("bare").expect("the testbed saw the bare Chromium");
    assert!(
        through[0].starts_with("GET /product/B0H1?via=egress HTTP/1.1"),
        "the request line is in origin form: {through:?}"
    );
    assert!(
        through
            .iter()
            .skip(1)
            .any(|l| l == "Connection: keep-alive"),
        "{through:?}"
    );
    assert!(
        !through
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("proxy-")),
        "{through:?}"
    );
    // The slot's brands come from its profile by CDP, which the bare
    // Chromium has none of: that one value is the override's, not the
    // egress's. Every line's name, case and place, and every other value,
    // must be the same.
    let fields = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .skip(1)
            .map(|l| match l.split_once(':') {
                Some(("sec-ch-ua", _)) => "sec-ch-ua: (brands)".to_string(),
                _ => l.clone(),
            })
            .collect()
    };
    assert_eq!(
        fields(&through),
        fields(&bare),
        "the egress changed the browser's request head"
    );
    shutdown_and_check(&pool).await;
}

/// The slot's Chromium binary with the slot's flags but no proxy, sent to
/// `url` (whose path ends `via=<via>`); ended and reaped once the testbed
/// saw it.
async fn launch_bare_chromium(env: &Env, pool: &idpool::pool::Pool, url: &str, via: &str) {
    let dir = env.path(&format!("bare/{via}"));
    let spec = idpool::identity::browser::LaunchSpec {
        slot: 9,
        executable: idpool::identity::browser::launcher::find_executable(None).expect("chromium"),
        port: free_base_port(1),
        user_data_dir: dir.join("chromium"),
        pid_file: dir.join("chromium.pid"),
        headless: true,
        xvfb: false,
        user_agent: pool.leases().slots_for_tests()[0]
            .profile
            .user_agent
            .clone(),
        languages: pool.leases().slots_for_tests()[0].profile.languages(),
        device: idpool::identity::browser::Device::desktop(1280, 800),
        pointer: idpool::identity::profile::Pointer::Fine,
        proxy_server: None,
        spki: idpool::wire::http::cert::spki_hashes(std::slice::from_ref(&env.testbed.ca_path))
            .expect("spki"),
        trust_roots: Vec::new(),
        launch_timeout: std::time::Duration::from_secs(30),
        netns: None,
        sandbox: true,
        egress_peers: None,
    };
    let mut args = spec.args();
    assert!(!args.iter().any(|a| a.starts_with("--proxy-server")));
    let last = args.len() - 1;
    args[last] = url.to_string();
    std::fs::create_dir_all(&spec.user_data_dir).expect("dir");
    let mut child = tokio::process::Command::new(&spec.executable)
        .args(&args)
        .env("HOME", &dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("bare chromium");
    let logged = |via: &str| {
        env.testbed
            .log()
            .iter()
            .any(|e| e.path.ends_with(&format!("via={via}")))
    };
    for _ in 0..300 {
        if logged(via) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    idpool::identity::browser::process::kill_and_reap(&mut child).await;
}

/// Browsers locked away (issue 15, item 2): each slot's Chromium runs in a
/// network namespace of the daemon's with only loopback. Its DevTools port
/// is not reachable from the machine (by this process, nor by another user),
/// the daemon still drives every browser, and a connection from inside that
/// ignores the egress reaches nothing.
#[tokio::test]
async fn devtools_ports_are_the_daemons_alone() {
    use std::os::unix::process::CommandExt;
    let canary = Canary::start().await;
    let env = Env::new(2).await;
    let pool = env.pool();
    let isolation = pool.host().isolation.clone();
    let status = pool.reports().status_now();
    assert_eq!(
        status["browsers"]["isolated"], isolation.isolated,
        "{status}"
    );
    if !isolation.isolated {
        // No CAP_SYS_ADMIN here: the pool says so, loudly, with the reason.
        assert!(
            isolation
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("CAP_SYS_ADMIN")),
            "{isolation:?}"
        );
        eprintln!("browsers are not isolated on this machine: {isolation:?}");
        return;
    }
    for slot in 0..2 {
        let f = pool
            .browse(env.url("/product/B0ISO"), None, Some(slot))
            .await
            .expect("the daemon drives the browser");
        assert_eq!(f.response.status, 200);
    }
    let as_root = unsafe { libc::geteuid() } == 0;
    for s in pool.leases().slots_for_tests() {
        assert!(s.browser_facts().running);
        let port = s.cdp_port;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        assert!(
            std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1)).is_err(),
            "slot {}: DevTools port {port} is reachable from outside",
            s.id
        );
        if as_root {
            let other_user = std::process::Command::new("bash")
                .args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")])
                .uid(65534)
                .gid(65534)
                .stderr(std::process::Stdio::null())
                .status()
                .expect("bash as nobody");
            assert!(
                !other_user.success(),
                "user nobody reached slot {}'s DevTools",
                s.id
            );
        }
    }
    let ns = pool.host().netns.as_ref().expect("the namespace");
    let port = pool.leases().slots_for_tests()[0].cdp_port;
    let inside = ns
        .run_sync(move || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
        .expect("ran inside");
    assert!(inside, "inside the namespace the DevTools port is there");
    let target: std::net::SocketAddr = canary.addr().parse().expect("addr");
    let around = ns
        .run_sync(move || {
            std::net::TcpStream::connect_timeout(&target, std::time::Duration::from_secs(1)).is_ok()
        })
        .expect("ran inside");
    assert!(!around, "a connection around the egress got out");
    assert!(canary.seen().is_empty(), "{:?}", canary.seen());
    shutdown_and_check(&pool).await;
}

/// Browsers locked away for a daemon run as its own user (issue 15, item 2):
/// it enters a user namespace of its own at start, so it can still make the
/// browsers' network namespace; Chromium runs as that user with its sandbox
/// on, and its DevTools port is not reachable from the machine. Run as
/// `nobody` when the test is root, as the test's own user otherwise.
#[tokio::test]
async fn a_daemon_run_as_its_own_user_locks_its_browsers_away() {
    use common::daemon::{Daemon, Mcp};
    use std::os::unix::process::CommandExt;
    let uid = if unsafe { libc::geteuid() } == 0 {
        65534
    } else {
        unsafe { libc::geteuid() }
    };
    let probe = std::process::Command::new("unshare")
        .args(["--user", "--map-current-user", "true"])
        .uid(uid)
        .gid(uid)
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("this system allows no unprivileged user namespaces: nothing to test");
        return;
    }
    let env = Env::new(1).await;
    let d = if uid == unsafe { libc::geteuid() } {
        Daemon::start(&env, 1, "").await
    } else {
        Daemon::start_as(&env, 1, uid).await
    };
    let mut c = Mcp::new(&d, None);
    assert!(c.initialize().await.status.is_success());
    let status = c.tool(1, "pool_status", json!({})).await;
    let browsers = &status["result"]["structuredContent"]["browsers"];
    assert_eq!(browsers["isolated"], true, "{status}\n{}", d.log_text());
    assert_eq!(browsers["via"], "user namespace", "{browsers}");
    assert_eq!(browsers["sandbox"], true, "{browsers}");
    let scraped = c
        .tool(
            2,
            "scrape",
            json!({"url": env.url("/product/B0OWN").as_str(), "mode": "browser"}),
        )
        .await;
    assert_eq!(
        scraped["result"]["structuredContent"]["status"],
        200,
        "{scraped}\n{}",
        d.log_text()
    );
    let browsers = common::chromium_browsers_under(&env.path("data"));
    assert_eq!(browsers.len(), 1, "{browsers:?}");
    for (pid, args) in &browsers {
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let real_uid = st
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().next())
            .expect("Uid line");
        assert_eq!(
            real_uid,
            uid.to_string(),
            "Chromium {pid} runs as {real_uid}"
        );
        assert!(
            !args.iter().any(|a| a == "--no-sandbox"),
            "Chromium's sandbox is off: {args:?}"
        );
    }
    let port = env.config().pool.base_port;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1)).is_err(),
        "DevTools port {port} is reachable from outside"
    );
    d.stop().await;
    assert!(
        common::chromium_browsers_under(&env.path("data")).is_empty(),
        "the daemon left a Chromium behind"
    );
}
