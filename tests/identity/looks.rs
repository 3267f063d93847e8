//! Issue 33, finding 1: idpool read pages in the page's own world. While a
//! page loaded, `Runtime.evaluate` in the main world polled
//! `document.readyState`, `outerHTML` and `document.querySelector(…)`; a page
//! that wraps them saw about 33 calls a load with no frame of its own on the
//! stack. Now every script idpool runs in a page runs in the utility world.
//!
//! The testbed's `/detect/main-world` counts such calls (see
//! `crates/testbed/src/detect.rs`); a Chromium of the test's own, driven as a
//! plain driver drives it, shows the probe catches them.

use crate::common;

use common::Env;
use common::chromium::{Chromium, eval};
use idpool::lease::cascade::RunOptions;
use idpool::tools;
use serde_json::{Value, json};

/// `(foreign, own)` from the probe's title `Probe foreign=N own=M`.
fn counts(title: &str) -> (u64, u64) {
    let num = |key: &str| {
        title
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in the title `{title}`"))
    };
    (num("foreign="), num("own="))
}

/// The value of the root's `data-*` attribute `name` in a page's HTML.
fn attr<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let at = html.find(&format!("{name}=\""))? + name.len() + 2;
    html[at..].split('"').next()
}

#[tokio::test]
async fn a_driver_reading_the_main_world_is_counted_and_idpool_never_is() {
    let env = Env::new(1).await;
    // The control: a driver that evaluates in the page's world is seen.
    let chromium = Chromium::start(env.path("").as_path()).await;
    let plain = format!("{}/detect/main-world", env.testbed.http_url());
    let page = chromium.page(1280, 800, false, &plain).await;
    let _ = eval(&page, "document.readyState").await;
    let _ = eval(&page, "document.querySelector('#go') !== null").await;
    let title = eval(&page, "document.title").await;
    let (foreign, own) = counts(title.as_str().unwrap_or(""));
    assert!(foreign >= 2, "the probe missed a driver's reads: {title}");
    assert!(own >= 2, "the probe missed the page's own reads: {title}");
    chromium.stop().await;

    let pool = env.pool();
    let url = env.url("/detect/main-world").to_string();

    // `scrape` in the browser, with a wait, every kind of action and a
    // screenshot.
    let r = tools::scrape::run(
        pool.leases(),
        json!({
            "url": url, "mode": "browser", "format": ["raw_html", "screenshot"],
            "wait_for": "#late", "max_chars": 100000,
            "actions": [
                {"type": "click", "selector": "#go"},
                {"type": "type", "selector": "#q", "text": "hello"},
                {"type": "press", "key": "Tab"},
                {"type": "scroll", "direction": "down"},
                {"type": "scroll", "selector": "#bottom"},
                {"type": "wait", "selector": "#late"}
            ]
        }),
        &RunOptions::default(),
    )
    .await
    .expect("scrape in the browser")
    .body;
    let html = r["content"].as_str().unwrap_or_default();
    assert_eq!(attr(html, "data-clicked"), Some("1"), "the click: {r}");
    assert_eq!(attr(html, "data-typed"), Some("hello"), "the typing");
    assert!(html.contains("late text"), "wait_for");
    assert_eq!(
        attr(html, "data-foreign"),
        Some("0"),
        "the page saw idpool's reads, first at {:?}",
        attr(html, "data-sample")
    );
    assert!(
        attr(html, "data-own").is_some_and(|n| n != "0"),
        "the probe ran"
    );

    // The `browser_*` tools, each of them.
    let who = RunOptions {
        caller: Some("agent".into()),
        session: Some("mcp-1".into()),
        ..RunOptions::default()
    };
    let open = tools::browser_open::run(&pool.services().browsing, json!({"url": url}), &who)
        .await
        .expect("open")
        .body;
    let id = open["session"].as_str().expect("session").to_string();
    let at = json!({"session": id});
    let snap = tools::browser_snapshot::run(&pool.services().browsing, at.clone(), &who)
        .await
        .expect("snapshot")
        .body;
    let text = snap["snapshot"].as_str().unwrap_or_default();
    let ref_of = |role: &str| {
        let line = (text.lines())
            .find(|l| l.contains(role) && l.contains("[ref="))
            .unwrap_or_else(|| panic!("no {role} in\n{text}"));
        let at = line.find("[ref=").expect("ref") + 5;
        line[at..].split(']').next().expect("ref").to_string()
    };
    let (field, button) = (ref_of("textbox"), ref_of("button \"Go\""));
    let with = |extra: Value| {
        let mut v = at.clone();
        for (k, x) in extra.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        v
    };
    tools::browser_type::run(
        &pool.services().browsing,
        with(json!({"ref": field, "text": "again"})),
        &who,
    )
    .await
    .expect("type");
    tools::browser_click::run(
        &pool.services().browsing,
        with(json!({"ref": button})),
        &who,
    )
    .await
    .expect("click");
    tools::browser_press::run(&pool.services().browsing, with(json!({"key": "Tab"})), &who)
        .await
        .expect("press");
    tools::browser_wait_for::run(
        &pool.services().browsing,
        with(json!({"selector": "#late"})),
        &who,
    )
    .await
    .expect("wait for a selector");
    tools::browser_wait_for::run(
        &pool.services().browsing,
        with(json!({"text": "late text"})),
        &who,
    )
    .await
    .expect("wait for text");
    tools::browser_screenshot::run(&pool.services().browsing, at.clone(), &who)
        .await
        .expect("screenshot");
    let nav =
        tools::browser_navigate::run(&pool.services().browsing, with(json!({"url": url})), &who)
            .await
            .expect("navigate")
            .body;
    let last = tools::browser_snapshot::run(&pool.services().browsing, at.clone(), &who)
        .await
        .expect("snapshot")
        .body;
    for v in [&open, &snap, &nav, &last] {
        let title = v["title"].as_str().unwrap_or_default();
        let (foreign, own) = counts(title);
        assert_eq!(foreign, 0, "the page saw a browser_* tool's reads: {title}");
        assert!(own > 0, "{title}");
    }
    tools::browser_close::run(&pool.services().browsing, at, &who)
        .await
        .expect("close");
    common::shutdown_and_check(&pool).await;
}

