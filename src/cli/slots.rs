//! `idpool slots [--json] [--watch]`: slot health from the running daemon
//! (`/api/v1/slots`), else from the data dir in-process; `--watch` then
//! follows the daemon's event stream.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use serde_json::Value;

use idpool::config::Config;
use idpool::pool::Pool;

#[derive(Debug, Args)]
pub struct SlotsArgs {
    /// Print the JSON the daemon returns.
    #[arg(long)]
    pub json: bool,
    /// After the table, print slot events as they happen (Ctrl-C ends).
    #[arg(long)]
    pub watch: bool,
    /// The whole fleet (`[cluster]`): every daemon and identity, and with
    /// `--watch` every daemon's events.
    #[arg(long)]
    pub fleet: bool,
    /// The daemon (a viewer key is enough).
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

/// GET `path` from the daemon as JSON.
pub async fn get_json(base: &str, path: &str, key: Option<&str>) -> anyhow::Result<Value> {
    let client = wreq::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut req = client.get(format!("{base}{path}"));
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("no daemon answers at {base} (is `idpool serve` running?)"))?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.context("reading the daemon's answer")?;
    let body: Value = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{path}: HTTP {status}, not JSON: {}",
            String::from_utf8_lossy(&bytes)
        )
    })?;
    if status != 200 {
        bail!(
            "{path}: HTTP {status}: {}",
            body["error"].as_str().unwrap_or("")
        );
    }
    Ok(body)
}

/// A running daemon's admin actions on slots (`refresh-cookies`,
/// `calibrate`), for the commands that go through it when one answers.
pub struct SlotActions {
    pub base: String,
    client: wreq::Client,
    key: Option<String>,
}

impl SlotActions {
    /// The daemon at `base` (reached already), with calls that may take as
    /// long as a browser warm-up or a calibration run.
    pub fn new(base: String, key: Option<String>) -> anyhow::Result<SlotActions> {
        let client = wreq::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(300))
            .build()?;
        Ok(SlotActions { base, client, key })
    }

    /// `Some(n)` if the daemon has slot n, else every slot.
    pub async fn slots(&self, slot: Option<usize>) -> anyhow::Result<Vec<usize>> {
        let status = get_json(&self.base, "/api/v1/slots", self.key.as_deref()).await?;
        let count = status["slots"].as_array().map(Vec::len).unwrap_or(0);
        Ok(match slot {
            Some(n) if n >= count => bail!("slot {n} does not exist (the pool has {count} slots)"),
            Some(n) => vec![n],
            None => (0..count).collect(),
        })
    }

    /// `DELETE path`: the JSON answer.
    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        let mut req = self.client.delete(format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let resp = req.send().await?;
        Ok(serde_json::from_slice(&resp.bytes().await?).unwrap_or(Value::Null))
    }

    /// `POST /api/v1/slots/{n}/{action}` with `body`: the HTTP status and the
    /// JSON answer (`Null` when it was not JSON).
    pub async fn post(&self, n: usize, action: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let mut req = self
            .client
            .post(format!("{}/api/v1/slots/{n}/{action}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = &self.key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let resp = req.send().await?;
        let code = resp.status().as_u16();
        let body = serde_json::from_slice(&resp.bytes().await?).unwrap_or_default();
        Ok((code, body))
    }
}

pub async fn run(config: Option<&Path>, a: SlotsArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let key = a.daemon.key.as_deref();
    let base = a.daemon.reach(&cfg, "`slots`").await?;
    if a.fleet {
        let Some(base) = base else {
            bail!("--fleet asks a running daemon of the fleet; none answers");
        };
        let view = get_json(&base, "/api/v1/fleet", key).await?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&view)?);
        } else {
            print!("{}", super::fleet::table(&view));
        }
        if a.watch {
            watch(&base, key, true).await?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let status = match &base {
        Some(base) => get_json(base, "/api/v1/slots", key).await?,
        None => {
            // The slots as saved on disk: jars, calibrations; no browser runs.
            let pool = Pool::open(&cfg.without_fleet())?;
            let status = pool.reports().status_now();
            pool.shutdown().await;
            status
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", table(&status));
    }
    if a.watch {
        let Some(base) = base else {
            bail!("--watch follows a running daemon's events; none answers");
        };
        watch(&base, key, false).await?;
    }
    Ok(ExitCode::SUCCESS)
}

fn ago(unix: &Value) -> String {
    match unix.as_u64() {
        Some(t) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(t);
            format!("{} s ago", now.saturating_sub(t))
        }
        None => "never".into(),
    }
}

