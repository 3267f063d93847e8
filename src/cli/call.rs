//! `idpool call TOOL --args JSON`: call one tool on the running daemon (over
//! its MCP endpoint) and print the structured result. With `--embedded`, or
//! when no daemon answers and no `--url` was given (said on stderr), the tool
//! runs in-process on the data dir instead.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use idpool::config::Config;
use idpool::mcp::client::DaemonClient;
use idpool::mcp::{CallContext, CallEnd};

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool.
    #[arg(help = tool_help())]
    pub tool: String,
    /// The tool's arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
    /// Run in-process on the data dir, even when a daemon runs.
    #[arg(long, conflicts_with = "url")]
    pub embedded: bool,
}

/// Every tool's name.
fn tool_names() -> Vec<&'static str> {
    idpool::tools::ALL.iter().map(|s| s.name).collect()
}

/// `TOOL` in `idpool call --help`: every tool, with the role it needs.
fn tool_help() -> String {
    let tools: Vec<String> = idpool::tools::ALL
        .iter()
        .map(|s| format!("{} ({})", s.name, s.role))
        .collect();
    format!("The tool: {}", tools.join(", "))
}

pub async fn run(config: Option<&Path>, a: CallArgs) -> anyhow::Result<ExitCode> {
    let args: Value = serde_json::from_str(&a.args)
        .with_context(|| format!("--args is not valid JSON: {}", a.args))?;
    let cfg = Config::load(config)?;
    if a.embedded {
        return in_process(&cfg, &a.tool, args).await;
    }
    match a.daemon.reach(&cfg, &format!("`{}`", a.tool)).await? {
        Some(_) => {
            let url = a.daemon.mcp_url(&cfg);
            let client = DaemonClient::new(&url, a.daemon.key.clone(), None)?;
            remote(&client, &a.tool, args).await
        }
        None => in_process(&cfg, &a.tool, args).await,
    }
}

async fn remote(client: &DaemonClient, tool: &str, args: Value) -> anyhow::Result<ExitCode> {
    client.initialize().await?;
    let params = json!({"name": tool, "arguments": args, "_meta": {"progressToken": "cli"}});
    let reply = client
        .call(1, "tools/call", params, |note| {
            if note["method"] == "notifications/progress"
                && let Some(m) = note["params"]["message"].as_str()
            {
                eprintln!("  {m}");
            }
        })
        .await;
    client.close().await;
    let reply = reply?;
    if let Some(e) = reply.get("error") {
        eprintln!(
            "idpool: {tool} refused: {} (JSON-RPC {})",
            e["message"].as_str().unwrap_or(""),
            e["code"]
        );
        return Ok(ExitCode::from(2));
    }
    let result = &reply["result"];
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    if result["isError"] == true {
        eprintln!("idpool: {tool} failed: {text}");
        return Ok(ExitCode::from(2));
    }
    match result.get("structuredContent") {
        Some(v) => println!("{}", serde_json::to_string_pretty(v)?),
        None => println!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn in_process(cfg: &Config, tool: &str, args: Value) -> anyhow::Result<ExitCode> {
    if idpool::tools::find(tool).is_none() {
        bail!("unknown tool `{tool}` ({})", tool_names().join(", "));
    }
    let core = idpool::daemon::build_core(&cfg.without_fleet()).await?;
    let ctx = CallContext {
        principal: idpool::auth::Principal::new("cli", idpool::auth::Role::Admin, "cli"),
        session: None,
        hop: None,
    };
    let end = core
        .call_tool(&ctx, tool, args, None, Default::default())
        .await;
    core.pool().shutdown().await;
    match end {
        CallEnd::Ok(o) => {
            println!("{}", serde_json::to_string_pretty(&o.body)?);
            Ok(ExitCode::SUCCESS)
        }
        CallEnd::Failed(f) | CallEnd::Invalid(f) => {
            eprintln!("idpool: {tool} failed: {f}");
            Ok(ExitCode::from(2))
        }
        CallEnd::InvalidParams(m) => {
            eprintln!("idpool: {tool} failed: {m}");
            Ok(ExitCode::from(2))
        }
        CallEnd::Denied(d) => {
            eprintln!("idpool: {d}");
            Ok(ExitCode::from(2))
        }
        CallEnd::Cancelled => Ok(ExitCode::from(2)),
    }
}