/// A tier-3 `get_reviews` page (the JavaScript-rendered reviews, waited
/// for and extracted in the browser) with the probe in it: the page counts
/// its own reads and none of idpool's.
#[tokio::test]
async fn a_tier_3_get_reviews_page_never_sees_idpool_in_its_world() {
    let env = common::shop(1).await;
    env.testbed.set_modes(|m| m.probe = true);
    let pool = env.pool();
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": "B0PROBE", "strategy": "testshop", "pages": 2}),
        RunOptions {
            only_tiers: Some(vec![3]),
            ..RunOptions::default()
        },
    )
    .await
    .expect("get_reviews on tier 3")
    .body;
    let pages = r["pages"].as_array().expect("pages");
    assert!(
        !pages.is_empty() && pages.iter().all(|p| p["tier"] == 3),
        "{r}"
    );
    assert!(!r["reviews"].as_array().expect("reviews").is_empty(), "{r}");
    // The last report of a page comes as a beacon: let it land.
    let mut reports = Vec::new();
    for _ in 0..50 {
        reports = common::probe_reports(&env);
        if reports
            .iter()
            .any(|(_, own, p)| *own > 0 && p.contains("/js-reviews/"))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    println!("probe reports: {reports:?}");
    assert!(
        reports
            .iter()
            .any(|(_, own, p)| *own > 0 && p.contains("/js-reviews/")),
        "the probe ran on the review page: {reports:?}"
    );
    let foreign: Vec<_> = reports.iter().filter(|(f, _, _)| *f > 0).collect();
    assert!(
        foreign.is_empty(),
        "the page saw idpool's reads: {foreign:?}"
    );
    common::shutdown_and_check(&pool).await;
}

