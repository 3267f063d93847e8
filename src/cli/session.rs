//! `idpool session import|export --slot N`: a slot's session in and out
//! (cookies.txt, Cookie-Editor JSON, Playwright storageState). Through the
//! running daemon when one answers (an admin key is needed when keys are
//! on), otherwise directly on the data dir.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use idpool::config::Config;
use idpool::pool::Pool;

#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Merge a session file into a slot's jar and browser.
    Import(ImportArgs),
    /// Write a slot's session (to stdout, or `--output FILE` with mode 0600).
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[arg(long)]
    pub slot: usize,
    /// The session file.
    pub file: PathBuf,
    /// auto, netscape, json or storage-state.
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[arg(long)]
    pub slot: usize,
    /// storage-state, netscape or json.
    #[arg(long, default_value = "storage-state")]
    pub format: String,
    /// Only this domain and its subdomains.
    #[arg(long)]
    pub domain: Option<String>,
    /// Write here (mode 0600) instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

/// The format's canonical name.
fn check_format(name: &str) -> anyhow::Result<&'static str> {
    match idpool::request::SessionFormat::from_name(name) {
        Some(f) => Ok(f.as_str()),
        None => anyhow::bail!("--format `{name}`: expected auto, netscape, json or storage-state"),
    }
}

pub async fn run(config: Option<&Path>, cmd: SessionCmd) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    match cmd {
        SessionCmd::Import(a) => {
            let format = check_format(&a.format)?;
            let text = std::fs::read_to_string(&a.file)
                .with_context(|| format!("cannot read {}", a.file.display()))?;
            let args = json!({"slot": a.slot, "session": text, "format": format});
            let r = match call(
                &cfg,
                &a.daemon,
                a.slot,
                "session-import",
                "import_session",
                args,
            )
            .await?
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("idpool session import: slot {}: {e}", a.slot);
                    return Ok(ExitCode::from(2));
                }
            };
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print_import(&r);
            }
        }
        SessionCmd::Export(a) => {
            let format = check_format(&a.format)?;
            let args = json!({"slot": a.slot, "format": format, "domain": a.domain});
            let r = match call(
                &cfg,
                &a.daemon,
                a.slot,
                "session-export",
                "export_session",
                args,
            )
            .await?
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("idpool session export: slot {}: {e}", a.slot);
                    return Ok(ExitCode::from(2));
                }
            };
            let text = r["session"].as_str().unwrap_or_default();
            match &a.output {
                Some(path) => {
                    idpool::fsutil::write_atomically(path, text.as_bytes())?;
                    eprintln!(
                        "slot {}: session written to {} (mode 0600)",
                        a.slot,
                        path.display()
                    );
                }
                None => print!("{text}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_import(r: &Value) {
    println!(
        "slot {}: {} cookies imported ({}){}",
        r["slot"],
        r["cookies"],
        r["format"].as_str().unwrap_or("?"),
        if r["browser"] == true {
            ", also into the running browser"
        } else {
            ""
        }
    );
    for (domain, n) in r["domains"].as_object().into_iter().flatten() {
        println!("  {domain}: {n}");
    }
    if r["rejected"].as_u64().unwrap_or(0) > 0 {
        println!("  {} cookies refused by the jar:", r["rejected"]);
    }
    for c in r["refused"].as_array().into_iter().flatten() {
        println!(
            "    cookie `{}` for `{}`: {}",
            c["name"].as_str().unwrap_or("?"),
            c["domain"].as_str().unwrap_or("?"),
            c["reason"].as_str().unwrap_or("?")
        );
    }
    for (origin, n) in r["local_storage"].as_object().into_iter().flatten() {
        println!("  localStorage {origin}: {n} items");
    }
    for (strategy, state) in r["login"].as_object().into_iter().flatten() {
        println!("  {strategy}: {}", state.as_str().unwrap_or("?"));
    }
}

/// Through the daemon's admin route, else the tool in-process.
pub(super) async fn call(
    cfg: &Config,
    daemon: &super::daemon::DaemonArgs,
    slot: usize,
    action: &str,
    tool: &str,
    args: Value,
) -> anyhow::Result<Result<Value, String>> {
    Ok(match daemon.reach(cfg, "the command").await? {
        Some(base) => {
            let d = super::slots::SlotActions::new(base, daemon.key.clone())?;
            let (code, body) = d.post(slot, action, &args).await?;
            if code == 200 {
                Ok(body)
            } else {
                let hint = if matches!(code, 401 | 403) {
                    " (this needs the admin role: an admin key via --key or IDPOOL_KEY)"
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
            let spec = idpool::tools::find(tool).context("tool")?;
            let r = spec.call(&pool, args, &Default::default()).await;
            pool.shutdown().await;
            r.map(|o| o.body).map_err(|e| e.to_string())
        }
    })
}
