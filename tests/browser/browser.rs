//! The browser tier against real Chromium and the testbed over loopback.
//! Every test ends with `shutdown_and_check`: no Chromium it started survives.

use crate::common;

use std::time::Duration;

use common::{Env, chromium_browsers_under, shutdown_and_check};
use idpool::lease::Via;
use idpool::request::FetchRequest;
use idpool::strategy::Outcome;
use idpool_testbed::{Fault, FaultKind};

#[tokio::test]
async fn lazy_launch_one_chromium_on_its_slot_port_and_dir() {
    let env = Env::new(3).await;
    env.write_config_with(3, true, 19300, "");
    let pool = env.pool();
    let data = env.path("data");
    // HTTP traffic launches nothing.
    pool.fetch(FetchRequest::get(env.url("/product/B0LAZY")), Some(1))
        .await
        .expect("http");
    assert!(chromium_browsers_under(&data).is_empty());
    assert!(
        pool.leases()
            .slots_for_tests()
            .iter()
            .all(|s| !s.browser_facts().running)
    );

    let f = pool
        .browse(env.url("/product/B0LAZY"), None, Some(1))
        .await
        .expect("browser");
    assert_eq!((f.via, f.slot, f.response.status), (Via::Browser, 1, 200));
    let running = chromium_browsers_under(&data);
    assert_eq!(running.len(), 1, "{running:?}");
    let (pid, args) = &running[0];
    assert!(
        args.contains(&"--remote-debugging-port=19301".to_string()),
        "{args:?}"
    );
    let dir = format!(
        "--user-data-dir={}",
        data.join("slots/1/chromium").display()
    );
    assert!(args.contains(&dir), "{args:?}");
    let facts = pool.leases().slots_for_tests()[1].browser_facts();
    assert_eq!(
        (facts.running, facts.pid, facts.port, facts.launches),
        (true, Some(*pid), 19301, 1)
    );
    assert!(facts.rss_mb.is_some_and(|m| m > 0));
    // PSS counts the pages Chromium's processes share once: below the RSS sum.
    assert!(
        facts
            .pss_mb
            .is_some_and(|p| p > 0 && Some(p) < facts.rss_mb),
        "pss {:?} rss {:?}",
        facts.pss_mb,
        facts.rss_mb
    );
    assert!(
        !pool.leases().slots_for_tests()[0].browser_facts().running
            && !pool.leases().slots_for_tests()[2].browser_facts().running
    );
    assert_eq!(
        std::fs::read_to_string(data.join("slots/1/chromium.pid"))
            .expect("pid file")
            .trim(),
        pid.to_string()
    );
    shutdown_and_check(&pool).await;
    assert!(
        !data.join("slots/1/chromium.pid").exists(),
        "pid file left after a clean close"
    );
}

