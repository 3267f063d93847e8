//! The daemon as a service: systemd notify and watchdog, SIGTERM draining,
//! SIGHUP reloads with `list_changed`, slot health through `idpool slots`,
//! `/metrics` and the event stream, the status page in real Chromium, and the
//! systemd unit.

use crate::common;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Mcp, add_key, idpool};
use common::{chromium_browsers_under, shop, shutdown_and_check};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Start a `scrape` call on its own task; it yields the messages of the answer.
fn spawn_scrape(c: &Mcp, url: &str, mode: &str) -> tokio::task::JoinHandle<Vec<Value>> {
    let req = c.request(reqwest::Method::POST).body(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "scrape", "arguments": {"url": url, "mode": mode}}})
        .to_string(),
    );
    tokio::spawn(async move {
        let r = req.send().await.expect("send");
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        common::daemon::messages_of(&ct, &r.text().await.expect("body"))
    })
}

/// Wait until the testbed has seen a request for a path under `prefix`.
/// `idpool ARGS` with `IDPOOL_KEY=key`: success, stdout, stderr.
async fn cli(env: &common::Env, args: &[&str], key: &str) -> (bool, String, String) {
    let out = idpool(env)
        .args(args)
        .env("IDPOOL_KEY", key)
        .output()
        .await
        .expect("idpool runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The recent events and the first of `kind` among them (`Null` if none).
async fn recent_event(d: &Daemon, key: &str, kind: &str) -> (Value, Value) {
    let recent: Value = reqwest::Client::new()
        .get(d.url("/api/v1/events/recent"))
        .bearer_auth(key)
        .send()
        .await
        .expect("events")
        .json()
        .await
        .expect("json");
    let ev = recent["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == kind)
        .cloned()
        .unwrap_or_default();
    (recent, ev)
}

async fn seen(env: &common::Env, prefix: &str) -> bool {
    for _ in 0..300 {
        if env
            .testbed
            .stats()
            .by_path
            .keys()
            .any(|p| p.starts_with(prefix))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Next datagram on `sock` within `limit`, as text.
fn recv(sock: &UnixDatagram, limit: Duration) -> Option<String> {
    sock.set_read_timeout(Some(limit)).ok()?;
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[tokio::test]
async fn systemd_ready_watchdog_and_stopping() {
    let env = shop(1).await;
    let path = env.path("notify.sock");
    let sock = UnixDatagram::bind(&path).expect("bind notify socket");
    let d = Daemon::start_with(
        &env,
        1,
        "",
        "",
        &[
            ("NOTIFY_SOCKET", path.display().to_string()),
            ("WATCHDOG_USEC", "400000".into()),
        ],
    )
    .await;
    let sock = tokio::task::spawn_blocking(move || {
        let first = recv(&sock, Duration::from_secs(10));
        (sock, first)
    })
    .await
    .expect("join");
    let (sock, first) = sock;
    let first = first.unwrap_or_default();
    assert!(
        first.starts_with("READY=1\nSTATUS=serving 1 slots on 127.0.0.1:"),
        "{first:?}"
    );
    // READY came after the port accepts connections (Daemon::start saw /healthz
    // answer, and the port is bound before READY is sent).
    assert!(std::net::TcpStream::connect(("127.0.0.1", d.port)).is_ok());
    let (sock, pings) = tokio::task::spawn_blocking(move || {
        let mut pings = 0;
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if recv(&sock, Duration::from_millis(500)).as_deref() == Some("WATCHDOG=1") {
                pings += 1;
            }
        }
        (sock, pings)
    })
    .await
    .expect("join");
    assert!(pings >= 3, "WATCHDOG=1 every 200 ms, got {pings} in 3 s");
    // A reload: RELOADING=1 and MONOTONIC_USEC in one datagram (sd_notify(3)),
    // then READY=1 again.
    d.signal(libc::SIGHUP);
    let (sock, reloading, ready) = tokio::task::spawn_blocking(move || {
        let reloading = (0..50).find_map(|_| {
            recv(&sock, Duration::from_millis(200)).filter(|m| m.starts_with("RELOADING=1"))
        });
        let ready = (0..50).find_map(|_| {
            recv(&sock, Duration::from_millis(200)).filter(|m| m.starts_with("READY=1"))
        });
        (sock, reloading, ready)
    })
    .await
    .expect("join");
    let reloading = reloading.expect("RELOADING=1 sent");
    let usec = (reloading.lines())
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|u| u.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC with RELOADING=1: {reloading:?}"));
    assert!(usec > 0);
    assert!(ready.is_some(), "READY=1 after the reload");
    // Chromium does not inherit the daemon's notify socket or watchdog.
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let r = c
        .tool(
            2,
            "scrape",
            json!({"url": env.url("/product/B0ENV").as_str(), "mode": "browser"}),
        )
        .await;
    assert_eq!(r["result"]["structuredContent"]["via"], "browser", "{r}");
    let status = c.tool(3, "pool_status", json!({})).await;
    let pid = status["result"]["structuredContent"]["slots"][0]["browser"]["pid"]
        .as_u64()
        .expect("a running browser");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("HOME="), "read the environment");
    for var in ["NOTIFY_SOCKET=", "WATCHDOG_USEC="] {
        assert!(
            !environ.split('\0').any(|e| e.starts_with(var)),
            "Chromium has {var}"
        );
    }
    d.signal(libc::SIGTERM);
    let stopping = tokio::task::spawn_blocking(move || {
        (0..50).find_map(|_| {
            recv(&sock, Duration::from_millis(200)).filter(|m| m.starts_with("STOPPING=1"))
        })
    })
    .await
    .expect("join");
    assert!(stopping.is_some_and(|m| m.starts_with("STOPPING=1\nSTATUS=")));
    d.wait_exit().await;
}

#[tokio::test]
async fn sigterm_during_a_long_browser_call_cancels_it_at_the_grace_limit() {
    let env = shop(1).await;
    common::slow(&env, "/product/B0SLOWB", 120_000);
    let d = Daemon::start(&env, 1, "shutdown_grace_secs = 2").await;
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    // A first call puts the shop's cookie into slot 0's jar.
    let r = c
        .tool(
            9,
            "scrape",
            json!({"url": env.url("/product/B0FIRST").as_str(), "mode": "http"}),
        )
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    let call = spawn_scrape(&c, env.url("/product/B0SLOWB").as_str(), "browser");
    // Wait until the browser is on the slow page.
    let seen = seen(&env, "/product/B0SLOWB").await;
    assert!(seen, "the browser reached the slow page:\n{}", d.log_text());
    let started = Instant::now();
    d.signal(libc::SIGTERM);
    let messages = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the call ends after the grace")
        .expect("join");
    let r = messages
        .iter()
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("a response in {messages:?}\n{}", d.log_text()));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("shut down") && text.contains("shutdown_grace_secs"),
        "{text}"
    );
    let log = d.log_text();
    d.wait_exit().await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(log.contains("still running after 2s"), "{log}");
    assert!(
        chromium_browsers_under(env.data_dir()).is_empty(),
        "no Chromium left"
    );
    let jar = std::fs::read_to_string(env.path("data/slots/0/cookies.json")).expect("jar saved");
    assert!(
        serde_json::from_str::<Value>(&jar).is_ok(),
        "a whole jar: {jar}"
    );
    // New calls during the drain are refused, not started: covered by the
    // dispatcher's draining flag (the listener is closed by then).
}

#[tokio::test]
async fn sigterm_lets_a_running_call_finish_within_the_grace() {
    let env = shop(1).await;
    common::slow(&env, "/product/B0LATE", 1500);
    let d = Daemon::start(&env, 1, "shutdown_grace_secs = 20").await;
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let call = spawn_scrape(&c, env.url("/product/B0LATE").as_str(), "http");
    assert!(seen(&env, "/product/B0LATE").await);
    d.signal(libc::SIGTERM);
    // New connections are refused while the call drains.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(std::net::TcpStream::connect(("127.0.0.1", d.port)).is_err());
    let messages = call.await.expect("join");
    let r = messages.iter().find(|m| m["id"] == 1).expect("the answer");
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(
        r["result"]["structuredContent"]["content"]
            .as_str()
            .unwrap_or("")
            .contains("B0LATE"),
        "{r}"
    );
    d.wait_exit().await;
}

#[tokio::test]
async fn sighup_reloads_strategies_and_tells_clients_the_tool_list_changed() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "").await;
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    // The session's stream for server-initiated messages.
    let mut stream = c
        .request(reqwest::Method::GET)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /mcp");
    assert_eq!(stream.status(), StatusCode::OK);
    let names = |r: &Value| -> Vec<String> {
        r["result"]["structuredContent"]["strategies"]
            .as_array()
            .expect("strategies")
            .iter()
            .map(|s| s["name"].as_str().expect("name").to_string())
            .collect()
    };
    let before = names(&c.tool(1, "list_strategies", json!({})).await);
    assert!(!before.contains(&"newshop".to_string()));
    // A 2026-07-28 client (the TypeScript SDK's 2.x line) hears of it on a
    // `subscriptions/listen` stream.
    let mut listener = common::daemon::node_script("listen.mjs", &[&d.url("/mcp")]);
    let listening = listener.next_line().await;
    assert_eq!(listening["event"], "connected", "{listening}");
    assert_eq!(listening["version"], "2026-07-28", "{listening}");
    let _before = listener.next_line().await;
    let listening = listener.next_line().await;
    assert_eq!(
        listening,
        json!({"event": "listening", "honored": {"toolsListChanged": true}})
    );
    env.write(
        "strategies/newshop.toml",
        "name = \"newshop\"\nhosts = [\"newshop.test\"]\n",
    );
    d.reload().await;
    let heard = listener.next_line().await;
    assert_eq!(heard["event"], "tools_changed", "{heard}");
    let closed = listener.next_line().await;
    assert_eq!(closed, json!({"event": "closed", "how": "local"}));
    assert!(listener.finish().await, "listen.mjs exits 0");
    let mut buf = String::new();
    let changed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let chunk = stream.chunk().await.expect("stream").expect("open");
            buf.push_str(&String::from_utf8_lossy(&chunk));
            if buf.contains("notifications/tools/list_changed") {
                return true;
            }
        }
    })
    .await;
    assert_eq!(
        changed,
        Ok(true),
        "list_changed on the session stream: {buf}"
    );
    let after = names(&c.tool(2, "list_strategies", json!({})).await);
    assert!(after.contains(&"newshop".to_string()), "{after:?}");
    // The new host is fetchable now (guard updated): it fails on DNS, not on the guard.
    let r = c
        .tool(
            3,
            "scrape",
            json!({"url": "https://newshop.test/x", "mode": "http"}),
        )
        .await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(!text.contains("not covered"), "{text}");

    // A broken file: the old strategies stay, the error is logged with file:line.
    env.write("strategies/broken.toml", "name = \"broken\"\nhosts = 7\n");
    d.reload().await;
    let log = d.log_text();
    assert!(log.contains("keeping the old strategies"), "{log}");
    assert!(log.contains("broken.toml:2"), "{log}");
    let still = names(&c.tool(4, "list_strategies", json!({})).await);
    assert_eq!(still, after, "the old strategies stay");
    // The session survived both reloads.
    assert_eq!(
        c.call(5, "tools/list", json!({})).await["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(common::tools_for(idpool::config::Role::Operator).len())
    );
    d.stop().await;
}