/// The human-readable slot table.
pub fn table(status: &Value) -> String {
    let mut out = String::new();
    for s in status["slots"].as_array().into_iter().flatten() {
        let b = &s["browser"];
        let browser = if b["running"] == true {
            format!(
                "pid {} port {}, {} ops ({} since recycle), {}",
                b["pid"],
                b["port"],
                b["total_ops"],
                b["ops_since_recycle"],
                b["pss_mb"]
                    .as_u64()
                    .map(|m| format!("{m} MB"))
                    .unwrap_or_else(|| "memory ?".into())
            )
        } else {
            format!("not running (port {})", b["port"])
        };
        out.push_str(&identity_lines(s));
        out.push_str(&format!(
            "  browser    {browser}; launches {}, recycles {}, crashes {}\n",
            b["launches"], b["recycles"], b["crashes"]
        ));
        out.push_str(&calibration_lines(&s["calibration"]));
        let p = &s["identity"]["persona"];
        if p.is_object() {
            out.push_str(&format!(
                "  persona    screen {}x{} at {}x, window {}x{}, {} theme, {} font packages; device {}{}\n",
                p["screen"]["width"],
                p["screen"]["height"],
                p["dpr"],
                p["window"]["width"],
                p["window"]["height"],
                if p["dark"] == true { "dark" } else { "light" },
                p["fonts"].as_array().map_or(0, Vec::len),
                s["device"].as_str().unwrap_or("not measured yet"),
                s["pretend_os"]
                    .as_str()
                    .map(|w| format!("; {w}"))
                    .unwrap_or_default()
            ));
        }
        out.push_str(&format!(
            "  cookies    {}, saved {}\n",
            s["cookies"]["count"],
            ago(&s["cookies"]["last_saved"])
        ));
        out.push_str(&format!(
            "  requests   {}, last success {}, last error: {}\n",
            s["requests"],
            ago(&s["last_success"]),
            s["last_error"].as_str().unwrap_or("-")
        ));
        if let Some(breakers) = s["breakers"].as_object() {
            for (name, br) in breakers {
                let left = br["open_for_secs"]
                    .as_f64()
                    .map(|x| format!(", {x:.0} s left"))
                    .unwrap_or_default();
                let tiers: Vec<String> = br["tiers_blocked"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(t, v)| {
                        format!(
                            "tier {t} ({:.0} s ago)",
                            v["blocked_secs_ago"].as_f64().unwrap_or(0.0)
                        )
                    })
                    .collect();
                let resting = if br["cause"] == "rate_limited" {
                    " rate-limited"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "  {:<10} {}{resting} ({} failures{left}){}\n",
                    name,
                    br["state"].as_str().unwrap_or("?"),
                    br["failures"],
                    if tiers.is_empty() {
                        String::new()
                    } else {
                        format!("; blocked: {}", tiers.join(", "))
                    }
                ));
            }
        }
        for (name, l) in s["login"].as_object().into_iter().flatten() {
            out.push_str(&format!(
                "  login {name}: {} (since {}){}\n",
                l["state"].as_str().unwrap_or("?"),
                ago(&l["since"]),
                l["evidence"]
                    .as_str()
                    .map(|e| format!(", {e}"))
                    .unwrap_or_default()
            ));
        }
    }
    let linkage = &status["linkage"];
    for pair in linkage["pairs"].as_array().into_iter().flatten() {
        let shared: Vec<&str> = pair["shared"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "linkage slots {}-{}: {}{}\n",
            pair["slots"][0],
            pair["slots"][1],
            if pair["same_device"] == true {
                "ONE DEVICE (every component equal)".to_string()
            } else if shared.is_empty() {
                "share nothing a persona sets".to_string()
            } else {
                format!("share {}", shared.join(", "))
            },
            if pair["machine"].as_array().is_some_and(|m| !m.is_empty()) {
                " (and the machine's components)"
            } else {
                ""
            }
        ));
    }
    for (site, pairs) in linkage["signed_in_sharing"]
        .as_object()
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "linkage {site}: signed-in identities on one device: {pairs}\n"
        ));
    }
    for (name, b) in status["strategies"].as_object().into_iter().flatten() {
        if let Some(rpm) = b["requests_per_minute"].as_f64() {
            let across = if b["scope"] == "fleet" {
                "the fleet"
            } else {
                "all slots"
            };
            out.push_str(&format!(
                "budget {name}: {rpm:.1} requests a minute across {across} ({} cuts by the site's pushback; this daemon sends {:.1})\n",
                b["cuts"],
                b["sent_per_minute"].as_f64().unwrap_or_default()
            ));
        }
    }
    out
}

/// A budget in requests a minute (`null`: no limit).
fn per_minute(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "no limit".into(), |r| format!("{r:.1}/min"))
}

/// One line per event.
fn yes_no(v: &Value) -> &'static str {
    match v.as_bool() {
        Some(true) => "equal",
        Some(false) => "DIFFER",
        None => "?",
    }
}

