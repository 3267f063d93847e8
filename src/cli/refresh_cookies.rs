//! `idpool refresh-cookies`: open a strategy's warm-up URL in slots' browsers,
//! let any challenge pass, and persist the cookies into the slots' jars.
//! Through the running daemon when one answers (its browsers and jars are the
//! live ones; an admin key is needed when keys are on), otherwise directly on
//! the data dir.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use idpool::config::Config;
use idpool::pool::Pool;

#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// The strategy whose warm-up URL to visit.
    #[arg(long)]
    pub strategy: String,
    /// Only this slot.
    #[arg(long, conflicts_with = "all")]
    pub slot: Option<usize>,
    /// Every slot (the default when --slot is not given).
    #[arg(long)]
    pub all: bool,
    /// Show the browser window (needs a display; direct mode only).
    #[arg(long)]
    pub headful: bool,
    /// The daemon (an admin key is needed when keys are on).
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

/// Through the daemon; `None` when no daemon answers.
async fn through_daemon(cfg: &Config, args: &RefreshArgs) -> anyhow::Result<Option<ExitCode>> {
    let Some(base) = args.daemon.reach(cfg, "refresh-cookies").await? else {
        return Ok(None);
    };
    let daemon = super::slots::SlotActions::new(base, args.daemon.key.clone())?;
    if args.headful {
        eprintln!("idpool: --headful is ignored: the daemon's browsers refresh the cookies");
    }
    let slots = daemon.slots(args.slot).await?;
    eprintln!("through the daemon at {}", daemon.base);
    let mut failed = 0;
    for n in slots {
        let (code, body) = daemon
            .post(
                n,
                "refresh-cookies",
                &serde_json::json!({"strategy": args.strategy}),
            )
            .await?;
        match body["slots"].get(0) {
            Some(r) if code == 200 => {
                let ok = r["ok"] == true;
                failed += usize::from(!ok);
                println!(
                    "slot {n}: {} cookies {} -> {}: {}",
                    body["cookie_domain"].as_str().unwrap_or(""),
                    r["cookies_before"],
                    r["cookies_after"],
                    if ok {
                        "ok".to_string()
                    } else {
                        format!("error: {}", r["error"].as_str().unwrap_or(""))
                    }
                );
            }
            _ => {
                failed += 1;
                let hint = if matches!(code, 401 | 403) {
                    " (refreshing cookies needs the admin role: an admin key via --key or \
                     IDPOOL_KEY, or server.anonymous_role = \"admin\" on a daemon without keys)"
                } else {
                    ""
                };
                println!(
                    "slot {n}: error: HTTP {code}: {}{hint}",
                    body["error"].as_str().unwrap_or("")
                );
            }
        }
    }
    Ok(Some(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }))
}

pub async fn run(config: Option<&Path>, args: RefreshArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = Config::load(config)?;
    if let Some(code) = through_daemon(&cfg, &args).await? {
        return Ok(code);
    }
    if args.headful {
        cfg.browser.headless = false;
    }
    let pool = Pool::open(&cfg.without_fleet())?;
    let Some(strategy) = pool.registry().get(&args.strategy).cloned() else {
        let registry = pool.registry();
        let known: Vec<&str> = registry.iter().map(|s| s.name()).collect();
        bail!(
            "unknown strategy `{}` (known: {})",
            args.strategy,
            known.join(", ")
        );
    };
    let url = strategy
        .warmup_url()
        .cloned()
        .with_context(|| format!("strategy `{}` has no warmup_url", strategy.name()))?;
    let identities = pool.leases().identities();
    let slots = identities.chosen(args.slot)?;
    for (slot, pid) in pool.end_stale_browsers().await {
        eprintln!("slot {slot}: ended Chromium pid {pid} left by an earlier run");
    }
    let mut failed = 0;
    for n in slots {
        let before = identities.cookies_for(n, strategy.cookie_domain());
        let result = pool
            .leases()
            .refresh_cookies(n, strategy.name(), &url)
            .await;
        let after = identities.cookies_for(n, strategy.cookie_domain());
        match result {
            Ok(()) => println!(
                "slot {n}: {} cookies {before} -> {after}: ok",
                strategy.cookie_domain()
            ),
            Err(e) => {
                failed += 1;
                println!(
                    "slot {n}: {} cookies {before} -> {after}: error: {e}",
                    strategy.cookie_domain()
                );
            }
        }
    }
    pool.shutdown().await;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