#[tokio::test]
async fn a_blocked_slot_shows_in_slots_metrics_and_the_event_stream() {
    let env = shop(2).await;
    let viewer = add_key(&env, "watcher", "viewer").await;
    let operator = add_key(&env, "agent", "operator").await;
    let d = Daemon::start_with(
        &env,
        2,
        "keys_file = \"keys.toml\"",
        "[breaker]\nthreshold = 1\ncooldown_secs = 300\n",
        &[],
    )
    .await;
    // Events need a viewer key; ?key= works for browsers.
    let ws_url = format!("ws://127.0.0.1:{}/api/v1/events?key={viewer}", d.port);
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
        .await
        .expect("event stream opens");
    let denied = tokio_tungstenite::connect_async(
        format!("ws://127.0.0.1:{}/api/v1/events", d.port).as_str(),
    )
    .await;
    assert!(denied.is_err(), "no key, no events");

    let mut c = Mcp::new(&d, Some(&operator));
    c.initialize().await;
    // Slot 0's browser serves a page...
    let r = c
        .tool(
            0,
            "scrape",
            json!({"url": env.url("/product/B0SEEN").as_str(), "mode": "browser", "slot": 0}),
        )
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    // ...then its AJAX endpoint refuses it once (a block of tier 1), and the
    // review page shows a captcha (a block of the identity): one hard
    // block opens its breaker.
    env.testbed.set_modes(|m| {
        m.fault = Some(idpool_testbed::Fault {
            remaining: Some(1),
            ..idpool_testbed::Fault::of(idpool_testbed::FaultKind::Error, Some("/ajax/"), 403)
        })
    });
    let r = c
        .tool(
            1,
            "get_reviews",
            json!({"item": "BAN5", "strategy": "testshop", "slot": 0}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");

    let transition = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(m)) = ws.next().await {
            if let Ok(text) = m.to_text()
                && let Ok(ev) = serde_json::from_str::<Value>(text)
                && ev["kind"] == "breaker"
            {
                return ev;
            }
        }
        Value::Null
    })
    .await
    .expect("a breaker event within 10 s");
    assert_eq!(transition["slot"], 0);
    assert_eq!(transition["strategy"], "testshop");
    assert_eq!(transition["detail"]["from"], "closed");
    assert_eq!(transition["detail"]["to"], "open");

    let slots = |json: bool| {
        let mut cmd = idpool(&env);
        cmd.args(["slots", "--url", &d.url(""), "--key", &viewer]);
        if json {
            cmd.arg("--json");
        }
        cmd.output()
    };
    let out = slots(false).await.expect("slots runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    let slot0 = table.split("slot 1").next().unwrap_or("");
    assert!(
        slot0
            .lines()
            .any(|l| l.trim_start().starts_with("testshop") && l.contains("open (1 failures")),
        "{table}"
    );
    assert!(
        slot0.contains("blocked: tier 1 (") && !slot0.contains("tier 2 ("),
        "tier memory shown: {table}"
    );
    let out = slots(true).await.expect("slots --json runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["slots"][0]["breakers"]["testshop"]["state"], "open");
    assert_eq!(v["slots"][1]["breakers"]["testshop"]["state"], "closed");

    let http = reqwest::Client::new();
    let r = http.get(d.url("/metrics")).send().await.expect("metrics");
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "metrics need a key when keys are on"
    );
    let text = d.get_text("/metrics", Some(&viewer)).await;
    for needle in [
        "idpool_breaker_open{slot=\"0\",strategy=\"testshop\"} 1",
        "idpool_breaker_open{slot=\"1\",strategy=\"testshop\"} 0",
        "idpool_breaker_resting{slot=\"0\",strategy=\"testshop\"} 0",
        "idpool_strategy_budget_cuts_total{strategy=\"testshop\"} 0",
        "idpool_requests_total{strategy=\"testshop\",tier=\"1\",outcome=\"tier_block\"} ",
        "idpool_requests_total{strategy=\"testshop\",tier=\"2\",outcome=\"hard_block\"} ",
        "idpool_mcp_calls_total{tool=\"get_reviews\",result=\"error\"} 1",
        "idpool_request_duration_seconds_bucket{strategy=\"testshop\",tier=\"1\"",
        "idpool_mcp_sessions{transport=\"http\"} 1",
        "idpool_browser_launches_total{slot=\"0\"} 1",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }

    // The control API: a viewer reads, only an admin acts.
    let r = http
        .get(d.url("/api/v1/slots/0"))
        .bearer_auth(&viewer)
        .send()
        .await
        .expect("slot 0");
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .post(d.url("/api/v1/slots/0/reset"))
        .bearer_auth(&viewer)
        .send()
        .await
        .expect("reset");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let admin = add_key(&env, "root", "admin").await;
    d.reload().await;
    // `idpool slots --watch` prints the table, then follows the events.
    let mut watch = idpool(&env)
        .args(["slots", "--watch", "--url", &d.url(""), "--key", &viewer])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("slots --watch starts");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        watch.stdout.take().expect("stdout"),
    ));
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.starts_with("-- following events") {
                return;
            }
        }
    })
    .await
    .expect("--watch follows the stream");
    let status = http
        .post(d.url("/api/v1/slots/0/reset"))
        .bearer_auth(&admin)
        .body("{\"browser\": true}")
        .send()
        .await
        .expect("reset")
        .status();
    assert_eq!(status, StatusCode::OK);
    let line = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("breaker_reset") || l.contains("browser_closed") {
                return l;
            }
        }
        String::new()
    })
    .await
    .expect("the reset shows in --watch");
    assert!(line.contains("slot 0"), "{line}");
    watch.start_kill().expect("end --watch");
    let _ = watch.wait().await;
    let r = http.get(d.url("/readyz")).send().await.expect("readyz");
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = http
        .get(d.url("/api/v1/slots"))
        .bearer_auth(&viewer)
        .send()
        .await
        .expect("slots")
        .json()
        .await
        .expect("json");
    assert_eq!(v["slots"][0]["breakers"]["testshop"]["state"], "closed");
    d.stop().await;
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
}