/// Issue 33, findings 3 and 4: a window larger than its screen (headless's
/// 800×600 behind a 1366×768 window) and no pointing device.
#[tokio::test]
async fn the_screen_fits_the_window_and_a_desktop_has_a_mouse() {
    let env = Env::new(1).await;
    common::seat_plain_desktop(&env, 0);
    let pool = env.pool();
    let seen = probe(&env, &pool, "/detect/screen").await;
    for world in ["page", "frame"] {
        let w = &seen[world];
        let n = |k: &str, i: usize| w[k][i].as_u64().unwrap_or(0);
        assert_eq!(
            (n("screen", 0), n("screen", 1), n("screen", 3)),
            (1920, 1080, 1040),
            "{world}: {w}"
        );
        assert!(
            n("screen", 0) >= n("outer", 0) && n("screen", 3) >= n("outer", 1),
            "{world}: the window is larger than the screen: {w}"
        );
        assert!(
            n("outer", 0) >= n("inner", 0) && n("outer", 1) >= n("inner", 1),
            "{world}: {w}"
        );
        for k in ["pointer", "hover", "anyPointer", "anyHover"] {
            assert_eq!(w[k], true, "{world}: {k}: {w}");
        }
        assert_eq!(w["touch"], 0, "{world}: {w}");
    }
    assert_eq!(
        seen["page"]["outer"],
        json!([1366, 768]),
        "the profile's window"
    );
    assert_eq!(seen["worker"]["ua"], seen["page"]["ua"], "{seen}");
    assert_eq!(seen["frame"]["ua"], seen["page"]["ua"], "{seen}");
    // Finding 5: rtt 0 and downlink 10 came from the browsers' namespace,
    // which had no link but `lo` (Chromium took itself for offline).
    let c = &seen["page"]["connection"];
    assert!(c[0].as_f64().unwrap_or(0.0) > 0.0, "rtt: {c}");
    assert!(c[1].as_f64().unwrap_or(0.0) > 0.0, "downlink: {c}");
    common::shutdown_and_check(&pool).await;
}

/// Issue 33, step 4, the other way round: a phone has a coarse pointer
/// without hover and a touch screen, in the page and its iframe.
#[tokio::test]
async fn a_phone_has_a_touch_screen_and_no_mouse() {
    let env = Env::new(1).await;
    env.write(
        "profiles/default.toml",
        "emulation = \"chrome_149\"\nplatform = \"android\"\npretend_os = true\nviewport = { width = 412, height = 915 }\n",
    );
    let pool = env.pool();
    let seen = probe(&env, &pool, "/detect/screen").await;
    println!("phone: {seen}");
    for world in ["page", "frame"] {
        let w = &seen[world];
        for k in ["pointer", "hover", "anyPointer", "anyHover"] {
            assert_eq!(w[k], false, "{world}: {k}: {w}");
        }
        assert!(
            w["touch"].as_u64().unwrap_or(0) >= 1,
            "{world}: no touch screen: {w}"
        );
    }
    assert!(
        seen["page"]["ua"]
            .as_str()
            .is_some_and(|u| u.contains("Android")),
        "{seen}"
    );
    common::shutdown_and_check(&pool).await;
}

/// The JSON the probe page at `path` wrote into `#out`, scraped in the
/// browser once it says `#done`.
async fn probe(env: &Env, pool: &idpool::pool::Pool, path: &str) -> Value {
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": env.url(path).to_string(), "mode": "browser",
               "format": "raw_html", "wait_for": "#done"}),
        &RunOptions::default(),
    )
    .await
    .expect("scrape in the browser")
    .body;
    let html = r["content"].as_str().unwrap_or_default();
    let at = html.find("<pre id=\"out\">").expect("the probe's output") + 14;
    let json = &html[at..at + html[at..].find("</pre>").expect("end")];
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Issue 33, finding 2: `getHighEntropyValues` answered an empty
/// `fullVersionList` and an empty `uaFullVersion`.
#[tokio::test]
async fn the_user_agent_has_its_full_version_in_the_page_and_a_worker() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let seen = probe(&env, &pool, "/detect/hints").await;
    let status = pool.reports().status_now();
    let version = status["slots"][0]["browser"]["version"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .unwrap_or_else(|| panic!("no version in {status}"))
        .to_string();
    assert_eq!(version.split('.').count(), 4, "{version}");
    for world in ["page", "worker"] {
        let v = &seen[world];
        assert_eq!(v["uaFullVersion"], version.as_str(), "{world}: {v}");
        let list = v["fullVersionList"].as_array().cloned().unwrap_or_default();
        assert!(!list.is_empty(), "{world}: {v}");
        assert!(
            list.iter()
                .any(|b| b["brand"] == "Chromium" && b["version"] == version.as_str()),
            "{world}: {v}"
        );
        assert_eq!(v["bitness"], "64", "{world}: {v}");
        assert_eq!(v["formFactors"], json!(["Desktop"]), "{world}: {v}");
        assert_ne!(v["platformVersion"], "", "{world}: {v}");
    }
    common::shutdown_and_check(&pool).await;
}

