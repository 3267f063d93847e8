//! Identity fidelity: each slot's HTTP tier calibrated against its own
//! Chromium, checked where a site would check it, on the testbed.

use crate::common;

use common::{Env, shop, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::request::FetchRequest;
use idpool::tools;
use idpool::wire::fingerprint::tls::ja4_c;
use idpool_testbed::LogEntry;
use serde_json::json;

fn logged(env: &Env, path: &str) -> LogEntry {
    env.testbed
        .log()
        .into_iter()
        .rev()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("{path} not in the testbed log"))
}

/// The hex codes a residual entry's side names (`0xca34 (trust_anchors), ...`).
fn codes(text: &str) -> Vec<u16> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|w| w.strip_prefix("0x"))
        .filter_map(|h| u16::from_str_radix(h, 16).ok())
        .collect()
}

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
    pool.browse(env.url("/product/B0FP?via=browser"), None, Some(0))
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
async fn after_calibration_the_http_tier_sends_what_the_slots_browser_sends() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let slot = pool.leases().slots_for_tests()[0].clone();
    assert_eq!(slot.calibration_status().state, "pending");
    // The first browser use launches Chromium; the slot calibrates after it.
    pool.browse(env.url("/product/B0CAL?via=first"), None, Some(0))
        .await
        .expect("browser tier");
    // The call had its page at once; the run goes on behind it.
    slot.calibration_settled().await;
    let status = slot.calibration_status();
    println!("{}", serde_json::to_string_pretty(&status).unwrap());
    assert_eq!(status.state, "calibrated", "{status:?}");
    assert_eq!(status.runs, 1);
    let record = slot.calibration_record().expect("a record");
    assert!(
        record.report.h2_equal && record.report.headers_equal,
        "{:?}",
        record.report
    );
    assert!(
        record.report.xhr_headers_equal,
        "{:?}",
        record.report.residual
    );
    assert_eq!(
        record.report.h1_headers_equal,
        Some(true),
        "the HTTP/1.1 sample: {:?}",
        record.report.residual
    );
    // Now at the testbed: the browser (with the cookie it earned) and the
    // calibrated HTTP tier, one navigation each.
    pool.browse(env.url("/product/B0CAL?via=browser"), None, Some(0))
        .await
        .expect("browser tier");
    pool.fetch(
        FetchRequest::get(env.url("/product/B0CAL?via=http")),
        Some(0),
    )
    .await
    .expect("http tier");
    let browser = logged(&env, "/product/B0CAL?via=browser");
    let http = logged(&env, "/product/B0CAL?via=http");
    let strip = |h: &[(String, String)]| -> Vec<(String, String)> {
        h.iter().filter(|(k, _)| k != ":path").cloned().collect()
    };
    println!(
        "browser: {:?}\nhttp:    {:?}",
        browser.header_order, http.header_order
    );
    assert!(browser.header_order.iter().any(|(k, _)| k == "cookie"));
    assert_eq!(
        strip(&http.header_order),
        strip(&browser.header_order),
        "identical header lists: names, order, values"
    );
    assert_eq!(http.akamai, browser.akamai, "identical HTTP/2 fingerprints");
    assert_eq!(
        http.h2_priority, browser.h2_priority,
        "identical HEADERS priority"
    );
    // JA4: parts a and b equal; part c differs only by what the residual names.
    println!("browser {}\nhttp    {}", browser.ja4, http.ja4);
    let part = |j: &str, n: usize| j.split('_').nth(n).unwrap_or("").to_string();
    assert_eq!(part(&browser.ja4, 0), part(&http.ja4, 0), "part a");
    assert_eq!(part(&browser.ja4, 1), part(&http.ja4, 1), "part b");
    assert_eq!(
        record.report.browser_ja4, browser.ja4,
        "the listener and the testbed agree"
    );
    assert_eq!(record.report.http_ja4, http.ja4);
    let hello = record
        .browser
        .navigation
        .hello
        .clone()
        .expect("browser hello");
    let (mut exts, mut sigs) = (hello.extensions.clone(), hello.sig_algs.clone());
    for d in &record.report.residual {
        match d.what.as_str() {
            "tls.extensions" => {
                let only_browser = codes(&d.browser);
                exts.retain(|e| !only_browser.contains(e));
                exts.extend(codes(&d.http));
            }
            "tls.signature_algorithms" => {
                let only_browser = codes(&d.browser);
                sigs.retain(|s| !only_browser.contains(s));
                sigs.extend(codes(&d.http));
            }
            _ => {}
        }
    }
    assert_eq!(
        ja4_c(&exts, &sigs),
        part(&http.ja4, 2),
        "the browser's part c without the residual is the HTTP tier's: {:?}",
        record.report.residual
    );
    // Over HTTP/1.1 (the testbed's plain port, through the egress for the
    // browser): the same lines in the same order and case, `Host` first.
    let h1 = |via: &str| format!("{}/product/B0H1?via={via}", env.testbed.http_url());
    pool.browse(url::Url::parse(&h1("browser")).expect("url"), None, Some(0))
        .await
        .expect("browser tier, HTTP/1.1");
    pool.fetch(
        FetchRequest::get(url::Url::parse(&h1("http")).expect("url")),
        Some(0),
    )
    .await
    .expect("http tier, HTTP/1.1");
    let lines = |via: &str| -> Vec<String> {
        logged(&env, &format!("/product/B0H1?via={via}"))
            .head_lines
            .into_iter()
            .skip(1)
            .map(|l| match l.split_once(':') {
                // Which cookies each jar holds for plain HTTP is not the
                // point here: the field's name and place are.
                Some((k, _)) if k.eq_ignore_ascii_case("cookie") => format!("{k}: (cookies)"),
                _ => l,
            })
            .collect()
    };
    let (b, h) = (lines("browser"), lines("http"));
    println!("browser h1: {b:?}\nhttp h1:    {h:?}");
    assert!(b[0].starts_with("Host: "), "{b:?}");
    assert_eq!(h, b, "the HTTP tier's HTTP/1.1 head is its browser's");
    // With a host name both send SNI: still parts a and b equal.
    pool.browse(env.alt_url("/product/B0SNI?via=browser"), None, Some(0))
        .await
        .expect("browser tier, localhost");
    pool.fetch(
        FetchRequest::get(env.alt_url("/product/B0SNI?via=http")),
        Some(0),
    )
    .await
    .expect("http tier, localhost");
    let (b, h) = (
        logged(&env, "/product/B0SNI?via=browser").ja4,
        logged(&env, "/product/B0SNI?via=http").ja4,
    );
    println!("with SNI: browser {b}\n          http    {h}");
    assert!(b.starts_with("t13d"), "{b}");
    assert_eq!((part(&b, 0), part(&b, 1)), (part(&h, 0), part(&h, 1)));
    client_hints_a_site_asked_for(&env, &pool, &record).await;
    shutdown_and_check(&pool).await;
}

