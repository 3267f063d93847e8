//! The operator's view, tried as an operator would: the status page in a real
//! Chromium at desktop and phone size (cards, charts, live events, an admin
//! action by keyboard, a viewer without actions, never wider than the
//! screen), and the shipped Grafana dashboard and alert rules loaded into a
//! real Prometheus scraping the same daemon (every series they name exists).
//! One daemon in a fleet of one (so the cluster series exist) serves both.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::chromium::{Chromium, eval, keep_screenshot, size, until};
use common::daemon::{Daemon, add_key, free_port};
use common::fleet::{NodeOpts, Redis, node_with};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The document is no wider than the viewport (no sideways scrolling).
const FITS: &str = "document.documentElement.scrollWidth <= window.innerWidth \
    && document.body.scrollWidth <= window.innerWidth";

async fn post(d: &Daemon, key: &str, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(d.url(path))
        .bearer_auth(key)
        .json(&body)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("POST");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_works_in_chromium_and_the_dashboards_name_only_real_series() {
    let env = common::shop(2).await;
    let admin = add_key(&env, "ops", "admin").await;
    let viewer = add_key(&env, "watch", "viewer").await;
    // A fixed request budget, so its series (`idpool_strategy_budget_rpm`,
    // served while a budget is in force) is there for the dashboard check.
    let shop = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("testshop");
    assert!(
        shop.contains("[politeness]\n"),
        "testshop has a [politeness] table"
    );
    env.write(
        "strategies/testshop.toml",
        &shop.replace(
            "[politeness]\n",
            "[politeness]\nmax_requests_per_minute = 6000\n",
        ),
    );
    let redis = Redis::start(&env).await;
    let opts = NodeOpts {
        slots: 2,
        server: "keys_file = \"../keys.toml\"",
        role: "viewer",
        ..NodeOpts::default()
    };
    let d = node_with(&env, &redis, "a", &opts).await;

    // A challenged three-tier call, as the issue found the page after one:
    // AJAX blocked once, the HTML page challenged, the browser passes.
    env.testbed.set_modes(|m| {
        m.challenge = true;
        m.fault = Some(idpool_testbed::Fault {
            kind: idpool_testbed::FaultKind::Error,
            path_prefix: Some("/ajax/".into()),
            remaining: Some(1),
            delay_ms: 0,
            status: 403,
            size_mb: 0,
        });
    });
    let (status, r) = post(
        &d,
        &admin,
        "/api/v1/tools/get_reviews",
        json!({"item": "B0TESTA1", "strategy": "testshop", "slot": 0}),
    )
    .await;
    assert_eq!(status, 200, "get_reviews: {r}");
    let tiers: Vec<u64> = r["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .filter_map(|p| p["tier"].as_u64())
        .collect();
    assert!(tiers.contains(&3), "the browser served: {r}");

    // A daemon of the fleet that died (its registration gone, its lease
    // and record left): the next beat lists its identity without a host.
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
        .to_string();
    for args in [
        &["SADD", "idpool:nodes", "ghost"][..],
        &["HSET", "idpool:beats", "ghost", &ms],
        &["HSET", "idpool:holdings", "ghost", "[\"ghost/0\"]"],
        &["SET", "idpool:lease:ghost/0", "ghost"],
        &["HSET", "idpool:identities", "ghost/0", "{}"],
    ] {
        redis.cli(args).await;
    }

    let chromium = Chromium::start(env.path("").as_path()).await;
    status_page(&d, &env, &chromium, &admin, &viewer).await;
    chromium.stop().await;

    dashboards(&d, &env, &viewer).await;
    d.stop().await;
    drop(redis);
}

async fn status_page(
    d: &Daemon,
    env: &common::Env,
    chromium: &Chromium,
    admin: &str,
    viewer: &str,
) {
    // Desktop, admin key handed over in the fragment (then kept in
    // sessionStorage only, and gone from the address bar).
    let page = chromium
        .page(1280, 900, false, &d.url(&format!("/?fleet=1#key={admin}")))
        .await;
    until(
        &page,
        "document.querySelectorAll('#cards .card[data-slot]').length === 2",
        20,
        "two slot cards",
    )
    .await;
    let kept = eval(
        &page,
        &format!(
            "sessionStorage.getItem('idpool-key') === '{admin}' && localStorage.length === 0 \
             && location.hash === '' && !document.documentElement.innerHTML.includes('{admin}')"
        ),
    )
    .await;
    assert_eq!(kept, json!(true), "the key lives in sessionStorage only");
    let form = eval(
        &page,
        "getComputedStyle(document.getElementById('login')).display",
    )
    .await;
    assert_eq!(form, json!("none"), "no key form once a key is in");
    let card0 = eval(
        &page,
        "document.querySelector('.card[data-slot=\"0\"]').innerText",
    )
    .await;
    let card0 = card0.as_str().unwrap_or_default().to_string();
    for want in ["slot 0", "testshop", "MiB", "a/0"] {
        assert!(card0.contains(want), "slot 0's card shows {want}: {card0}");
    }
    assert!(card0.contains(" ago"), "relative ages: {card0}");
    // The browser's memory is its PSS (the API's pss_mb), not summed RSS.
    let status: Value = reqwest::Client::new()
        .get(d.url("/api/v1/slots"))
        .bearer_auth(admin)
        .send()
        .await
        .expect("slots")
        .json()
        .await
        .expect("JSON");
    let pss = status["slots"][0]["browser"]["pss_mb"]
        .as_u64()
        .expect("slot 0's PSS");
    let shown: u64 = card0
        .split(" MiB")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a MiB figure on the card: {card0}"));
    // Sampled a moment apart: the same footprint, not summed RSS (about 3×).
    assert!(
        shown * 10 >= pss * 7 && shown * 10 <= pss * 13,
        "PSS {pss} MiB, the card {shown} MiB: {card0}"
    );
    // Per-strategy rates over the last hour, from the daemon's ring.
    let chart = until(
        &page,
        "document.querySelector('.chart[data-strategy=\"testshop\"] svg')?.getAttribute('aria-label')",
        10,
        "the testshop chart",
    )
    .await;
    let chart = chart.as_str().unwrap_or_default();
    assert!(
        chart.contains("blocked") && chart.contains("challenge"),
        "{chart}"
    );
    assert!(
        !chart.contains("0 challenge"),
        "the challenge counted: {chart}"
    );
    // Readable events, no raw JSON.
    let events = until(
        &page,
        "document.getElementById('events').innerText.includes('calibrated against') \
         && document.getElementById('events').innerText",
        60,
        "the calibration event, readable",
    )
    .await;
    assert!(
        !events.as_str().unwrap_or_default().contains("{\""),
        "{events}"
    );
    // The fleet view lists this daemon's identities, and the dead one's
    // without a host, counted in the totals.
    until(
        &page,
        "document.querySelectorAll('#fleet [data-fleet-id]').length >= 2",
        20,
        "the fleet's identities",
    )
    .await;
    until(
        &page,
        "document.getElementById('totals').innerText.includes('identities without a host') \
         && (document.querySelector('#fleet [data-fleet-id=\"ghost/0\"]') || {innerText: ''}).innerText.includes('ghost is gone') \
         && document.getElementById('fleet-nodes').innerText.includes('1 identity without a host')",
        20,
        "the identity without a host, in the totals and its card",
    )
    .await;
    assert_eq!(eval(&page, FITS).await, json!(true), "fits at 1280 px");
    keep_screenshot(&page, "status-1280").await;

    // An admin action by keyboard alone: focus Reset, Enter opens the
    // confirmation, Escape cancels it; Enter again and Enter on Confirm acts.
    const RESET: &str = "button[data-action=\"reset\"][data-slot=\"1\"]";
    const OPEN: &str = "document.getElementById('confirm').open";
    let reset = focus_and_press(&page, RESET, "Enter", OPEN).await;
    reset.press_key("Escape").await.expect("Escape");
    until(&page, &format!("!{OPEN}"), 5, "cancelled").await;
    assert_eq!(
        audit_lines(env, &["reset_slot"]),
        0,
        "a cancelled action calls nothing"
    );
    // Closed and asked again in one task, before the dialog's `close` event
    // is delivered (a person's Escape and Enter at once): it opens again.
    let reopened = eval(
        &page,
        &format!(
            "(() => {{ const r = document.querySelector('{}'); const d = document.getElementById('confirm'); \
             r.click(); d.close(); r.click(); const open = d.open; d.close(); return open; }})()",
            RESET
        ),
    )
    .await;
    assert_eq!(
        reopened,
        json!(true),
        "a second question right after a close"
    );
    until(&page, &format!("!{OPEN}"), 5, "closed again").await;
    // The cards re-render while the action is in flight (as a live event's
    // refresh does, 300 ms after it arrives): the answer still shows.
    eval(
        &page,
        "(() => { const f = window.fetch; window.fetch = async (u, o) => { \
         const r = await f(u, o); if (o && o.method === 'POST') { window.fetch = f; await refresh(); } \
         return r; }; return true; })()",
    )
    .await;
    let focused = "document.activeElement.id === 'confirm-ok'";
    let reset = focus_and_press(&page, RESET, "Enter", focused).await;
    reset.press_key("Enter").await.expect("Enter on Confirm");
    // The event arrives live over the WebSocket, and the card says done.
    until(
        &page,
        "[...document.querySelectorAll('#events li')].some(li => li.innerText.includes('slot 1') \
         && li.innerText.includes('breakers reset'))",
        10,
        "the reset's event, live",
    )
    .await;
    until(
        &page,
        "document.getElementById('msg-1').innerText.includes('done')",
        10,
        "the card says done",
    )
    .await;
    // Through the same gate and audit as the API: under the key's name.
    assert_eq!(
        audit_lines(env, &["reset_slot", "\"ops\""]),
        1,
        "the reset in the audit log"
    );
    // Filters: only calibration events.
    page.evaluate("(() => { const s = document.getElementById('f-kind'); s.value = 'calibrated'; s.dispatchEvent(new Event('input')); })()")
        .await
        .expect("filter");
    let kinds = eval(
        &page,
        "[...document.querySelectorAll('#events li[data-kind]')].map(li => li.dataset.kind)",
    )
    .await;
    let kinds = kinds.as_array().cloned().unwrap_or_default();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| k == "calibrated"),
        "{kinds:?}"
    );

    // Phone size: the same page, nothing wider than 390 px.
    size(&page, 390, 844, true).await;
    page.reload().await.expect("reload");
    until(
        &page,
        "document.querySelectorAll('#cards .card[data-slot]').length === 2 \
         && document.querySelectorAll('.chart').length >= 1 \
         && document.querySelectorAll('#events li').length >= 1",
        20,
        "the page at phone size",
    )
    .await;
    assert_eq!(eval(&page, "window.innerWidth").await, json!(390));
    assert_eq!(eval(&page, FITS).await, json!(true), "fits at 390 px");
    keep_screenshot(&page, "status-390").await;
    let narrow = eval(
        &page,
        "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + '.' + e.className)",
    )
    .await;
    assert_eq!(narrow, json!([]), "elements past the right edge at 390 px");

    // A new tab has no key (sessionStorage is per tab): the page asks for
    // one; a viewer key typed in shows the same cards, no action buttons.
    let tab = chromium.page(390, 844, true, &d.url("/")).await;
    until(
        &tab,
        "getComputedStyle(document.getElementById('login')).display !== 'none' \
         && document.getElementById('main').hidden",
        10,
        "the key form",
    )
    .await;
    let input = tab.find_element("#key").await.expect("the key field");
    input.click().await.expect("click");
    input.type_str(viewer).await.expect("type");
    input.press_key("Enter").await.expect("Enter");
    until(
        &tab,
        "document.querySelectorAll('#cards .card[data-slot]').length === 2",
        20,
        "the viewer's cards",
    )
    .await;
    assert_eq!(
        eval(
            &tab,
            "document.querySelectorAll('button[data-action]').length"
        )
        .await,
        json!(0),
        "a viewer has no action buttons"
    );
    let who = eval(&tab, "document.getElementById('who').innerText").await;
    assert_eq!(who, json!("watch (viewer)"));
    let (status, _) = post(d, viewer, "/api/v1/slots/0/reset", json!({})).await;
    assert_eq!(status, 403, "and the API refuses a viewer's action");
    assert_eq!(eval(&tab, FITS).await, json!(true));
    keep_screenshot(&tab, "status-390-viewer").await;
}

