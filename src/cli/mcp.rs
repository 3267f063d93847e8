//! `idpool mcp`: MCP over stdio, bridged to the running daemon, or with
//! `--embedded` on an in-process pool. The role comes from `IDPOOL_ROLE`
//! (default operator); a key for the daemon from `IDPOOL_KEY` or `--key`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use idpool::auth::Role;
use idpool::config::Config;
use idpool::mcp::client::DaemonClient;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Run an in-process pool instead of bridging to the daemon.
    #[arg(long)]
    pub embedded: bool,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

pub async fn run(config: Option<&Path>, args: McpArgs) -> anyhow::Result<ExitCode> {
    let role: Role = match std::env::var("IDPOOL_ROLE") {
        Ok(r) => r
            .parse()
            .map_err(|e: String| anyhow::anyhow!("IDPOOL_ROLE: {e}"))?,
        Err(_) => Role::Operator,
    };
    let cfg = Config::load(config)?;
    if args.embedded {
        let core = idpool::daemon::build_core(&cfg.without_fleet()).await?;
        let r = idpool::mcp::stdio::serve_embedded(core.clone(), role).await;
        core.pool().shutdown().await;
        if let Some(a) = core.audit() {
            a.flush();
        }
        r?;
        return Ok(ExitCode::SUCCESS);
    }
    let client = DaemonClient::new(&args.daemon.mcp_url(&cfg), args.daemon.key, Some(role))?;
    idpool::mcp::stdio::bridge(client).await.with_context(
        || "no daemon to bridge to; start `idpool serve`, or run `idpool mcp --embedded`",
    )?;
    Ok(ExitCode::SUCCESS)
}
