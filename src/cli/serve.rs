//! `idpool serve`: run the daemon until SIGTERM / SIGINT.

use std::path::Path;
use std::process::ExitCode;

use idpool::config::Config;
use idpool::daemon::Daemon;

pub async fn run(config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    match &cfg.source {
        Some(p) => tracing::info!("config {}", p.display()),
        None => tracing::info!("no config file: embedded defaults"),
    }
    let daemon = Daemon::bind(&cfg).await?;
    daemon.run().await?;
    Ok(ExitCode::SUCCESS)
}