#[tokio::test]
async fn browser_passes_the_challenge_and_the_slots_http_tier_follows() {
    let env = Env::new(2).await;
    env.testbed.set_modes(|m| {
        m.challenge = true;
        m.gate = true;
    });
    let pool = env.pool();
    let url = env.url("/product/B0CHAL");
    let http = |slot| pool.fetch(FetchRequest::get(url.clone()), Some(slot));
    assert_eq!(http(0).await.expect("http 0").outcome, Outcome::Challenge);

    let b = pool
        .browse(url.clone(), None, Some(0))
        .await
        .expect("browser 0");
    assert_eq!((b.response.status, b.outcome), (200, Outcome::Ok));
    assert!(b.response.text().contains("productTitle"));
    assert!(
        b.response.cookies_set.iter().any(|c| c == "tb_clearance"),
        "{:?}",
        b.response.cookies_set
    );

    assert_eq!(
        http(0).await.expect("http 0 again").outcome,
        Outcome::Ok,
        "clearance cookie did not reach the jar"
    );
    assert_eq!(
        http(1).await.expect("http 1").outcome,
        Outcome::Challenge,
        "slot 1 must not share slot 0's identity"
    );
    // Real Chromium passes the JA4 gate as a browser.
    assert!(env.testbed.stats().by_ja4.values().all(|s| s.blocked == 0));
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn both_tiers_send_the_same_user_agent_and_language() {
    let env = Env::new(1).await;
    env.write("profiles/default.toml", "emulation = \"chrome_149\"\nplatform = \"windows\"\npretend_os = true\naccept_language = \"de-DE,de;q=0.9,en;q=0.6\"\n");
    let pool = env.pool();
    pool.fetch(
        FetchRequest::get(env.url("/product/B0ID?tier=http")),
        Some(0),
    )
    .await
    .expect("http");
    pool.browse(env.url("/product/B0ID?tier=browser"), None, Some(0))
        .await
        .expect("browser");
    let log = env.testbed.log();
    let find = |p: &str| log.iter().find(|e| e.path == p).cloned().expect("logged");
    let (h, b) = (
        find("/product/B0ID?tier=http"),
        find("/product/B0ID?tier=browser"),
    );
    println!(
        "http:    {:?} | {:?} | {:?} | {:?}",
        h.user_agent, h.accept_language, h.sec_ch_ua, h.sec_ch_ua_platform
    );
    println!(
        "browser: {:?} | {:?} | {:?} | {:?}",
        b.user_agent, b.accept_language, b.sec_ch_ua, b.sec_ch_ua_platform
    );
    // Both tiers claim the Chromium that runs, not the emulation's 149.
    let major = idpool::identity::browser::launcher::installed_major(None).expect("chromium");
    let chrome = format!("Chrome/{major}.0.0.0");
    assert!(
        h.user_agent
            .as_deref()
            .is_some_and(|ua| ua.contains("Windows NT") && ua.contains(&chrome)),
        "{h:?}"
    );
    assert!(
        h.sec_ch_ua
            .as_deref()
            .is_some_and(|v| v.contains(&format!("\"Chromium\";v=\"{major}\""))),
        "{h:?}"
    );
    assert_eq!(h.user_agent, b.user_agent);
    assert_eq!(h.sec_ch_ua, b.sec_ch_ua);
    assert!(
        !b.user_agent
            .as_deref()
            .unwrap_or("")
            .contains("HeadlessChrome")
    );
    assert_eq!(h.user_agent, b.user_agent);
    assert_eq!(h.accept_language, b.accept_language);
    assert_eq!(h.sec_ch_ua_platform, b.sec_ch_ua_platform);
    assert_eq!(h.sec_ch_ua, b.sec_ch_ua);
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn browser_reports_the_real_status_of_the_main_document() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let nf = pool
        .browse(env.url("/product/no.such.item"), None, Some(0))
        .await
        .expect("404 page");
    assert_eq!(nf.response.status, 404);
    env.testbed.set_modes(|m| {
        m.fault = Some(Fault {
            kind: FaultKind::Error,
            path_prefix: Some("/product/".into()),
            remaining: Some(1),
            delay_ms: 0,
            status: 503,
            size_mb: 0,
        })
    });
    let su = pool
        .browse(env.url("/product/B0STATUS"), None, Some(0))
        .await
        .expect("503 page");
    assert_eq!((su.response.status, su.outcome), (503, Outcome::Failed));
    let ok = pool
        .browse(env.url("/product/B0STATUS"), None, Some(0))
        .await
        .expect("200 page");
    assert_eq!(ok.response.status, 200);
    shutdown_and_check(&pool).await;
}

fn sid_in(html: &str) -> Option<String> {
    let start = html.find("tb_sid=")? + 7;
    Some(
        html[start..]
            .chars()
            .take_while(|c| c.is_ascii_hexdigit())
            .collect(),
    )
}

#[tokio::test]
async fn tabs_recycle_while_process_and_cookies_survive() {
    let env = Env::new(1).await;
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        "[browser]\nrecycle_after = 5\n",
    );
    let pool = env.pool();
    pool.browse(env.url("/product/B0REC"), None, Some(0))
        .await
        .expect("first");
    let pid = pool.leases().slots_for_tests()[0]
        .browser_facts()
        .pid
        .expect("running");
    let mut sids = Vec::new();
    for _ in 1..12 {
        let f = pool
            .browse(env.url("/whoami"), None, Some(0))
            .await
            .expect("fetch");
        sids.push(sid_in(&f.response.text()).expect("tb_sid sent"));
    }
    // The calibration behind the first call navigates six times too (its
    // HTTP/2 pages, its HTTP/1.1 page, the origin that asks for client
    // hints and its page, and the self-check): 18 operations.
    pool.leases().slots_for_tests()[0]
        .calibration_settled()
        .await;
    let facts = pool.leases().slots_for_tests()[0].browser_facts();
    assert_eq!(
        (facts.total_ops, facts.recycles, facts.ops_since_recycle),
        (18, 3, 3),
        "{facts:?}"
    );
    assert_eq!(facts.pid, Some(pid), "recycling restarted the process");
    assert_eq!(facts.launches, 1);
    sids.dedup();
    assert_eq!(sids.len(), 1, "cookies changed across recycling: {sids:?}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_killed_chromium_is_reaped_counted_and_relaunched() {
    let env = Env::new(1).await;
    let pool = env.pool();
    pool.browse(env.url("/product/B0KILL"), None, Some(0))
        .await
        .expect("first");
    // The calibration behind the first call is done with this browser.
    pool.leases().slots_for_tests()[0]
        .calibration_settled()
        .await;
    let old = pool.leases().slots_for_tests()[0]
        .browser_facts()
        .pid
        .expect("running");
    // SAFETY: a plain signal to the Chromium this test started.
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    for _ in 0..100 {
        if !pool.leases().slots_for_tests()[0].browser_facts().running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let f = pool
        .browse(env.url("/product/B0KILL"), None, Some(0))
        .await
        .expect("after the crash");
    assert_eq!(f.response.status, 200);
    let facts = pool.leases().slots_for_tests()[0].browser_facts();
    assert_ne!(facts.pid, Some(old));
    assert_eq!((facts.crashes, facts.launches), (1, 2), "{facts:?}");
    assert!(
        facts
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("exited unexpectedly")),
        "{facts:?}"
    );
    assert!(!idpool::identity::browser::process::pid_alive(old));
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_foreign_listener_on_a_slot_port_fails_that_slot_only() {
    let env = Env::new(2).await;
    let base = common::free_base_port(2);
    env.write_config_with(2, true, base, "");
    let pool = env.pool();
    // The squatter sits where the browsers live: in their namespace when
    // they are isolated, else on this machine's loopback.
    let bind = move || std::net::TcpListener::bind(("127.0.0.1", base + 1));
    let _squatter = match pool.host().netns.as_ref() {
        Some(ns) => ns.run_sync(bind).expect("inside"),
        None => bind(),
    }
    .expect("bind squatter");
    // Isolated browsers do not care about this machine's loopback at all.
    let _outside = pool
        .host()
        .netns
        .as_ref()
        .map(|_| std::net::TcpListener::bind(("127.0.0.1", base)).expect("bind outside"));
    let err = pool
        .browse(env.url("/product/B0PORT"), None, Some(1))
        .await
        .expect_err("port taken");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "slot 1: CDP port {} on 127.0.0.1 is already in use",
            base + 1
        )),
        "{msg}"
    );
    assert!(
        pool.leases().slots_for_tests()[1]
            .browser_facts()
            .last_error
            .is_some()
    );
    let ok = pool
        .browse(env.url("/product/B0PORT"), None, Some(0))
        .await
        .expect("slot 0 works");
    assert_eq!(ok.response.status, 200);
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn browser_operations_on_one_slot_queue_and_on_two_slots_overlap() {
    let env = Env::new(2).await;
    env.testbed.set_modes(|m| {
        m.fault = Some(Fault {
            kind: FaultKind::Slow,
            path_prefix: Some("/product/SLOW".into()),
            remaining: None,
            delay_ms: 800,
            status: 200,
            size_mb: 0,
        })
    });
    let pool = env.pool();
    // Warm both browsers so launch time does not blur the picture.
    for s in 0..2 {
        pool.browse(env.url("/"), None, Some(s))
            .await
            .expect("warm");
    }
    let (a, b) = tokio::join!(
        pool.browse(env.url("/product/SLOW1"), None, Some(0)),
        pool.browse(env.url("/product/SLOW2"), None, Some(0)),
    );
    a.expect("a");
    b.expect("b");
    let (c, d) = tokio::join!(
        pool.browse(env.url("/product/SLOW3"), None, Some(0)),
        pool.browse(env.url("/product/SLOW4"), None, Some(1)),
    );
    c.expect("c");
    d.expect("d");
    let log = env.testbed.log();
    let span = |p: &str| {
        let e = log.iter().find(|e| e.path == p).expect("logged");
        (e.at_ms, e.done_ms)
    };
    let overlap = |x: (u64, u64), y: (u64, u64)| x.0 < y.1 && y.0 < x.1;
    let (s1, s2, s3, s4) = (
        span("/product/SLOW1"),
        span("/product/SLOW2"),
        span("/product/SLOW3"),
        span("/product/SLOW4"),
    );
    println!("one slot: {s1:?} {s2:?}; two slots: {s3:?} {s4:?}");
    assert!(
        !overlap(s1, s2),
        "one slot ran two browser operations at once"
    );
    assert!(overlap(s3, s4), "two slots did not work side by side");
    shutdown_and_check(&pool).await;
}

