//! Shared helpers for the integration tests: an in-process testbed on ephemeral
//! loopback ports and a pool configured against it in a temp folder.

#![allow(dead_code)]

pub mod any_shop;
pub mod canary;
pub mod chromium;
pub mod daemon;
pub mod fleet;
pub mod proxies;

use std::path::{Path, PathBuf};

use idpool::config::Config;
use idpool::pool::Pool;
use idpool_testbed::{Testbed, TestbedConfig};

/// The testbed strategy the tests use: no politeness delay, captcha/login/403 are
/// hard blocks, the JS interstitial is a challenge, `.no-reviews` proves empty.
pub const TESTBED_STRATEGY: &str = r##"
name = "testbed"
hosts = ["127.0.0.1"]
cookie_domain = "127.0.0.1"

[politeness]
min_interval_ms = 0
max_in_flight = 8
global_max_in_flight = 32

[block]
status = [403]
body = ["validateCaptcha"]
url = ["/ap/signin"]

[challenge]
selector = "#tb-challenge"

[empty]
selector = ".no-reviews"
"##;

/// A second strategy over the same testbed, reached as `localhost`.
pub const ALT_STRATEGY: &str = r##"
name = "alt"
hosts = ["localhost"]

[politeness]
min_interval_ms = 0
max_in_flight = 8

[block]
body = ["validateCaptcha"]
"##;

/// A temp folder holding idpool.toml, strategies/ and profiles/.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub testbed: Testbed,
}

impl Env {
    /// Start a testbed and write a config for `slots` default-profile slots.
    pub async fn new(slots: usize) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let testbed = Testbed::start(TestbedConfig::ephemeral(dir.path().join("testbed")))
            .await
            .expect("testbed starts");
        let env = Env { dir, testbed };
        env.write("strategies/testbed.toml", TESTBED_STRATEGY);
        env.write("strategies/alt.toml", ALT_STRATEGY);
        env.write(
            "profiles/default.toml",
            "emulation = \"chrome_149\"\nplatform = \"linux\"\n",
        );
        env.write_config(slots, true);
        env
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// idpool.toml with `slots` slots; `trust_ca` adds the testbed CA to extra_root_certs.
    pub fn write_config(&self, slots: usize, trust_ca: bool) {
        self.write_config_with(slots, trust_ca, free_base_port(slots), "");
    }

    /// idpool.toml with a chosen CDP base port and extra TOML appended.
    pub fn write_config_with(&self, slots: usize, trust_ca: bool, base_port: u16, extra: &str) {
        self.write_config_private(slots, trust_ca, base_port, "true", extra);
    }

    /// idpool.toml with `security.allow_private_networks = <private>` (TOML).
    pub fn write_config_private(
        &self,
        slots: usize,
        trust_ca: bool,
        base_port: u16,
        private: &str,
        extra: &str,
    ) {
        let certs = if trust_ca {
            "[\"testbed/ca.pem\"]"
        } else {
            "[]"
        };
        self.write(
            "idpool.toml",
            &format!(
                "[pool]\nsize = {slots}\nbase_port = {base_port}\ndata_dir = \"data\"\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n\n[security]\nallow_private_networks = {private}\nextra_root_certs = {certs}\n\n{extra}"
            ),
        );
    }

    pub fn config(&self) -> Config {
        Config::load_file(&self.path("idpool.toml")).expect("config loads")
    }

    pub fn pool(&self) -> Pool {
        Pool::open(&self.config()).expect("pool opens")
    }

    /// `https://127.0.0.1:<port><path>`
    pub fn url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!("{}{path}", self.testbed.https_url())).expect("url")
    }

    /// The same testbed reached as `localhost` (the `alt` strategy).
    pub fn alt_url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!(
            "https://localhost:{}{path}",
            self.testbed.https_addr.port()
        ))
        .expect("url")
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A base port with `slots` free consecutive ports after it, so parallel tests
/// never share a CDP port. Drawn below Linux's ephemeral range (32768+), where
/// the listeners a pool binds on port 0 (its egresses, the calibration
/// listener, the testbed, test proxies) never land.
pub fn free_base_port(slots: usize) -> u16 {
    for _ in 0..500 {
        let base: u16 = rand::random_range(20000..32000);
        if usize::from(base) + slots >= 32768 {
            continue;
        }
        let all_free =
            (0..slots as u16).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no free port range");
}

/// Close every browser of `pool` and check that no Chromium it started is left.
pub async fn shutdown_and_check(pool: &Pool) {
    let pids: Vec<u32> = pool
        .leases()
        .slots_for_tests()
        .iter()
        .flat_map(|s| s.browser_facts().pids)
        .collect();
    pool.shutdown().await;
    for pid in pids {
        assert!(
            !idpool::identity::browser::process::pid_alive(pid),
            "Chromium pid {pid} outlived the pool"
        );
    }
    for s in pool.leases().slots_for_tests() {
        assert!(
            !s.browser_facts().running,
            "slot {} still reports a running browser",
            s.id
        );
    }
}

/// Pids of Chromium browser processes (not helpers) using a user-data-dir under `dir`.
pub fn chromium_browsers_under(dir: &Path) -> Vec<(u32, Vec<String>)> {
    use idpool::identity::browser::process::{all_pids, cmdline, pid_alive};
    let needle = format!("--user-data-dir={}", dir.display());
    all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, cmdline(pid)?)))
        .filter(|(pid, args)| {
            let ours = args.iter().any(|a| a.starts_with(&needle));
            let helper = args.iter().any(|a| a.starts_with("--type="));
            ours && !helper && pid_alive(*pid)
        })
        .collect()
}