/// Focus `selector`'s element, press `key`, and wait until `then` holds.
async fn focus_and_press(
    page: &chromiumoxide::Page,
    selector: &str,
    key: &str,
    then: &str,
) -> chromiumoxide::Element {
    let el = page
        .find_element(selector)
        .await
        .unwrap_or_else(|e| panic!("{selector}: {e}"));
    el.focus().await.expect("focus");
    el.press_key(key).await.expect("key");
    until(page, then, 5, then).await;
    el
}

/// Lines of the node's audit log that contain every one of `needles`.
fn audit_lines(env: &common::Env, needles: &[&str]) -> usize {
    std::fs::read_to_string(env.path("a/data/audit.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .count()
}

/// Metric names a PromQL text mentions (idpool's and the process's).
fn names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    for prefix in ["idpool_", "process_"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(prefix) {
            let start = from + i;
            let before = start.checked_sub(1).map(|j| bytes[j]);
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
                end += 1;
            }
            if !before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                out.insert(text[start..end].to_string());
            }
            from = end;
        }
    }
    out
}

async fn dashboards(d: &Daemon, env: &common::Env, viewer: &str) {
    let exposition = reqwest::Client::new()
        .get(d.url("/metrics"))
        .bearer_auth(viewer)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    // Every series has its # HELP and # TYPE.
    let mut series = BTreeSet::new();
    let (mut help, mut kind) = (BTreeSet::new(), BTreeSet::new());
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help.insert(rest.split(' ').next().unwrap_or_default().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            kind.insert(rest.split(' ').next().unwrap_or_default().to_string());
        } else if !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            series.insert(name.to_string());
        }
    }
    let family = |n: &str| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| n.strip_suffix(s).filter(|b| kind.contains(*b)))
            .unwrap_or(n)
            .to_string()
    };
    for s in &series {
        let f = family(s);
        assert!(help.contains(&f), "{s}: no # HELP");
        assert!(kind.contains(&f), "{s}: no # TYPE");
    }
    assert!(
        exposition.contains(&format!(
            "idpool_build_info{{version=\"{}\",commit=\"",
            env!("CARGO_PKG_VERSION")
        )),
        "build info"
    );
    for p in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_threads",
    ] {
        assert!(series.contains(p), "{p}");
    }
    assert!(series.contains("idpool_browser_pss_bytes"));

    // Every series the dashboard and the alert rules name is served.
    let grafana: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/grafana/idpool.json")).expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut exprs: Vec<String> = Vec::new();
    for panel in grafana["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().expect("targets") {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    let alerts_path = root().join("deploy/prometheus/alerts.yml");
    let alerts = std::fs::read_to_string(&alerts_path).expect("alerts");
    let mut named = names_in(&alerts);
    for e in &exprs {
        named.extend(names_in(e));
    }
    named.extend(names_in(&grafana["templating"].to_string()));
    assert!(named.len() >= 20, "{named:?}");
    let served: BTreeSet<String> = series.iter().cloned().chain(kind.iter().cloned()).collect();
    let missing: Vec<&String> = named.iter().filter(|n| !served.contains(*n)).collect();
    assert!(missing.is_empty(), "named but not in /metrics: {missing:?}");

    // The real thing: promtool accepts the rules, and a Prometheus scraping
    // this daemon evaluates every rule and every panel's query.
    let check = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&alerts_path)
        .output()
        .expect("promtool runs (scripts/test.sh installs Debian's prometheus)");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let prom = Prometheus::start(env.path("prometheus").as_path(), d, viewer, &alerts_path).await;
    let rules = prom.until_rules_evaluated().await;
    for r in &rules {
        assert_eq!(r["health"], "ok", "rule {}: {}", r["name"], r["lastError"]);
    }
    assert_eq!(rules.len(), 11, "every rule loaded");
    for e in &exprs {
        let q = e
            .replace("$__rate_interval", "1m")
            .replace("$instance", ".*");
        let v = prom.query(&q).await;
        assert_eq!(v["status"], "success", "{q}: {v}");
    }
    // A panel over a series this daemon has shows data.
    let v = prom.query("idpool_browser_pss_bytes").await;
    assert!(
        !v["data"]["result"].as_array().expect("result").is_empty(),
        "{v}"
    );
    prom.stop().await;
}

