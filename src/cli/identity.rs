//! `idpool identity export|import`: a slot's whole identity as one
//! encrypted bundle, and back into a slot (of this or another daemon).
//! Through the running daemon when one answers (an admin key is needed
//! when keys are on), otherwise directly on the data dir. The passphrase
//! comes from `IDPOOL_PASSPHRASE`, `--passphrase-file`, or the first line
//! of standard input: never from the command line.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine as _;
use clap::{Args, Subcommand};
use serde_json::json;

use idpool::config::Config;

#[derive(Debug, Subcommand)]
pub enum IdentityCmd {
    /// Write slot N's identity as an encrypted bundle (mode 0600).
    Export(ExportArgs),
    /// Make slot M the identity in a bundle (its own is retired, kept).
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[arg(long)]
    pub slot: usize,
    /// The bundle file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Put the proxy's credentials in the bundle too.
    #[arg(long)]
    pub with_secrets: bool,
    /// Read the passphrase from this file's first line.
    #[arg(long)]
    pub passphrase_file: Option<PathBuf>,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle file.
    pub file: PathBuf,
    #[arg(long)]
    pub slot: usize,
    /// Read the passphrase from this file's first line.
    #[arg(long)]
    pub passphrase_file: Option<PathBuf>,
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

/// `IDPOOL_PASSPHRASE`, else the file's first line, else standard input's.
fn passphrase(file: Option<&Path>) -> anyhow::Result<String> {
    if let Ok(p) = std::env::var("IDPOOL_PASSPHRASE")
        && !p.is_empty()
    {
        return Ok(p);
    }
    let line = match file {
        Some(f) => std::fs::read_to_string(f)
            .with_context(|| format!("cannot read {}", f.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
        None => {
            eprint!("passphrase: ");
            let mut l = String::new();
            std::io::stdin().lock().read_line(&mut l)?;
            l
        }
    };
    let p = line.trim_end_matches(['\r', '\n']).to_string();
    anyhow::ensure!(
        !p.is_empty(),
        "no passphrase (IDPOOL_PASSPHRASE, --passphrase-file or standard input)"
    );
    Ok(p)
}

pub async fn run(config: Option<&Path>, cmd: IdentityCmd) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    match cmd {
        IdentityCmd::Export(a) => {
            let pass = passphrase(a.passphrase_file.as_deref())?;
            let args = json!({"slot": a.slot, "passphrase": pass, "with_secrets": a.with_secrets});
            let r = match super::session::call(
                &cfg,
                &a.daemon,
                a.slot,
                "identity-export",
                "export_identity",
                args,
            )
            .await?
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("idpool identity export: slot {}: {e}", a.slot);
                    return Ok(ExitCode::from(2));
                }
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(r["bundle"].as_str().unwrap_or_default())
                .context("the daemon's bundle is not base64")?;
            idpool::fsutil::write_atomically(&a.out, &bytes)?;
            eprintln!(
                "slot {}: identity written to {} ({} bytes, mode 0600): {} cookies, {} origins' storage, strategies {}{}",
                a.slot,
                a.out.display(),
                bytes.len(),
                r["cookies"],
                r["origins"],
                r["strategies"],
                if a.with_secrets {
                    "; the proxy's credentials are inside"
                } else {
                    ""
                }
            );
        }
        IdentityCmd::Import(a) => {
            let bytes = std::fs::read(&a.file)
                .with_context(|| format!("cannot read {}", a.file.display()))?;
            let pass = passphrase(a.passphrase_file.as_deref())?;
            let bundle = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let args = json!({"slot": a.slot, "bundle": bundle, "passphrase": pass});
            let r = match super::session::call(
                &cfg,
                &a.daemon,
                a.slot,
                "identity-import",
                "import_identity",
                args,
            )
            .await?
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!(
                        "idpool identity import: slot {}: {e} (the slot is unchanged)",
                        a.slot
                    );
                    return Ok(ExitCode::from(2));
                }
            };
            println!(
                "slot {}: now the identity of slot {} (exported {}): proxy session {}, {} cookies, calibration {}",
                a.slot,
                r["from_slot"],
                r["exported_at"],
                r["proxy_session"].as_str().unwrap_or("?"),
                r["cookies"],
                if r["calibration_applied"] == true {
                    "taken"
                } else {
                    "at the next browser launch"
                }
            );
            for (strategy, state) in r["login"].as_object().into_iter().flatten() {
                println!("  {strategy}: {}", state.as_str().unwrap_or("?"));
            }
            if let Some(n) = r["proxy_note"].as_str() {
                println!("  note: {n}");
            }
            println!(
                "  its own identity before: {}",
                r["previous_kept_in"].as_str().unwrap_or("?")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