/// `fidelity` lines of the table: JA4s, HTTP/2 and headers equal, residual.
fn calibration_lines(c: &Value) -> String {
    let state = c["state"].as_str().unwrap_or("?");
    if !matches!(state, "calibrated" | "stale" | "uncalibrated") {
        let why = c["error"]
            .as_str()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        return format!("  fidelity   {state}{why}\n");
    }
    let names: Vec<&str> = c["residual"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|d| d.split(':').next().unwrap_or(d))
        .collect();
    let residual = if names.is_empty() {
        "none".to_string()
    } else {
        format!("{} ({})", names.len(), names.join(", "))
    };
    let mut out = format!(
        "  fidelity   {state} ({}); h2 {}, headers {} (xhr {}), residual {residual}\n",
        c["chromium"].as_str().unwrap_or("?"),
        yes_no(&c["h2_equal"]),
        yes_no(&c["headers_equal"]),
        yes_no(&c["xhr_headers_equal"]),
    );
    out.push_str(&format!(
        "             JA4 browser {}  http {}\n",
        c["browser_ja4"].as_str().unwrap_or("-"),
        c["http_ja4"].as_str().unwrap_or("-")
    ));
    out.push_str(&browser_lines(&c["browser"]));
    out
}

/// `browser` lines: the self-check's signals by name, then WebGL.
fn browser_lines(b: &Value) -> String {
    if b.is_null() {
        return String::new();
    }
    let names: Vec<&str> = b["names"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = if names.is_empty() {
        "  browser    signals none".to_string()
    } else {
        format!(
            "  browser    signals {} ({})",
            names.len(),
            names.join(", ")
        )
    };
    if let Some(gl) = b["webgl"].as_str() {
        out.push_str(&format!("; WebGL {gl}"));
    }
    out.push('\n');
    for s in b["signals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        out.push_str(&format!(
            "             {}\n",
            idpool::diag::one_line(s, 160)
        ));
    }
    out
}

pub fn event_line(ev: &Value) -> String {
    // Another daemon's event (`--fleet`): its node first.
    let node = ev["node"]
        .as_str()
        .map(|n| format!("[{n}] "))
        .unwrap_or_default();
    format!("{node}{}", local_event_line(ev))
}

fn local_event_line(ev: &Value) -> String {
    let slot = ev["slot"]
        .as_u64()
        .map(|s| format!("slot {s} "))
        .unwrap_or_default();
    let strategy = ev["strategy"]
        .as_str()
        .map(|s| format!("{s} "))
        .unwrap_or_default();
    let d = &ev["detail"];
    let what = match ev["kind"].as_str().unwrap_or("") {
        "breaker" => format!(
            "breaker {} -> {} ({}{} failures{})",
            d["from"].as_str().unwrap_or("?"),
            d["to"].as_str().unwrap_or("?"),
            d["cause"]
                .as_str()
                .map(|c| format!("{c}, "))
                .unwrap_or_default(),
            d["failures"],
            d["open_for_secs"]
                .as_f64()
                .map(|x| format!(", {x:.0} s"))
                .unwrap_or_default()
        ),
        "budget" if d["why"] == "measure" => {
            "budget: the site pushed back; the fleet measures what it takes before it cuts".into()
        }
        "budget" => format!(
            "budget {} -> {} ({})",
            per_minute(&d["from"]),
            per_minute(&d["to"]),
            d["why"].as_str().unwrap_or("?")
        ),
        "tier_blocked" => format!("tier {} blocked", d["tier"]),
        "login_state" => format!(
            "login {} -> {} ({})",
            d["from"].as_str().unwrap_or("?"),
            d["to"].as_str().unwrap_or("?"),
            d["evidence"].as_str().unwrap_or("")
        ),
        "calibrated" => format!(
            "calibrated against {}: h2 {}, headers {}, residual {}",
            d["chromium"].as_str().unwrap_or("?"),
            yes_no(&d["h2_equal"]),
            yes_no(&d["headers_equal"]),
            d["residual"].as_array().map_or(0, Vec::len)
        ),
        "drifting" | "drift_cleared" => {
            let what = match d["field"].as_str() {
                Some(f) => format!("field {f} of {}", d["operation"].as_str().unwrap_or("?")),
                None => d["operation"].as_str().unwrap_or("?").to_string(),
            };
            if ev["kind"] == "drifting" {
                format!(
                    "{what} drifting: empty on {:.0}% of the last pages (before {:.0}%)",
                    d["empty_ratio"].as_f64().unwrap_or(0.0) * 100.0,
                    d["baseline"].as_f64().unwrap_or(0.0) * 100.0
                )
            } else {
                format!("{what} no longer drifting")
            }
        }
        other => format!("{other} {d}"),
    };
    format!(
        "{} {slot}{strategy}{what}",
        ev["ts"].as_str().unwrap_or("").get(11..19).unwrap_or("")
    )
}