/// What BotD said in a page of `/detect/botd` (`<pre id="done">`).
fn botd_verdict(html: &str) -> Value {
    let at = html.find("<pre id=\"done\">").expect("BotD's verdict") + 15;
    let json = &html[at..at + html[at..].find("</pre>").expect("end")];
    serde_json::from_str(&json.replace("&quot;", "\"")).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// The published detector: `@fingerprintjs/botd` (pinned in
/// `tests/detectors/package.json`, installed by `scripts/test.sh`) says the
/// slot browser is no bot, with the default desktop profile, headless. A
/// plain `chromium --headless=new` on the same page is caught, which shows
/// the detector works here.
#[tokio::test]
async fn botd_says_the_slot_browser_is_no_bot_and_catches_plain_headless() {
    let module =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(idpool_testbed::detect::BOTD_MODULE);
    assert!(
        module.is_file(),
        "BotD is not installed at {}: run `npm ci --prefix tests/detectors` (scripts/test.sh does)",
        module.display()
    );
    let env = Env::new(1).await;
    // The control: a Chromium nobody disguised.
    let chromium = Chromium::start(env.path("").as_path()).await;
    let plain = format!("{}/detect/botd?via=plain", env.testbed.http_url());
    let page = chromium.page(1280, 800, false, &plain).await;
    let control = common::chromium::until(
        &page,
        "document.getElementById('done') && document.getElementById('done').textContent",
        30,
        "BotD's verdict in plain headless",
    )
    .await;
    chromium.stop().await;
    let control: Value = serde_json::from_str(control.as_str().unwrap_or("")).expect("json");
    assert_eq!(
        control["bot"], true,
        "BotD missed plain headless: {control}"
    );

    let pool = env.pool();
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": env.url("/detect/botd?via=slot").to_string(), "mode": "browser",
               "format": "raw_html", "wait_for": "#done"}),
        &RunOptions::default(),
    )
    .await
    .expect("scrape in the browser")
    .body;
    let verdict = botd_verdict(r["content"].as_str().unwrap_or_default());
    assert!(
        verdict.get("error").is_none(),
        "BotD failed to run: {verdict}"
    );
    assert_eq!(
        verdict["bot"], false,
        "BotD caught the slot browser: {verdict}"
    );
    common::shutdown_and_check(&pool).await;
}

/// Issue 56: BotD stays clean on every profile the project ships
/// (`profiles/*.toml`), one slot each, each with its own persona.
#[tokio::test]
async fn botd_says_no_bot_on_every_bundled_profile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join(idpool_testbed::detect::BOTD_MODULE).is_file(),
        "BotD is not installed: run `npm ci --prefix tests/detectors` (scripts/test.sh does)"
    );
    let env = Env::new(1).await;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root.join("profiles")).expect("profiles/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .to_string();
            env.write(
                &format!("profiles/{name}.toml"),
                &std::fs::read_to_string(&path).expect("profile"),
            );
            names.push(name);
        }
    }
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    let list = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let config = std::fs::read_to_string(env.path("idpool.toml"))
        .expect("config")
        .replace("size = 1\n", &format!("profiles = [{list}]\n"));
    env.write("idpool.toml", &config);
    let pool = env.pool();
    for (slot, name) in names.iter().enumerate() {
        let r = tools::scrape::run(
            pool.leases(),
            json!({"url": env.url(&format!("/detect/botd?via={name}")).to_string(), "mode": "browser",
                   "format": "raw_html", "wait_for": "#done"}),
            &RunOptions {
                slot: Some(slot),
                ..RunOptions::default()
            },
        )
        .await
        .expect("scrape in the browser")
        .body;
        let verdict = botd_verdict(r["content"].as_str().unwrap_or_default());
        assert!(verdict.get("error").is_none(), "{name}: {verdict}");
        assert_eq!(
            verdict["bot"], false,
            "BotD caught profile {name}: {verdict}"
        );
    }
    common::shutdown_and_check(&pool).await;
}
