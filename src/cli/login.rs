//! `idpool login --slot N --strategy S`: a person signs slot N in on the
//! strategy's site. Through the running daemon (an admin key): it opens the
//! strategy's `login_url` in the slot's browser and prints the live-view URL
//! to open (on this machine or a phone); the command waits until the site
//! shows the slot signed in, the session times out, or Ctrl-C ends it.
//! Without a daemon, `--headful` does the same in a browser window on this
//! desktop.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use serde_json::{Value, json};

use idpool::config::Config;
use idpool::pool::Pool;
use idpool::services::LoginLimits;

#[derive(Debug, Args)]
pub struct LoginArgs {
    #[arg(long)]
    pub slot: usize,
    /// The strategy whose site to sign in on (its `[session] login_url`).
    #[arg(long)]
    pub strategy: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// End after this many seconds without input.
    #[arg(long, default_value_t = 180)]
    pub idle: u64,
    /// Without a daemon: show the slot's browser in a window on this desktop.
    #[arg(long)]
    pub headful: bool,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

pub async fn run(config: Option<&Path>, a: LoginArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = Config::load(config)?;
    let end = match a.daemon.reach(&cfg, "login").await? {
        Some(base) => through_daemon(&base, &a).await?,
        None => {
            if !a.headful {
                bail!(
                    "no daemon: start `idpool serve` and open the live view it offers, or use --headful on a desktop"
                );
            }
            cfg.browser.headless = false;
            let pool = Pool::open(&cfg.without_fleet())?;
            let limits = LoginLimits {
                timeout: Duration::from_secs(a.timeout),
                idle: Duration::from_secs(a.idle),
            };
            let s = pool.services().logins.start(a.slot, &a.strategy, limits)?;
            eprintln!(
                "slot {}: sign in in the browser window ({})",
                a.slot, s.login_url
            );
            let st = tokio::select! {
                st = s.done() => st,
                _ = tokio::signal::ctrl_c() => { s.cancel(); s.done().await }
            };
            pool.shutdown().await;
            json!(st)
        }
    };
    let state = end["state"].as_str().unwrap_or("?");
    if state == "logged_in" {
        println!(
            "slot {}: logged_in on {}; cookies saved",
            a.slot, a.strategy
        );
        Ok(ExitCode::SUCCESS)
    } else {
        let why = end["error"]
            .as_str()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        println!("slot {}: {state}{why}; cookies saved", a.slot);
        Ok(ExitCode::from(2))
    }
}

async fn through_daemon(base: &str, a: &LoginArgs) -> anyhow::Result<Value> {
    if a.headful {
        eprintln!("idpool: --headful is ignored: the daemon's browser is shown in the live view");
    }
    let d = super::slots::SlotActions::new(base.to_string(), a.daemon.key.clone())?;
    let body = json!({"strategy": a.strategy, "timeout_secs": a.timeout, "idle_secs": a.idle});
    let (code, started) = d.post(a.slot, "login", &body).await?;
    if code != 200 {
        let hint = if matches!(code, 401 | 403) {
            " (logging in needs the admin role: an admin key via --key or IDPOOL_KEY)"
        } else {
            ""
        };
        bail!(
            "slot {}: HTTP {code}: {}{hint}",
            a.slot,
            started["error"].as_str().unwrap_or("")
        );
    }
    let id = started["id"].as_str().unwrap_or_default().to_string();
    println!(
        "slot {}: open the live view to sign in: {base}{}",
        a.slot,
        started["live_url"].as_str().unwrap_or("")
    );
    println!(
        "  (it shows {} in the slot's browser; admin key needed)",
        started["login_url"].as_str().unwrap_or("")
    );
    let key = a.daemon.key.as_deref();
    let path = format!("/api/v1/live/{id}");
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                let s = super::slots::get_json(base, &path, key).await?;
                if s["status"]["done"] == true {
                    return Ok(s["status"].clone());
                }
            }
            _ = tokio::signal::ctrl_c() => {
                let ended = d.delete(&path).await?;
                return Ok(ended["status"].clone());
            }
        }
    }
}