#[tokio::test]
async fn the_status_page_renders_the_slot_cards_through_a_slots_own_browser() {
    let env = shop(2).await;
    let viewer = add_key(&env, "phone", "viewer").await;
    let d = Daemon::start(&env, 2, "keys_file = \"keys.toml\"").await;
    // Another pool (its own data dir) drives Chromium to the page.
    let viewer_env = shop(1).await;
    let pool = viewer_env.pool();
    let url = url::Url::parse(&format!("{}#key={viewer}", d.url("/"))).expect("url");
    let page = pool
        .browse(url, Some("#cards .card[data-slot='1']".into()), Some(0))
        .await
        .expect("the page renders its rows");
    let html = page.response.text();
    let doc = scraper::Html::parse_document(&html);
    let rows = scraper::Selector::parse("#cards .card[data-slot]").expect("selector");
    let rows: Vec<_> = doc.select(&rows).collect();
    assert_eq!(rows.len(), 2, "{} rows in {html}", rows.len());
    assert!(rows[0].html().contains("default") && rows[0].html().contains("testshop"));
    // Fidelity: no browser launched yet, so not calibrated yet.
    assert!(rows[0].html().contains("pending"), "{}", rows[0].html());
    assert!(html.contains("2 slots, updated"), "{html}");
    // With a wrong key the page asks for one.
    let page = pool
        .browse(
            url::Url::parse(&format!("{}?again=1#key=idp_wrong", d.url("/"))).expect("url"),
            Some("#login:not([hidden])".into()),
            Some(0),
        )
        .await
        .expect("the login form shows");
    assert!(page.response.text().contains("a key is needed"));
    shutdown_and_check(&pool).await;
    d.stop().await;
}