async fn watch(base: &str, key: Option<&str>, fleet: bool) -> anyhow::Result<()> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let query = if fleet { "?fleet=1" } else { "" };
    let ws_url = format!("{}/api/v1/events{query}", base.replacen("http", "ws", 1));
    let mut req = ws_url.as_str().into_client_request()?;
    if let Some(k) = key {
        req.headers_mut()
            .insert("authorization", format!("Bearer {k}").parse()?);
    }
    let (mut ws, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::connect_async(req),
    )
    .await
    .context("the event stream did not open within 10 s")?
    .context("cannot open the event stream")?;
    println!("-- following events (Ctrl-C ends)");
    loop {
        tokio::select! {
            msg = ws.next() => match msg {
                Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t))) => {
                    if let Ok(ev) = serde_json::from_str::<Value>(&t) {
                        println!("{}", event_line(&ev));
                    }
                }
                Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) | None => {
                    println!("-- the daemon closed the stream");
                    return Ok(());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("event stream: {e}"),
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// A slot's first lines: profile, proxy (and its state), generation, egress.
fn identity_lines(s: &Value) -> String {
    let mut out = String::new();
    let proxy_state = match s["proxy_health"]["state"].as_str() {
        Some("down") => format!(
            " (DOWN: {})",
            s["proxy_health"]["last_error"].as_str().unwrap_or("?")
        ),
        _ => String::new(),
    };
    out.push_str(&format!(
        "slot {}  {} ({})  proxy: {}{proxy_state}  generation {}\n",
        s["slot"],
        s["profile"].as_str().unwrap_or(""),
        s["emulation"].as_str().unwrap_or(""),
        s["proxy"].as_str().unwrap_or("-"),
        s["identity"]["generation"]
    ));
    let e = &s["egress"];
    out.push_str(&format!(
        "  egress     {} requests, {} refused{}\n",
        e["requests"],
        e["refused"],
        e["last_refused"]
            .as_str()
            .map(|r| format!(" (last: {r})"))
            .unwrap_or_default()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_resting_slot_and_a_budget_show_in_the_table_and_the_events() {
        let status = json!({
            "slots": [{"slot": 0, "profile": "default", "emulation": "chrome_149",
                "browser": {"running": false, "port": 19300}, "calibration": {},
                "cookies": {"count": 1}, "requests": 3,
                "breakers": {"shop": {"state": "open", "cause": "rate_limited",
                    "failures": 0, "open_for_secs": 28.0, "tiers_blocked": {}}},
                "login": {"shop": {"state": "logged_out", "since": null,
                    "evidence": "[login] URL has \"/ap/signin\""}}}],
            "strategies": {"shop": {"requests_per_minute": 95.0, "cuts": 1},
                           "other": {"requests_per_minute": null, "cuts": 0}},
        });
        let t = table(&status);
        assert!(
            t.contains("shop       open rate-limited (0 failures, 28 s left)"),
            "{t}"
        );
        assert!(
            t.contains("budget shop: 95.0 requests a minute across all slots (1 cuts"),
            "{t}"
        );
        assert!(!t.contains("budget other"), "{t}");
        assert!(
            t.contains("login shop: logged_out (since never), [login] URL has \"/ap/signin\""),
            "{t}"
        );
        let line = event_line(&json!({"ts": "2026-12-01T06:00:02Z", "kind": "login_state",
            "slot": 0, "strategy": "shop", "detail": {"from": "logged_in", "to": "logged_out",
            "evidence": "[login] selector `form#signin` matched"}}));
        assert_eq!(
            line,
            "06:00:02 slot 0 shop login logged_in -> logged_out ([login] selector `form#signin` matched)"
        );
        let line = event_line(&json!({"ts": "2026-12-01T06:00:00Z", "kind": "breaker",
            "slot": 0, "strategy": "shop", "detail": {"from": "closed", "to": "open",
            "cause": "rate_limited", "failures": 0, "open_for_secs": 30.0}}));
        assert_eq!(
            line,
            "06:00:00 slot 0 shop breaker closed -> open (rate_limited, 0 failures, 30 s)"
        );
        let line = event_line(&json!({"ts": "2026-12-01T06:00:01Z", "kind": "budget",
            "slot": 1, "strategy": "shop", "detail": {"from": null, "to": 60.0, "why": "cut"}}));
        assert_eq!(
            line,
            "06:00:01 slot 1 shop budget no limit -> 60.0/min (cut)"
        );
    }
}