/// A pool process killed with SIGKILL leaves its Chromium; the next start ends it.
#[tokio::test]
async fn chromium_of_a_killed_pool_is_ended_at_the_next_start() {
    let env = Env::new(1).await;
    let exe = std::env::current_exe().expect("test binary");
    let mut child = tokio::process::Command::new(exe)
        .args([
            "browser::holder_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IDPOOL_TEST_HOLDER_CONFIG", env.path("idpool.toml"))
        .env(
            "IDPOOL_TEST_HOLDER_URL",
            env.url("/product/B0HOLD").as_str(),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("holder starts");
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stale = None;
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("holder reports")
    {
        // libtest prints "test holder_child ... " without a newline first.
        if let Some(p) = line.split("HOLDER_PID ").nth(1) {
            stale = p.trim().parse::<u32>().ok();
            break;
        }
    }
    let stale = stale.expect("holder launched Chromium");
    child.kill().await.expect("SIGKILL the pool process");
    child.wait().await.expect("reap it");
    assert!(
        idpool::identity::browser::process::pid_alive(stale),
        "Chromium should survive its SIGKILLed owner"
    );

    let pool = env.pool();
    let ended = pool.end_stale_browsers().await;
    assert_eq!(ended, vec![(0, stale)]);
    assert!(!idpool::identity::browser::process::pid_alive(stale));
    let f = pool
        .browse(env.url("/product/B0HOLD"), None, Some(0))
        .await
        .expect("clean launch in the same dir");
    assert_eq!(f.response.status, 200);
    let running = chromium_browsers_under(&env.path("data"));
    assert_eq!(running.len(), 1);
    assert_ne!(running[0].0, stale);
    shutdown_and_check(&pool).await;
}

/// Child process of the test above: launch slot 0's Chromium, report it, wait to be killed.
#[tokio::test]
#[ignore = "child process of chromium_of_a_killed_pool_is_ended_at_the_next_start"]
async fn holder_child() {
    let (Some(cfg), Some(url)) = (
        std::env::var_os("IDPOOL_TEST_HOLDER_CONFIG"),
        std::env::var("IDPOOL_TEST_HOLDER_URL").ok(),
    ) else {
        return;
    };
    let cfg = idpool::config::Config::load_file(std::path::Path::new(&cfg)).expect("config");
    let pool = idpool::pool::Pool::open(&cfg).expect("pool");
    pool.browse(url::Url::parse(&url).expect("url"), None, Some(0))
        .await
        .expect("launch");
    println!(
        "HOLDER_PID {}",
        pool.leases().slots_for_tests()[0]
            .browser_facts()
            .pid
            .expect("pid")
    );
    tokio::time::sleep(Duration::from_secs(120)).await;
}

#[tokio::test]
async fn refresh_cookies_cli_turns_a_challenged_slot_into_a_passing_one() {
    let env = Env::new(1).await;
    env.testbed.set_modes(|m| m.challenge = true);
    env.write(
        "strategies/testbed.toml",
        &common::TESTBED_STRATEGY.replace(
            "name = \"testbed\"",
            &format!("name = \"testshop\"\nwarmup_url = \"{}\"", env.url("/")),
        ),
    );
    {
        let pool = env.pool();
        let f = pool
            .fetch(FetchRequest::get(env.url("/product/B0WARM")), Some(0))
            .await
            .expect("http");
        assert_eq!(f.outcome, Outcome::Challenge);
    }
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("idpool.toml"))
        .args(["refresh-cookies", "--slot", "0", "--strategy", "testshop"])
        .output()
        .await
        .expect("refresh-cookies runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    // Before: nothing (a challenge page sets no cookie). After: the clearance.
    assert!(
        stdout.contains("slot 0: 127.0.0.1 cookies 0 -> 1: ok"),
        "{stdout}"
    );
    assert!(
        chromium_browsers_under(&env.path("data")).is_empty(),
        "refresh-cookies left Chromium running"
    );

    let pool = env.pool();
    let f = pool
        .fetch(FetchRequest::get(env.url("/product/B0WARM")), Some(0))
        .await
        .expect("http");
    assert_eq!(f.outcome, Outcome::Ok, "the HTTP tier is still challenged");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn the_browser_environment_matches_the_profile() {
    let env = Env::new(1).await;
    env.write(
        "profiles/default.toml",
        "emulation = \"chrome_149\"\nplatform = \"windows\"\npretend_os = true\naccept_language = \"fr-FR,fr;q=0.9,en;q=0.8\"\ntimezone = \"Asia/Tokyo\"\nviewport = { width = 1280, height = 720 }\n",
    );
    let pool = env.pool();
    let f = pool
        .browse(env.url("/js-env"), Some("#env[data-ready]".into()), Some(0))
        .await
        .expect("env page");
    let html = f.response.text();
    let json = html
        .split("<pre id=\"env\" data-ready=\"1\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .expect("env rendered");
    let v: serde_json::Value = serde_json::from_str(&json.replace("&quot;", "\"")).expect("json");
    println!("{v}");
    assert_eq!(v["timezone"], "Asia/Tokyo");
    assert_eq!(v["language"], "fr-FR");
    assert_eq!(v["platform"], "Win32");
    assert_eq!(v["ua_platform"], "Windows");
    // The JavaScript engine's user agent and brands name the running Chromium.
    let major = idpool::identity::browser::launcher::installed_major(None).expect("chromium");
    assert!(
        v["user_agent"].as_str().is_some_and(
            |ua| ua.contains(&format!("Chrome/{major}.0.0.0")) && !ua.contains("Headless")
        ),
        "{v}"
    );
    assert!(
        v["brands"]
            .to_string()
            .contains(&format!("Google Chrome/{major}")),
        "{v}"
    );
    assert_eq!(v["width"], 1280);
    let status = pool.reports().status_now();
    let versions = &status["slots"][0]["versions"];
    assert_eq!(versions["chromium"], major, "{versions}");
    assert_eq!(versions["user_agent"], major, "{versions}");
    assert_eq!(versions["emulation"], "chrome_149");
    assert_eq!(
        versions["emulation_gap"],
        i64::from(major) - 149,
        "{versions}"
    );
    shutdown_and_check(&pool).await;
}

/// A profile that pins its user agent keeps it on both tiers.
#[tokio::test]
async fn a_pinned_user_agent_is_kept() {
    let env = Env::new(1).await;
    let pinned = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/149.0.0.0 Safari/537.36";
    env.write(
        "profiles/default.toml",
        &format!("emulation = \"chrome_149\"\nuser_agent = \"{pinned}\"\n"),
    );
    let pool = env.pool();
    pool.fetch(
        idpool::request::FetchRequest::get(env.url("/product/B0PIN?tier=http")),
        Some(0),
    )
    .await
    .expect("http");
    let f = pool
        .browse(env.url("/js-env"), Some("#env[data-ready]".into()), Some(0))
        .await
        .expect("browser");
    let logged = env
        .testbed
        .log()
        .into_iter()
        .find(|e| e.path == "/product/B0PIN?tier=http")
        .expect("logged");
    assert_eq!(logged.user_agent.as_deref(), Some(pinned));
    assert!(f.response.text().contains("Chrome/149.0.0.0"));
    let status = pool.reports().status_now();
    assert_eq!(status["slots"][0]["versions"]["user_agent_pinned"], true);
    shutdown_and_check(&pool).await;
}

#[tokio::test]
/// The browser leaves through its egress, which chains to the upstream with
/// the credentials: Chromium never has them.
async fn the_browser_reaches_an_authenticated_proxy_through_its_egress() {
    use common::proxies::{Seen, http_connect_proxy};
    let env = Env::new(1).await;
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Seen::default()));
    let port = http_connect_proxy(seen.clone()).await;
    env.write(
        "profiles/default.toml",
        &format!("emulation = \"chrome_149\"\nproxy = \"http://dave:pa55word@127.0.0.1:{port}\"\n"),
    );
    let pool = env.pool();
    let f = pool
        .browse(env.url("/product/B0PX"), None, Some(0))
        .await
        .expect("browser via proxy");
    assert_eq!(f.response.status, 200);
    assert!(
        seen.lock()
            .targets
            .iter()
            .any(|t| *t == env.testbed.https_addr.to_string()),
        "{:?}",
        seen.lock()
    );
    assert_eq!(
        seen.lock().auth.first().map(String::as_str),
        Some("Basic ZGF2ZTpwYTU1d29yZA=="),
        "the upstream got the credentials"
    );
    // The password is on no command line; Chromium knows only its egress.
    let egress = pool.leases().slots_for_tests()[0].egress().proxy_server();
    let browsers = chromium_browsers_under(&env.path("data"));
    assert!(!browsers.is_empty());
    for (_, args) in browsers {
        assert!(!args.iter().any(|a| a.contains("pa55word")), "{args:?}");
        assert!(
            args.contains(&format!("--proxy-server={egress}")),
            "{args:?}"
        );
        assert!(
            !args.iter().any(|a| a.contains(&port.to_string())),
            "{args:?}"
        );
    }
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn idle_browsers_close_and_big_ones_restart() {
    let env = Env::new(2).await;
    env.write_config_with(
        2,
        true,
        common::free_base_port(2),
        "[browser]\nidle_close_secs = 1\n",
    );
    let pool = env.pool();
    pool.browse(env.url("/product/B0IDLE"), None, Some(0))
        .await
        .expect("first");
    let pid = pool.leases().slots_for_tests()[0]
        .browser_facts()
        .pid
        .expect("running");
    for _ in 0..100 {
        if !pool.leases().slots_for_tests()[0].browser_facts().running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let facts = pool.leases().slots_for_tests()[0].browser_facts();
    assert!(!facts.running, "idle browser was not closed");
    assert_eq!(facts.crashes, 0, "an idle close is not a crash");
    assert!(!idpool::identity::browser::process::pid_alive(pid));
    pool.browse(env.url("/product/B0IDLE"), None, Some(0))
        .await
        .expect("relaunch");
    assert_eq!(
        pool.leases().slots_for_tests()[0].browser_facts().launches,
        2
    );
    shutdown_and_check(&pool).await;

    // A tiny memory ceiling: every operation ends with a restart.
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        "[browser]\nmax_rss_mb = 1\n",
    );
    let pool = env.pool();
    for _ in 0..2 {
        pool.browse(env.url("/product/B0RSS"), None, Some(0))
            .await
            .expect("fetch");
    }
    let facts = pool.leases().slots_for_tests()[0].browser_facts();
    assert_eq!(
        (facts.rss_restarts, facts.launches, facts.running),
        (2, 2, false),
        "{facts:?}"
    );
    shutdown_and_check(&pool).await;
}

/// Polls `f` every 100 ms for up to `secs`.
async fn until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..secs * 10 {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f()
}

#[tokio::test]
async fn standby_browsers_wait_on_the_next_slots_and_go_when_idle() {
    let env = Env::new(3).await;
    env.write_config_with(
        3,
        true,
        common::free_base_port(3),
        "[browser]\nstandby = 1\nidle_close_secs = 4\n",
    );
    let pool = env.pool();
    let standby = |i: usize| {
        let f = pool.leases().slots_for_tests()[i].browser_facts();
        f.running && f.standby
    };
    // Before any call, the slot the router picks first has its browser,
    // calibrated; the others have none.
    assert!(
        until(30, || standby(0)).await,
        "no standby browser on slot 0: {:?}",
        pool.leases().slots_for_tests()[0].browser_facts()
    );
    pool.leases().slots_for_tests()[0]
        .calibration_settled()
        .await;
    assert!(
        pool.leases().slots_for_tests()[0]
            .calibration_record()
            .is_some(),
        "the standby browser was not calibrated"
    );
    assert!(
        !pool.leases().slots_for_tests()[1].browser_facts().running
            && !pool.leases().slots_for_tests()[2].browser_facts().running
    );
    let status = pool.reports().status_now();
    assert_eq!(
        status["standby"],
        serde_json::json!({"wanted": 1, "ready": 1}),
        "{status}"
    );
    assert_eq!(status["slots"][0]["browser"]["standby"], true);

    // The first browser call goes to it: no launch of its own.
    let f = pool
        .browse(env.url("/product/B0STANDBY"), None, None)
        .await
        .expect("browse");
    assert_eq!((f.via, f.slot, f.response.status), (Via::Browser, 0, 200));
    let facts = pool.leases().slots_for_tests()[0].browser_facts();
    assert_eq!((facts.launches, facts.standby), (1, false), "{facts:?}");
    // Refilled on the slot the router picks next.
    assert!(
        until(30, || standby(1)).await,
        "the standby was not refilled on slot 1"
    );
    assert!(!pool.leases().slots_for_tests()[2].browser_facts().running);

    // Nobody calls: every browser goes after `idle_close_secs`, and none is
    // launched again for the standby.
    assert!(
        until(30, || pool
            .leases()
            .slots_for_tests()
            .iter()
            .all(|s| !s.browser_facts().running))
        .await,
        "idle browsers were not closed"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let launches: Vec<u64> = pool
        .leases()
        .slots_for_tests()
        .iter()
        .map(|s| s.browser_facts().launches)
        .collect();
    assert_eq!(
        launches,
        [1, 1, 0],
        "a browser was launched after the idle close"
    );
    assert!(
        pool.leases()
            .slots_for_tests()
            .iter()
            .all(|s| !s.browser_facts().running)
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn wait_for_sees_javascript_rendered_content_and_times_out_cleanly() {
    let env = Env::new(1).await;
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        "[browser]\nop_timeout_secs = 3\n",
    );
    let pool = env.pool();
    let item = "B0JSR";
    let f = pool
        .browse(
            env.url(&format!("/js-reviews/{item}")),
            Some("#reviews[data-state=ready] .review".into()),
            Some(0),
        )
        .await
        .expect("rendered");
    let first = idpool_testbed::data::review(item, 0);
    assert!(
        f.response.text().contains(&first.title),
        "JS-rendered reviews missing"
    );
    let err = pool
        .browse(
            env.url("/product/B0JSR"),
            Some("#never-there".into()),
            Some(0),
        )
        .await
        .expect_err("selector never appears");
    assert!(err.to_string().contains("#never-there"), "{err}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_busy_slot_browser_gives_a_clear_error_after_the_wait() {
    let env = Env::new(1).await;
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        "[browser]\nlock_wait_secs = 1\n",
    );
    env.testbed.set_modes(|m| {
        m.fault = Some(Fault {
            kind: FaultKind::Slow,
            path_prefix: Some("/product/SLOW".into()),
            remaining: None,
            delay_ms: 4000,
            status: 200,
            size_mb: 0,
        })
    });
    let pool = env.pool();
    pool.browse(env.url("/"), None, Some(0))
        .await
        .expect("warm");
    let slow = pool.browse(env.url("/product/SLOW9"), None, Some(0));
    let queued = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        pool.browse(env.url("/"), None, Some(0)).await
    };
    let (slow, queued) = tokio::join!(slow, queued);
    slow.expect("the slow one completes");
    let err = queued.expect_err("the queued one gives up");
    assert!(
        err.to_string()
            .contains("slot 0: the browser stayed busy for 1s"),
        "{err}"
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn a_launch_that_fails_part_way_kills_and_reaps_its_child() {
    let env = Env::new(1).await;
    // A "browser" that starts and never reports a DevTools address.
    let fake = env.path("fake-chromium.sh");
    let pid_file = env.path("fake.pid");
    env.write(
        "fake-chromium.sh",
        &format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 60\n",
            pid_file.display()
        ),
    );
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        &format!(
            "[browser]\nexecutable = \"{}\"\nlaunch_timeout_secs = 1\n",
            fake.display()
        ),
    );
    let pool = env.pool();
    let err = pool
        .browse(env.url("/"), None, Some(0))
        .await
        .expect_err("launch fails");
    assert!(
        err.to_string()
            .contains("did not report its DevTools address within 1s"),
        "{err}"
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("fake ran")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        !idpool::identity::browser::process::pid_alive(pid),
        "the failed launch left its child running"
    );
    assert_eq!(
        pool.leases().slots_for_tests()[0].browser_facts().launches,
        0
    );
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn fetch_cli_with_the_browser_tier() {
    let env = Env::new(1).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("idpool.toml"))
        .args([
            "fetch",
            env.url("/product/B0CLI").as_str(),
            "--tier",
            "browser",
        ])
        .output()
        .await
        .expect("idpool fetch");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("status:   200") && stderr.contains("http:     browser"),
        "{stderr}"
    );
    assert!(stdout.contains("productTitle"));
    assert!(
        chromium_browsers_under(&env.path("data")).is_empty(),
        "the CLI left Chromium running"
    );
}
