//! `idpool calibrate [--slot N]`: calibrate slots' HTTP tier against their own
//! Chromium now and print both fingerprints side by side with the residual.
//! Through the running daemon when one answers (an admin key is needed when
//! keys are on), otherwise directly on the data dir.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use idpool::config::Config;
use idpool::pool::Pool;

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Only this slot (default: every slot).
    #[arg(long)]
    pub slot: Option<usize>,
    /// Print the whole records as JSON.
    #[arg(long)]
    pub json: bool,
    /// The daemon (an admin key is needed when keys are on).
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

/// Each slot's result through the daemon; `None` when no daemon answers.
async fn through_daemon(cfg: &Config, a: &CalibrateArgs) -> anyhow::Result<Option<Vec<Value>>> {
    let Some(base) = a.daemon.reach(cfg, "calibrate").await? else {
        return Ok(None);
    };
    let daemon = super::slots::SlotActions::new(base, a.daemon.key.clone())?;
    let slots = daemon.slots(a.slot).await?;
    eprintln!("through the daemon at {}", daemon.base);
    let mut out = Vec::new();
    for n in slots {
        let (code, body) = daemon.post(n, "calibrate", &json!({})).await?;
        match body["slots"].get(0) {
            Some(r) if code == 200 => out.push(r.clone()),
            _ => {
                let hint = if matches!(code, 401 | 403) {
                    " (calibrating needs the admin role: an admin key via --key or IDPOOL_KEY)"
                } else {
                    ""
                };
                out.push(json!({"slot": n, "ok": false, "error": format!(
                    "HTTP {code}: {}{hint}", body["error"].as_str().unwrap_or("")
                )}));
            }
        }
    }
    Ok(Some(out))
}

pub async fn run(config: Option<&Path>, a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let results = match through_daemon(&cfg, &a).await? {
        Some(r) => r,
        None => {
            let pool = Pool::open(&cfg.without_fleet())?;
            for (slot, pid) in pool.end_stale_browsers().await {
                eprintln!("slot {slot}: ended Chromium pid {pid} left by an earlier run");
            }
            let r = idpool::tools::calibrate::run(pool.leases(), json!({"slot": a.slot})).await;
            pool.shutdown().await;
            r?["slots"].as_array().cloned().unwrap_or_default()
        }
    };
    let mut failed = 0;
    for r in &results {
        if r["ok"] != true {
            failed += 1;
        }
        if a.json {
            continue;
        }
        print!("{}", side_by_side(r));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(s).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn hex(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|x| format!("{x:04x}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| "-".into())
}

fn row(out: &mut String, label: &str, b: String, h: String) {
    let mark = if b == h { "=" } else { "≠" };
    out.push_str(&format!("  {label:<22} {mark} browser {b}\n"));
    out.push_str(&format!("  {:<22}   http    {h}\n", ""));
}

/// One slot's record: browser and HTTP tier side by side, then the residual.
pub fn side_by_side(r: &Value) -> String {
    let mut out = String::new();
    if r["ok"] != true {
        out.push_str(&format!(
            "slot {}: calibration failed: {}\n",
            r["slot"],
            r["error"].as_str().unwrap_or("?")
        ));
        return out;
    }
    let rec = &r["record"];
    out.push_str(&format!(
        "slot {}  {}\n",
        r["slot"],
        rec["chromium"].as_str().unwrap_or("?")
    ));
    let (b, h) = (&rec["browser"], &rec["http"]);
    for (label, at, show) in ROWS {
        let side = |c: &Value| show.render(c.pointer(at).unwrap_or(&Value::Null));
        row(&mut out, label, side(b), side(h));
    }
    let rep = &rec["report"];
    let residual = rep["residual"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!(
        "  JA4 a {}, b {}, c explained by the residual: {}; HTTP/2 {}; headers {} (xhr {})\n",
        eq(&rep["ja4_a_equal"]),
        eq(&rep["ja4_b_equal"]),
        rep["ja4_c_explained"],
        eq(&rep["h2_equal"]),
        eq(&rep["headers_equal"]),
        eq(&rep["xhr_headers_equal"]),
    ));
    out.push_str(&format!("  residual ({}):\n", residual.len()));
    for d in &residual {
        out.push_str(&format!(
            "    {}: browser {}; http {}\n",
            d["what"].as_str().unwrap_or("?"),
            d["browser"].as_str().unwrap_or("-"),
            d["http"].as_str().unwrap_or("-")
        ));
    }
    out
}

/// How a row shows its value.
#[derive(Clone, Copy)]
enum Show {
    Text,
    Hex,
    SortedHex,
    /// A header list's names, pseudo-headers left out.
    Names,
}

impl Show {
    fn render(self, v: &Value) -> String {
        match self {
            Show::Text => s(v),
            Show::Hex => hex(v),
            Show::SortedHex => {
                let mut x: Vec<u64> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                x.sort_unstable();
                hex(&Value::from(x))
            }
            Show::Names => v
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p.get(0).and_then(Value::as_str))
                        .filter(|n| !n.starts_with(':'))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
        }
    }
}

/// The rows of the side-by-side view: label, where in a capture, how shown.
const ROWS: &[(&str, &str, Show)] = &[
    ("JA4", "/navigation/hello/ja4", Show::Text),
    ("ciphers", "/navigation/hello/ciphers", Show::Hex),
    (
        "extensions (sorted)",
        "/navigation/hello/extensions",
        Show::SortedHex,
    ),
    ("groups", "/navigation/hello/groups", Show::Hex),
    (
        "signature algorithms",
        "/navigation/hello/sig_algs",
        Show::Hex,
    ),
    ("ALPN", "/navigation/hello/alpn", Show::Text),
    ("ALPS", "/navigation/hello/alps", Show::Text),
    (
        "cert compression",
        "/navigation/hello/cert_compression",
        Show::Hex,
    ),
    ("HTTP/2 (Akamai)", "/navigation/akamai", Show::Text),
    ("priority navigation", "/navigation/priority", Show::Text),
    ("priority xhr", "/xhr/priority", Show::Text),
    ("navigation headers", "/navigation/headers", Show::Names),
    ("xhr headers", "/xhr/headers", Show::Names),
];

fn eq(v: &Value) -> &'static str {
    if v == true { "equal" } else { "DIFFER" }
}
