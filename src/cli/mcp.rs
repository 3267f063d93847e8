//! `idpool mcp`: MCP over stdio, bridged to the running daemon, or with
//! `--embedded` on an in-process pool. The role comes from `IDPOOL_ROLE`
//! (default operator); a key for the daemon from `IDPOOL_KEY` or `--key`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::auth::Role;
use crate::config::Config;
use crate::mcp::client::DaemonClient;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Run an in-process pool instead of bridging to the daemon.
    #[arg(long)]
    pub embedded: bool,
    /// The daemon's MCP URL (default: from the config's server.listen).
    #[arg(long)]
    pub url: Option<String>,
    /// API key for the daemon.
    #[arg(long, env = "IDPOOL_KEY", hide_env_values = true)]
    pub key: Option<String>,
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
        let core = crate::daemon::build_core(&cfg).await?;
        let r = crate::mcp::stdio::serve_embedded(core.clone(), role).await;
        core.pool().shutdown().await;
        if let Some(a) = core.audit() {
            a.flush();
        }
        r?;
        return Ok(ExitCode::SUCCESS);
    }
    let url = args.url.unwrap_or_else(|| daemon_url(&cfg));
    let client = DaemonClient::new(&url, args.key, Some(role))?;
    crate::mcp::stdio::bridge(client).await.with_context(
        || "no daemon to bridge to; start `idpool serve`, or run `idpool mcp --embedded`",
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `http://<server.listen>/mcp`, with a wildcard address turned into loopback.
pub fn daemon_url(cfg: &Config) -> String {
    let mut addr = cfg.server.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("http://{addr}/mcp")
}