/// End, by PID, what [`chromium_browsers_under`] `dir` finds: the browsers
/// a daemon started there and left behind (killed before it could end
/// them). Each browser leads its own process group (the launcher starts it
/// so), which ends with it; the pids ended.
pub fn end_browsers_under(dir: &Path) -> Vec<u32> {
    let found: Vec<u32> = chromium_browsers_under(dir)
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    for &pid in &found {
        let Ok(pid) = i32::try_from(pid) else {
            continue;
        };
        // SAFETY: kill(2) on the group of a browser this test's daemon started.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
        }
    }
    found
}

/// The env's daemon audit log (`data/audit.log`), a JSON value per line.
pub fn audit_lines(env: &Env) -> Vec<serde_json::Value> {
    std::fs::read_to_string(env.path("data/audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line"))
        .collect()
}

/// An env whose strategies folder holds the bundled testshop, aimed at this testbed.
pub async fn shop(slots: usize) -> Env {
    let env = Env::new(slots).await;
    let _ = std::fs::remove_file(env.path("strategies/testbed.toml"));
    let _ = std::fs::remove_file(env.path("strategies/alt.toml"));
    let bundled = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/testshop.toml"),
    )
    .expect("bundled testshop");
    env.write(
        "strategies/testshop.toml",
        &bundled.replace("https://127.0.0.1:8443", &env.testbed.https_url()),
    );
    env
}

/// Make the testbed answer paths under `prefix` after `delay_ms`.
pub fn slow(env: &Env, prefix: &str, delay_ms: u64) {
    use idpool_testbed::{Fault, FaultKind};
    let prefix = prefix.to_string();
    env.testbed.set_modes(|m| {
        m.fault = Some(Fault {
            kind: FaultKind::Slow,
            path_prefix: Some(prefix),
            remaining: None,
            delay_ms,
            status: 200,
            size_mb: 0,
        })
    });
}

/// Every review of `item` as the testbed generates it (the ground truth).
pub fn truth(item: &str) -> Vec<serde_json::Value> {
    use idpool_testbed::data;
    (0..data::review_count(item))
        .map(|i| {
            let r = data::review(item, i);
            serde_json::json!({"id": r.id, "author": r.author, "rating": r.rating, "title": r.title, "body": r.body,
                   "date": r.date, "verified": r.verified, "helpful": r.helpful})
        })
        .collect()
}

/// [`truth`] as a caller below `security.pii_role` (an operator, by
/// default) gets it: the reviewer's name (`pii = true`) masked to initials.
pub fn masked_truth(item: &str) -> Vec<serde_json::Value> {
    truth(item)
        .into_iter()
        .map(|mut r| {
            let name = r["author"].as_str().unwrap_or_default().to_string();
            let masked: Vec<String> = name
                .split_whitespace()
                .map(|w| format!("{}***", w.chars().next().unwrap_or('?')))
                .collect();
            r["author"] = serde_json::Value::String(masked.join(" "));
            r
        })
        .collect()
}

/// The tools a role sees, in `tools/list` order (from the specs, so a new
/// tool does not break the tests that count them).
pub fn tools_for(role: idpool::config::Role) -> Vec<&'static str> {
    (idpool::tools::ALL.iter())
        .filter(|t| t.role <= role)
        .map(|t| t.name)
        .collect()
}

/// The testbed's `tb_sid` session a logged request carried (`None`: none yet).
pub fn tb_sid(e: &idpool_testbed::LogEntry) -> Option<String> {
    e.cookie
        .as_deref()?
        .split(';')
        .find_map(|c| c.trim().strip_prefix("tb_sid="))
        .map(str::to_string)
}

/// A person's signed-in session on the testbed (Playwright's storageState,
/// as text), to import into a slot.
pub async fn signed_in_session(env: &Env) -> String {
    let token = sign_in(env).await;
    serde_json::json!({"cookies": [{"name": idpool_testbed::accounts::COOKIE,
        "value": token, "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true,
        "secure": false, "sameSite": "Lax"}], "origins": []})
    .to_string()
}