/// The calibration's `hints/` sample, then the testbed asking for two
/// high-entropy hints (and later one critical hint): both tiers send what
/// was asked, only that, with the same values, in the same places; a
/// `Critical-CH` hint not yet sent makes each send the navigation again.
async fn client_hints_a_site_asked_for(
    env: &Env,
    pool: &idpool::pool::Pool,
    record: &idpool::identity::calibrate::Record,
) {
    assert_eq!(
        record.report.asked_headers_equal,
        Some(true),
        "the asked sample: {:?}",
        record.report.residual
    );
    let asked = record.calibration.asked.as_ref().expect("an asked sample");
    println!("hints the browser sends when asked: {:?}", asked.hints);
    for h in [
        "sec-ch-ua-full-version-list",
        "sec-ch-ua-platform-version",
        "sec-ch-ua-arch",
    ] {
        assert!(
            asked.hints.iter().any(|n| n == h),
            "{h} in {:?}",
            asked.hints
        );
    }
    let full = pool.leases().slots_for_tests()[0]
        .browser_facts()
        .version
        .expect("the running Chromium's version");
    // `Chromium 156.0.8078.114 built on ...`: the dotted number.
    let full = full
        .split_whitespace()
        .find(|w| w.split('.').count() == 4 && w.split('.').all(|p| p.parse::<u32>().is_ok()))
        .expect("a full version")
        .to_string();
    let both = |ask: &str, via: &str| format!("/detect/accept-ch?ask={ask}&via={via}");
    let two = "Sec-CH-UA-Full-Version-List,Sec-CH-UA-Platform-Version";
    pool.browse(env.url(&both(two, "browser")), None, Some(0))
        .await
        .expect("ask the browser");
    pool.browse(env.url("/product/B0CH?via=browser"), None, Some(0))
        .await
        .expect("browser");
    pool.fetch(FetchRequest::get(env.url(&both(two, "http"))), Some(0))
        .await
        .expect("ask the HTTP tier");
    pool.fetch(
        FetchRequest::get(env.url("/product/B0CH?via=http")),
        Some(0),
    )
    .await
    .expect("http");
    let (b, h) = (
        logged(env, "/product/B0CH?via=browser").header_order,
        logged(env, "/product/B0CH?via=http").header_order,
    );
    let strip = |h: &[(String, String)]| -> Vec<(String, String)> {
        h.iter().filter(|(k, _)| k != ":path").cloned().collect()
    };
    println!("asked, browser: {b:?}\nasked, http:    {h:?}");
    let value = |h: &[(String, String)], name: &str| {
        h.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    };
    let list =
        value(&b, "sec-ch-ua-full-version-list").expect("the browser sends the full version list");
    assert!(
        list.contains(&format!("v=\"{full}\"")),
        "{list} names Chromium {full}"
    );
    assert!(value(&b, "sec-ch-ua-platform-version").is_some());
    assert_eq!(value(&b, "sec-ch-ua-arch"), None, "not asked for");
    assert_eq!(
        strip(&h),
        strip(&b),
        "the HTTP tier sends what the browser sends to an origin that asked"
    );
    // A critical hint: the first request lacks it, so each sends it again.
    let crit = |via: &str| {
        format!("/detect/accept-ch?ask=Sec-CH-UA-Arch&critical=Sec-CH-UA-Arch&via={via}")
    };
    pool.browse(env.url(&crit("browser")), None, Some(0))
        .await
        .expect("critical, browser");
    pool.fetch(FetchRequest::get(env.url(&crit("http"))), Some(0))
        .await
        .expect("critical, http");
    let sent = |via: &str| -> Vec<bool> {
        env.testbed
            .log()
            .into_iter()
            .filter(|e| e.path == crit(via))
            .map(|e| value(&e.header_order, "sec-ch-ua-arch").is_some())
            .collect()
    };
    assert_eq!(
        sent("browser"),
        [false, true],
        "Chromium retries with the critical hint"
    );
    assert_eq!(sent("http"), sent("browser"), "so does the HTTP tier");
    // An empty Accept-CH forgets: neither sends a high-entropy hint again.
    pool.browse(env.url(&both("", "browser")), None, Some(0))
        .await
        .expect("forget, browser");
    pool.fetch(FetchRequest::get(env.url(&both("", "http"))), Some(0))
        .await
        .expect("forget, http");
    pool.browse(env.url("/product/B0CH?via=browser-forgot"), None, Some(0))
        .await
        .expect("browser");
    pool.fetch(
        FetchRequest::get(env.url("/product/B0CH?via=http-forgot")),
        Some(0),
    )
    .await
    .expect("http");
    let (b, h) = (
        logged(env, "/product/B0CH?via=browser-forgot").header_order,
        logged(env, "/product/B0CH?via=http-forgot").header_order,
    );
    assert_eq!(value(&b, "sec-ch-ua-arch"), None);
    assert_eq!(strip(&h), strip(&b));
}