#[tokio::test]
async fn refresh_cookies_goes_through_the_running_daemon() {
    let env = shop(1).await;
    let admin = add_key(&env, "root", "admin").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    let (ok, stdout, stderr) = cli(
        &env,
        &["refresh-cookies", "--strategy", "testshop", "--slot", "0"],
        &admin,
    )
    .await;
    assert!(ok, "{stdout}{stderr}");
    assert!(stderr.contains("through the daemon"), "{stderr}");
    assert!(
        stdout.contains("slot 0: 127.0.0.1 cookies") && stdout.contains(": ok"),
        "{stdout}"
    );
    // It was the daemon's browser that did it.
    let v: Value = reqwest::Client::new()
        .get(d.url("/api/v1/slots"))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("slots")
        .json()
        .await
        .expect("json");
    assert_eq!(v["slots"][0]["browser"]["running"], true, "{v}");
    // The refresh is an event too.
    let (recent, refresh) = recent_event(&d, &admin, "cookie_refresh").await;
    assert_eq!(refresh["slot"], 0, "{recent}");
    assert_eq!(refresh["strategy"], "testshop");
    assert_eq!(refresh["detail"]["ok"], true);
    d.stop().await;
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
}

/// The unit run for real (start, reload, stop) needs a machine whose PID 1
/// is systemd; this one's is not, so the test says so and the unit is
/// checked by `systemd-analyze verify`/`security` below and sd_notify(3) by
/// the fake `NOTIFY_SOCKET` of `systemd_ready_watchdog_and_stopping`.
#[test]
fn the_unit_under_real_systemd_is_skipped_where_systemd_does_not_run() {
    let systemd = std::path::Path::new("/run/systemd/system").is_dir();
    if !systemd {
        eprintln!(
            "skipped: PID 1 is not systemd here (no /run/systemd/system), so the unit cannot be \
             started, reloaded and stopped for real"
        );
        return;
    }
    panic!(
        "this machine runs systemd: run the unit for real (start, `systemctl reload`, stop) \
         before relying on it; the suite has no such run yet"
    );
}

