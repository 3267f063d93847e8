//! Reaching the running daemon from a command: `--url` and `--key` (one
//! flattened [`DaemonArgs`] for every command that talks to it), and the one
//! rule of `call`, `refresh-cookies`, `calibrate` and `slots`: through the
//! daemon when one answers, else in-process on the data dir, said on stderr.

use std::time::Duration;

use anyhow::bail;
use clap::Args;

use idpool::config::Config;

/// Where the daemon is and the key to show it.
#[derive(Debug, Clone, Args)]
pub struct DaemonArgs {
    /// The daemon's URL, `http://HOST:PORT` (a trailing `/mcp` is fine);
    /// default: from the config's server.listen. Given, the command never
    /// falls back to running in-process.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// API key for the daemon.
    #[arg(long, env = "IDPOOL_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

impl DaemonArgs {
    /// The daemon's base URL: `--url` without a trailing `/mcp`, else
    /// `http://<server.listen>` with a wildcard address turned into loopback.
    pub fn base(&self, cfg: &Config) -> String {
        match &self.url {
            Some(u) => u.trim_end_matches('/').trim_end_matches("/mcp").to_string(),
            None => {
                let mut addr = cfg.server.listen;
                if addr.ip().is_unspecified() {
                    addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                }
                format!("http://{addr}")
            }
        }
    }

    /// The daemon's MCP endpoint.
    pub fn mcp_url(&self, cfg: &Config) -> String {
        format!("{}/mcp", self.base(cfg))
    }

    /// The daemon's base URL when its `/healthz` answers. When none does:
    /// with `--url`, an error; without, `None`, and stderr says that `what`
    /// runs in-process on the data dir instead.
    pub async fn reach(&self, cfg: &Config, what: &str) -> anyhow::Result<Option<String>> {
        let base = self.base(cfg);
        let client = wreq::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(3))
            .build()?;
        let up = client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        match (up, &self.url) {
            (true, _) => Ok(Some(base)),
            (false, Some(_)) => bail!("no daemon answers at {base}"),
            (false, None) => {
                eprintln!(
                    "idpool: no daemon answers at {base}; {what} runs in-process on {}",
                    cfg.pool.data_dir.display()
                );
                Ok(None)
            }
        }
    }
}