fn tiers_of(page: &serde_json::Value) -> Vec<(u64, String)> {
    page["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            (
                a["tier"].as_u64().unwrap_or(0),
                a["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn consistency_mode_accepts_the_calibrated_http_tier_and_refuses_it_uncalibrated() {
    let env = shop(1).await;
    env.testbed.set_modes(|m| {
        m.challenge = true;
        m.consistency = true;
    });
    let pool = env.pool();
    let item = "B0TESTA1";
    let reviews = |page: u64| {
        tools::get_reviews::run(
            pool.leases(),
            json!({"item": item, "strategy": "testshop", "page": page}),
            RunOptions::default(),
        )
    };
    // Page 1: the HTTP tier meets the challenge; the slot's Chromium passes
    // it (binding the clearance to itself) and then calibrates.
    let r = reviews(1).await.expect("page 1").body;
    let attempts = tiers_of(&r["pages"][0]);
    println!("page 1: {attempts:?}");
    assert_eq!(attempts.first(), Some(&(1, "challenge".to_string())));
    assert_eq!(attempts.last(), Some(&(3, "ok".to_string())));
    // Pages 2 and 3: the calibrated HTTP tier replays the clearance on tier 1.
    // Page 1 returned without waiting for the calibration; page 2's HTTP
    // request waits for it (uncalibrated, it would be refused).
    for (page, count) in [(2, 10), (3, 2)] {
        let r = reviews(page).await.expect("page").body;
        assert_eq!(
            tiers_of(&r["pages"][0]),
            [(1, "ok".to_string())],
            "page {page}: {r}"
        );
        assert_eq!(r["count"], count, "the item has 22 reviews");
        assert_eq!(
            pool.leases().slots_for_tests()[0]
                .calibration_status()
                .state,
            "calibrated"
        );
    }
    // Tier 2 (a navigation), through the cascade, is accepted too.
    let r = tools::get_reviews::run(
        pool.leases(),
        json!({"item": item, "strategy": "testshop", "page": 2}),
        RunOptions {
            only_tiers: Some(vec![2]),
            ..RunOptions::default()
        },
    )
    .await
    .expect("tier 2")
    .body;
    assert_eq!(tiers_of(&r["pages"][0]), [(2, "ok".to_string())], "{r}");
    let nav = pool
        .fetch(
            FetchRequest::get(env.url(&format!("/product-reviews/{item}?page=2"))),
            Some(0),
        )
        .await
        .expect("tier 2");
    assert_eq!(nav.response.status, 200, "{}", nav.response.text());
    assert_eq!(env.testbed.stats().inconsistent, 0);
    // The same slot, same cookie, calibration switched off: refused on both.
    pool.leases().slots_for_tests()[0]
        .set_calibration(None)
        .expect("uncalibrate");
    let plain = pool
        .fetch(
            FetchRequest::get(env.url(&format!("/product-reviews/{item}?page=2"))),
            Some(0),
        )
        .await
        .expect("tier 2 uncalibrated");
    assert_eq!(plain.response.status, 403);
    assert!(
        plain.response.text().contains("header order"),
        "{}",
        plain.response.text()
    );
    for tier in [1u8, 2] {
        let r = tools::get_reviews::run(
            pool.leases(),
            json!({"item": item, "strategy": "testshop", "page": 2}),
            RunOptions {
                only_tiers: Some(vec![tier]),
                ..RunOptions::default()
            },
        )
        .await;
        let text = match &r {
            Ok(v) => v.body.to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            text.contains(&format!("tier {tier}: hard_block")),
            "tier {tier} uncalibrated is refused: {text}"
        );
    }
    assert!(env.testbed.stats().inconsistent >= 2);
    shutdown_and_check(&pool).await;
}

/// A Chromium "executable" that reports `version` and runs the real one.
fn write_wrapper(env: &Env, version: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = idpool::identity::browser::launcher::find_executable(None).expect("chromium");
    let path = env.path("chromium-wrapper");
    let tmp = env.path("chromium-wrapper.tmp");
    std::fs::write(
        &tmp,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo \"Chromium {version} test wrapper\"; exit 0; fi\nexec {} \"$@\"\n",
            real.display()
        ),
    )
    .expect("write wrapper");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&tmp, &path).expect("rename wrapper");
    path
}