#[test]
fn the_systemd_unit_verifies_or_has_the_required_keys() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("scripts/idpool.service")).expect("unit");
    let value = |key: &str| -> Option<String> {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
    };
    assert_eq!(value("Type").as_deref(), Some("notify"));
    assert!(value("WatchdogSec").is_some());
    assert_eq!(
        value("ExecReload").as_deref(),
        Some("/bin/kill -HUP $MAINPID")
    );
    assert_eq!(value("StateDirectory").as_deref(), Some("idpool"));
    assert_eq!(value("NoNewPrivileges").as_deref(), Some("yes"));
    assert_eq!(value("ProtectSystem").as_deref(), Some("strict"));
    let rw = value("ReadWritePaths").expect("ReadWritePaths");
    assert!(rw.contains("/var/lib/idpool"), "{rw}");
    assert!(value("ExecStart").is_some_and(|s| s.ends_with("serve")));
    // The hardening a pool of browsers can have (see the unit's comments for
    // what Chromium rules out).
    for (key, want) in [
        ("ProtectKernelLogs", "yes"),
        ("ProtectClock", "yes"),
        ("ProtectHostname", "yes"),
        ("ProtectProc", "invisible"),
        ("PrivateDevices", "yes"),
        ("CapabilityBoundingSet", ""),
        ("SystemCallArchitectures", "native"),
        ("UMask", "0077"),
    ] {
        assert_eq!(value(key).as_deref(), Some(want), "{key}");
    }
    assert!(value("RestrictAddressFamilies").is_some_and(|v| v.contains("AF_INET6")));
    assert!(value("MemoryHigh").is_some() && value("MemoryMax").is_some());
    for absent in ["MemoryDenyWriteExecute", "RestrictNamespaces"] {
        assert!(value(absent).is_none(), "{absent} breaks Chromium");
    }
    // Where systemd-analyze exists, the unit must verify (with the binary we built).
    if let Ok(out) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        && out.status.success()
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("idpool.service");
        std::fs::write(
            &path,
            unit.replace("/usr/local/bin/idpool", env!("CARGO_BIN_EXE_idpool")),
        )
        .expect("write");
        let out = std::process::Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
            .expect("systemd-analyze runs");
        assert!(
            out.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Its exposure score, as the README quotes it (lower is better).
        let out = std::process::Command::new("systemd-analyze")
            .args(["security", "--offline=yes"])
            .arg(&path)
            .output()
            .expect("systemd-analyze security runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let score: f64 = (text.lines())
            .find_map(|l| {
                l.split("Overall exposure level for idpool.service: ")
                    .nth(1)
            })
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no exposure score in {text}"));
        assert!(score <= 4.0, "exposure {score}");
    }
}