/// A real Prometheus on loopback scraping the test daemon every second.
struct Prometheus {
    child: tokio::process::Child,
    port: u16,
}

impl Prometheus {
    async fn start(dir: &Path, d: &Daemon, key: &str, rules: &Path) -> Prometheus {
        std::fs::create_dir_all(dir).expect("dir");
        let key_file = dir.join("key");
        std::fs::write(&key_file, key).expect("key");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [\"{}\"]\n\
             scrape_configs:\n  - job_name: idpool\n    authorization:\n      type: Bearer\n      \
             credentials_file: \"{}\"\n    static_configs:\n      - targets: [\"127.0.0.1:{}\"]\n",
            rules.display(),
            key_file.display(),
            d.port
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("config");
        let port = free_port();
        let child = tokio::process::Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).expect("log"))
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus starts");
        Prometheus { child, port }
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> Option<Value> {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .query(query)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()
    }

    async fn query(&self, q: &str) -> Value {
        self.get("/api/v1/query", &[("query", q)])
            .await
            .unwrap_or(Value::Null)
    }

    /// The rules once the daemon was scraped and each rule evaluated after it.
    async fn until_rules_evaluated(&self) -> Vec<Value> {
        for _ in 0..300 {
            let up = self.query("up{job=\"idpool\"}").await;
            let scraped = up["data"]["result"][0]["value"][1] == "1";
            if scraped && let Some(v) = self.get("/api/v1/rules", &[]).await {
                let rules: Vec<Value> = v["data"]["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                    .collect();
                if !rules.is_empty() && rules.iter().all(|r| r["health"] != "unknown") {
                    return rules;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("Prometheus did not scrape the daemon and evaluate the rules in 30 s");
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