#[tokio::test]
async fn a_new_chromium_version_recalibrates_at_the_next_launch() {
    let env = Env::new(1).await;
    let wrapper = write_wrapper(&env, "900.0.0.1");
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        &format!("[browser]\nexecutable = \"{}\"\n", wrapper.display()),
    );
    let pool = env.pool();
    let slot = pool.leases().slots_for_tests()[0].clone();
    let visit = |tag: &str| {
        let (pool, slot, url) = (&pool, &slot, env.url(&format!("/product/B0VER?{tag}")));
        async move {
            let r = pool.browse(url, None, Some(0)).await;
            slot.calibration_settled().await;
            r
        }
    };
    visit("a").await.expect("first launch");
    let s = slot.calibration_status();
    assert_eq!((s.state, s.runs), ("calibrated", 1), "{s:?}");
    assert!(
        s.chromium.as_deref().unwrap_or("").contains("900.0.0.1"),
        "{s:?}"
    );
    // The same browser again, and a relaunch of the same version: no new run.
    visit("b").await.expect("same browser");
    slot.browser().close().await;
    visit("c").await.expect("relaunch, same version");
    assert_eq!(slot.calibration_status().runs, 1);
    // Chromium "upgraded" (a new build of the same major, which the user
    // agent already claims) while the browser runs: the record turns stale now
    // and is renewed at the next launch.
    write_wrapper(&env, "900.0.0.2");
    slot.browser().close().await;
    assert_eq!(slot.browser_facts().launches, 2);
    visit("d").await.expect("relaunch, new version");
    let s = slot.calibration_status();
    assert_eq!((s.state, s.runs), ("calibrated", 2), "{s:?}");
    assert!(
        s.chromium.as_deref().unwrap_or("").contains("900.0.0.2"),
        "{s:?}"
    );
    shutdown_and_check(&pool).await;
    drop(pool);
    // A restart applies the saved calibration before any browser launches.
    let pool = env.pool();
    let slot = pool.leases().slots_for_tests()[0].clone();
    assert!(
        slot.calibration().is_some(),
        "saved calibration applied at start"
    );
    let s = slot.calibration_status();
    assert_eq!((s.state, s.runs), ("calibrated", 0), "{s:?}");
    pool.fetch(FetchRequest::get(env.url("/product/B0VER?http")), Some(0))
        .await
        .expect("http tier");
    let http = logged(&env, "/product/B0VER?http");
    let browser = logged(&env, "/product/B0VER?d");
    let names =
        |e: &LogEntry| -> Vec<String> { e.header_order.iter().map(|(k, _)| k.clone()).collect() };
    assert_eq!(
        names(&http),
        names(&browser),
        "the browser's header order, from the saved record"
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn idpool_calibrate_prints_both_fingerprints_and_the_residual() {
    let env = Env::new(1).await;
    // No daemon answers at the config's default address in this test's
    // namespace: the command works on the data dir directly.
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        "[server]\nlisten = \"127.0.0.1:9\"\n",
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .args(["--config"])
        .arg(env.path("idpool.toml"))
        .args(["calibrate", "--slot", "0"])
        .output()
        .await
        .expect("idpool runs");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    let line = |label: &str| {
        text.lines()
            .skip_while(|l| !l.trim_start().starts_with(label))
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let ja4 = line("JA4");
    assert!(
        ja4.contains("browser t13") && ja4.contains("http    t13"),
        "{ja4}"
    );
    assert!(
        line("HTTP/2 (Akamai)").contains("= browser 1:65536;"),
        "{text}"
    );
    assert!(
        line("navigation headers").starts_with("  navigation headers     ="),
        "{text}"
    );
    assert!(text.contains("residual ("), "{text}");
    assert!(
        text.contains("tls.extensions: browser also sends 0xca34 (trust_anchors)"),
        "{text}"
    );
    assert!(
        common::chromium_browsers_under(env.data_dir()).is_empty(),
        "the command ends its Chromium"
    );
}