#[tokio::test]
async fn readyz_is_not_ready_while_no_slot_can_serve() {
    let env = shop(1).await;
    let d = Daemon::start_with(
        &env,
        1,
        "anonymous_role = \"admin\"",
        "[breaker]\nthreshold = 1\ncooldown_secs = 300\n",
        &[],
    )
    .await;
    let http = reqwest::Client::new();
    let ready = || async {
        let r = http.get(d.url("/readyz")).send().await.expect("readyz");
        (r.status(), r.text().await.unwrap_or_default())
    };
    assert_eq!(ready().await.0, StatusCode::OK);
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let r = c
        .tool(
            1,
            "get_reviews",
            json!({"item": "BAN9", "strategy": "testshop"}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let (status, text) = ready().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(text.contains("no slot can serve"), "{text}");
    let r = c.tool(2, "reset_slot", json!({"slot": 0})).await;
    assert_eq!(
        r["result"]["structuredContent"]["breakers_reset"], true,
        "{r}"
    );
    assert_eq!(ready().await.0, StatusCode::OK);
    d.stop().await;
}

#[tokio::test]
async fn streams_of_a_revoked_key_end_after_the_reload() {
    let env = shop(1).await;
    let key = add_key(&env, "temp", "operator").await;
    let keep = add_key(&env, "keep", "viewer").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    let ws = |k: &str| format!("ws://127.0.0.1:{}/api/v1/events?key={k}", d.port);
    let (mut events, _) = tokio_tungstenite::connect_async(ws(&key).as_str())
        .await
        .expect("events");
    let (mut kept, _) = tokio_tungstenite::connect_async(ws(&keep).as_str())
        .await
        .expect("events");
    let mut sse = reqwest::Client::new()
        .get(d.url(&format!("/sse?key={key}")))
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(sse.status(), StatusCode::OK);
    let out = idpool(&env)
        .args(["keys", "revoke", "temp"])
        .output()
        .await
        .expect("revoke");
    assert!(out.status.success());
    d.reload().await;
    // The revoked key's event stream closes...
    let closed = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            match events.next().await {
                None | Some(Err(_)) => return true,
                Some(Ok(m)) if m.is_close() => return true,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert_eq!(closed, Ok(true), "the revoked key's event stream ended");
    // ...and so does its legacy SSE stream.
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            match sse.chunk().await {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return true,
            }
        }
    })
    .await;
    assert_eq!(ended, Ok(true), "the revoked key's SSE stream ended");
    // The other key's stream lives on: a reset shows up on it.
    let admin_reset = add_key(&env, "root", "admin").await;
    d.reload().await;
    let http = reqwest::Client::new();
    let status = http
        .post(d.url("/api/v1/slots/0/reset"))
        .bearer_auth(&admin_reset)
        .send()
        .await
        .expect("reset")
        .status();
    assert_eq!(status, StatusCode::OK);
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(m)) = kept.next().await {
            if m.to_text().is_ok_and(|t| t.contains("breaker_reset")) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(got, Ok(true), "the kept key still gets events");
    d.stop().await;
}