/// Sign in on the testbed as the test account (as a person would, in their
/// own browser); the session cookie's value.
pub async fn sign_in(env: &Env) -> String {
    let ca = reqwest::Certificate::from_pem(env.testbed.ca_pem.as_bytes()).expect("ca");
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .expect("client");
    let r = http
        .post(format!("{}/signin", env.testbed.https_url()))
        .form(&[
            ("email", idpool_testbed::accounts::EMAIL),
            ("password", idpool_testbed::accounts::PASSWORD),
            ("return_to", "/account"),
        ])
        .send()
        .await
        .expect("sign in");
    let set = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .to_string();
    let token = set
        .strip_prefix(&format!("{}=", idpool_testbed::accounts::COOKIE))
        .and_then(|rest| rest.split(';').next())
        .expect("tb_account=…");
    token.to_string()
}

/// The probe's reports in the testbed's log (`foreign`, `own`, `page`).
pub fn probe_reports(env: &Env) -> Vec<(u64, u64, String)> {
    env.testbed
        .log()
        .into_iter()
        .filter(|e| e.path.starts_with("/detect/main-world/report?"))
        .map(|e| {
            let q = url::Url::parse(&format!("https://x.test{}", e.path)).expect("url");
            let get = |k: &str| {
                q.query_pairs()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_default()
            };
            (
                get("foreign").parse().unwrap_or(0),
                get("own").parse().unwrap_or(0),
                get("page") + " " + &get("sample"),
            )
        })
        .collect()
}

/// The bundled strategy `name` (`strategies/NAME.toml`) aimed at `base`
/// (`scheme://host:port`) on `host`: its hosts, base URL, warm-up page and
/// cookie domain there, its pacing off; `more` rewrites any other line.
pub fn bundled_strategy_at(
    name: &str,
    host: &str,
    base: &str,
    more: impl Fn(&str) -> Option<String>,
) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("strategies/{name}.toml")),
    )
    .expect("the bundled strategy");
    text.lines()
        .map(|l| {
            if l.starts_with("hosts = ") {
                format!("hosts = [\"{host}\"]")
            } else if l.starts_with("base_url = ") {
                format!("base_url = \"{base}\"")
            } else if l.starts_with("warmup_url = ") {
                format!("warmup_url = \"{base}/\"")
            } else if l.starts_with("cookie_domain = ") {
                format!("cookie_domain = \"{host}\"")
            } else if l.starts_with("min_interval_ms = ") {
                "min_interval_ms = 0".to_string()
            } else {
                more(l).unwrap_or_else(|| l.to_string())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ref of the first line of a browser snapshot (`snapshot` in a
/// `browser_*` result) with `role "name"`.
pub fn ref_of(snapshot: &serde_json::Value, role: &str, name: &str) -> String {
    let text = snapshot["snapshot"].as_str().expect("snapshot");
    let want = format!("{role} \"{name}\"");
    let line = (text.lines())
        .find(|l| l.trim_start().trim_start_matches("- ").starts_with(&want))
        .unwrap_or_else(|| panic!("no {want} in\n{text}"));
    let at = line.find("[ref=").expect("a ref") + 5;
    line[at..].split(']').next().expect("ref").to_string()
}

/// Give slot `slot` (before the pool opens) the persona of the first seed
/// from 1 that `want` accepts; returns it.
pub fn seat_persona(
    env: &Env,
    slot: usize,
    want: impl Fn(&idpool::identity::persona::Persona) -> bool,
) -> idpool::identity::persona::Persona {
    let persona = (1u64..1_000_000)
        .map(idpool::identity::persona::Persona::draw)
        .find(|p| want(p))
        .expect("a seed");
    env.write(
        &format!("data/slots/{slot}/identity.json"),
        &serde_json::json!({"session": format!("{slot:012x}"), "generation": 0, "born": 1, "persona": persona})
            .to_string(),
    );
    persona
}

/// Give slot `slot` (before the pool opens) the desktop the older tests
/// were written for: a 1920×1080 screen with a 40-pixel panel, a 1366×768
/// window, pixel ratio 1, a light theme. (Without it each slot draws its
/// own persona.)
pub fn seat_plain_desktop(env: &Env, slot: usize) {
    seat_persona(env, slot, |p| {
        (p.screen.width, p.screen.height, p.screen.taskbar) == (1920, 1080, 40)
            && (p.window.width, p.window.height) == (1366, 768)
            && p.dpr == 1.0
            && !p.dark
    });
}

/// The handle the job tools (`crawl`, `crawl_status`) run with on `pool`.
pub fn job_desk(pool: &Pool) -> idpool::tools::JobDesk {
    idpool::tools::JobDesk {
        jobs: pool.services().jobs.clone(),
        leases: pool.leases().clone(),
    }
}
