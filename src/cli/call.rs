//! `idpool call TOOL --args JSON`: run one tool and print its JSON result.
//! Until the daemon exists this runs on an in-process pool over the data dir
//! (the daemon issue routes it to the running daemon).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use crate::config::Config;
use crate::pool::Pool;
use crate::tiers::RunOptions;
use crate::tools;

#[derive(Debug, Args)]
pub struct CallArgs {
    /// scrape, get_reviews, extract or list_strategies.
    pub tool: String,
    /// The tool's arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
}

pub async fn run(config: Option<&Path>, a: CallArgs) -> anyhow::Result<ExitCode> {
    let args: Value = serde_json::from_str(&a.args)
        .with_context(|| format!("--args is not valid JSON: {}", a.args))?;
    let cfg = Config::load(config)?;
    let pool = Pool::open(&cfg)?;
    pool.end_stale_browsers().await;
    let result = match a.tool.as_str() {
        "scrape" => tools::scrape::run(&pool, args).await,
        "get_reviews" => tools::get_reviews::run(&pool, args, RunOptions::default()).await,
        "extract" => tools::extract::run(&pool, args, RunOptions::default()).await,
        "list_strategies" => Ok(tools::list_strategies::run(&pool)),
        other => {
            pool.shutdown().await;
            bail!("unknown tool `{other}` (scrape, get_reviews, extract, list_strategies)")
        }
    };
    pool.shutdown().await;
    match result {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("idpool: {} failed: {e}", a.tool);
            Ok(ExitCode::from(2))
        }
    }
}