#[tokio::test]
async fn calibration_through_the_daemon_shows_in_slots_metrics_and_events() {
    let env = shop(1).await;
    let admin = add_key(&env, "root", "admin").await;
    let viewer = add_key(&env, "watcher", "viewer").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    // A viewer may not calibrate.
    let (ok, stdout, _) = cli(&env, &["calibrate", "--slot", "0"], &viewer).await;
    assert!(!ok, "{stdout}");
    assert!(stdout.contains("admin role"), "{stdout}");
    // An admin may: the daemon's browser launches and both sides are printed.
    let (ok, stdout, stderr) = cli(&env, &["calibrate", "--slot", "0"], &admin).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(stderr.contains("through the daemon"), "{stderr}");
    assert!(
        stdout.contains("HTTP/2 (Akamai)        = browser"),
        "{stdout}"
    );
    assert!(stdout.contains("residual ("), "{stdout}");
    let get = |path: &str| {
        reqwest::Client::new()
            .get(d.url(path))
            .bearer_auth(&viewer)
            .send()
    };
    let v: Value = get("/api/v1/slots")
        .await
        .expect("slots")
        .json()
        .await
        .expect("json");
    let c = &v["slots"][0]["calibration"];
    assert_eq!(c["state"], "calibrated", "{v}");
    assert_eq!(
        (c["h2_equal"].clone(), c["headers_equal"].clone()),
        (json!(true), json!(true))
    );
    let browser_ja4 = c["browser_ja4"].as_str().expect("browser JA4").to_string();
    // The self-check (issue 33): with the default desktop profile, headless,
    // no signal but WebGL's software renderer on a machine without a GPU.
    let looks = &v["slots"][0]["fidelity"]["browser"];
    println!("self-check: {looks}");
    let names: Vec<&str> = looks["names"]
        .as_array()
        .expect("the self-check's signals")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        names.iter().all(|n| *n == "webgl"),
        "the self-check found: {looks}"
    );
    let gl = looks["webgl"].as_str().unwrap_or_default().to_string();
    assert!(!gl.is_empty(), "WebGL is reported: {looks}");
    assert_eq!(
        names.contains(&"webgl"),
        gl.contains("SwiftShader") || gl.contains("llvmpipe"),
        "{looks}"
    );
    // `idpool slots` has the fidelity line.
    let (_, table, _) = cli(&env, &["slots"], &viewer).await;
    assert!(table.contains("fidelity   calibrated"), "{table}");
    assert!(
        table.contains("tls.extensions, "),
        "residual names: {table}"
    );
    assert!(
        table.contains(&format!("JA4 browser {browser_ja4}")),
        "{table}"
    );
    assert!(table.contains("  browser    signals "), "{table}");
    assert!(table.contains(&format!("WebGL {gl}")), "{table}");
    // /metrics has the gauges.
    let metrics = get("/metrics")
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("idpool_calibration_h2_equal{slot=\"0\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("idpool_calibrated{slot=\"0\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("browser_ja4=\"{browser_ja4}\"")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "idpool_slot_browser_signals{{slot=\"0\"}} {}",
            names.len()
        )),
        "{metrics}"
    );
    // And the event stream told: calibrated, and the first self-check.
    let (recent, ev) = recent_event(&d, &viewer, "browser_signals").await;
    assert_eq!(ev["slot"], 0, "{recent}");
    assert_eq!(
        ev["detail"]["signals"].as_array().map(Vec::len),
        Some(names.len()),
        "{recent}"
    );
    let (recent, ev) = recent_event(&d, &viewer, "calibrated").await;
    assert_eq!(ev["slot"], 0, "{recent}");
    assert_eq!(ev["detail"]["browser_ja4"], browser_ja4.as_str());
    d.stop().await;
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
}

