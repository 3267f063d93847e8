//! `idpool retire --slot N`: give a slot a fresh identity. Through the
//! running daemon when one answers (an admin key is needed when keys are
//! on), otherwise directly on the data dir.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use idpool::config::Config;
use idpool::pool::Pool;

#[derive(Debug, Args)]
pub struct RetireArgs {
    /// The slot to retire.
    #[arg(long)]
    pub slot: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

pub async fn run(config: Option<&Path>, a: RetireArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let result: Result<Value, String> = match a.daemon.reach(&cfg, "retire").await? {
        Some(base) => {
            let daemon = super::slots::SlotActions::new(base, a.daemon.key.clone())?;
            let (code, body) = daemon.post(a.slot, "retire", &json!({})).await?;
            if code == 200 {
                Ok(body)
            } else {
                let hint = if matches!(code, 401 | 403) {
                    " (retiring needs the admin role: an admin key via --key or IDPOOL_KEY)"
                } else {
                    ""
                };
                Err(format!(
                    "HTTP {code}: {}{hint}",
                    body["error"].as_str().unwrap_or("")
                ))
            }
        }
        None => {
            let pool = Pool::open(&cfg.without_fleet())?;
            let r = idpool::tools::retire_slot::run(pool.leases(), json!({"slot": a.slot})).await;
            pool.shutdown().await;
            r.map_err(|e| e.to_string())
        }
    };
    match result {
        Ok(r) if a.json => println!("{}", serde_json::to_string_pretty(&r)?),
        Ok(r) => println!(
            "slot {}: retired generation {} -> {} (session {}); the old identity is in {}",
            r["slot"],
            r["old_generation"],
            r["generation"],
            r["session"].as_str().unwrap_or("?"),
            r["retired_to"].as_str().unwrap_or("?")
        ),
        Err(e) => {
            eprintln!("idpool retire: slot {}: {e}", a.slot);
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::SUCCESS)
}
