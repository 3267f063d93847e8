//! `idpool refresh-cookies`: open a strategy's warm-up URL in slots' browsers,
//! let any challenge pass, and persist the cookies into the slots' jars.
//! (Through a running daemon once the daemon exists; directly on the data dir now.)

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use crate::config::Config;
use crate::pool::Pool;

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
    /// Show the browser window (needs a display).
    #[arg(long)]
    pub headful: bool,
}

pub async fn run(config: Option<&Path>, args: RefreshArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = Config::load(config)?;
    if args.headful {
        cfg.browser.headless = false;
    }
    let pool = Pool::open(&cfg)?;
    let Some(strategy) = pool.registry().get(&args.strategy).cloned() else {
        let known: Vec<&str> = pool.registry().iter().map(|s| s.name()).collect();
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
    let slots: Vec<usize> = match args.slot {
        Some(n) if n >= pool.slots().len() => bail!(
            "slot {n} does not exist (the pool has {} slots)",
            pool.slots().len()
        ),
        Some(n) => vec![n],
        None => (0..pool.slots().len()).collect(),
    };
    for (slot, pid) in pool.end_stale_browsers().await {
        eprintln!("slot {slot}: ended Chromium pid {pid} left by an earlier run");
    }
    let mut failed = 0;
    for n in slots {
        let slot = &pool.slots()[n];
        let before = slot.jar().export_for_domain(strategy.cookie_domain()).len();
        let result = pool.refresh_cookies(n, strategy.name(), &url).await;
        let after = slot.jar().export_for_domain(strategy.cookie_domain()).len();
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