/// The daemon's own end of a TCP connection, as a descriptor of ours
/// (pidfd_getfd), found by the connection's ports in /proc.
fn server_socket(daemon_pid: u32, server_port: u16, client_port: u16) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let tcp = std::fs::read_to_string(format!("/proc/{daemon_pid}/net/tcp")).expect("net/tcp");
    let inode = tcp
        .lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let port = |a: &str| u16::from_str_radix(a.rsplit(':').next().unwrap_or(""), 16).ok();
            (port(f[1]) == Some(server_port) && port(f[2]) == Some(client_port))
                .then(|| f[9].to_string())
        })
        .expect("the daemon's end of our connection in /proc/PID/net/tcp");
    let target = format!("socket:[{inode}]");
    let fd: i32 = std::fs::read_dir(format!("/proc/{daemon_pid}/fd"))
        .expect("fd dir")
        .filter_map(|e| e.ok())
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == target))
        .and_then(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .expect("the daemon's descriptor for that socket");
    // SAFETY: pidfd_open and pidfd_getfd on our own child; each returns a new
    // descriptor we own, or -1.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, daemon_pid, 0) as i32;
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as i32;
        let err = std::io::Error::last_os_error();
        libc::close(pidfd);
        assert!(got >= 0, "pidfd_getfd: {err}");
        std::os::fd::OwnedFd::from_raw_fd(got)
    }
}

fn nodelay(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a c_int we own, with its size.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "getsockopt: {}", std::io::Error::last_os_error());
    v != 0
}

/// Regression: rmcp writes a response in two parts, and without TCP_NODELAY
/// the second waited for the client's delayed ACK (40 ms on every call).
/// A call without a progress token is answered as one JSON body; with one,
/// as a stream carrying the progress.
#[tokio::test]
async fn mcp_connections_set_tcp_nodelay_and_plain_calls_get_one_json_reply() {
    use std::io::{Read, Write};
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "").await;
    let pid = d.child.id().expect("pid");
    // A keep-alive connection of our own, as every MCP client holds one.
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    write!(
        conn,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"result\"") {
        let n = conn.read(&mut buf).expect("read");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(head.contains("content-type: application/json"), "{head}");
    let client_port = conn.local_addr().expect("addr").port();
    let theirs = server_socket(pid, d.port, client_port);
    assert!(
        nodelay(&theirs),
        "TCP_NODELAY is not set on the daemon's end"
    );
    drop(theirs);

    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let plain = c
        .post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "pool_status", "arguments": {}}}))
        .await;
    assert_eq!(
        plain.headers["content-type"], "application/json",
        "{:?}",
        plain.messages
    );
    assert!(plain.response(2)["result"]["structuredContent"]["slots"].is_array());
    let streamed = c
        .post(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "get_reviews", "_meta": {"progressToken": "p"},
                                "arguments": {"item": "B0TESTA1", "strategy": "testshop"}}}))
        .await;
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    assert!(
        streamed
            .messages
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "{:?}",
        streamed.messages
    );
    assert!(streamed.response(3)["result"].is_object());
    d.stop().await;
}
