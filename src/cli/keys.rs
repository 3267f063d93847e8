//! `idpool keys add|list|revoke`: manage the API keys file.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use clap::Subcommand;

use idpool::auth::{Keys, Role};
use idpool::config::Config;

#[derive(Debug, Subcommand)]
pub enum KeysCmd {
    /// Make a key; it is printed once and only its SHA-256 is stored.
    Add {
        name: String,
        /// viewer, operator or admin.
        #[arg(long)]
        role: Role,
    },
    /// Names, roles and creation times (never the keys).
    List,
    /// Remove a key; a running daemon forgets it on SIGHUP.
    Revoke { name: String },
}

pub fn run(config: Option<&Path>, cmd: KeysCmd) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let path = cfg.server.keys_file.clone();
    let mut keys = Keys::load(&path)?;
    match cmd {
        KeysCmd::Add { name, role } => {
            let secret = keys.add(&name, role).map_err(anyhow::Error::msg)?;
            keys.save()?;
            eprintln!(
                "added key `{name}` ({role}) to {}; it is shown only now:",
                path.display()
            );
            println!("{secret}");
        }
        KeysCmd::List => {
            if keys.entries().is_empty() {
                eprintln!("no keys in {}", path.display());
            }
            println!("{:<24} {:<9} created", "name", "role");
            for k in keys.entries() {
                let created = time::OffsetDateTime::from_unix_timestamp(k.created as i64)
                    .ok()
                    .and_then(|t| {
                        t.format(&time::format_description::well_known::Rfc3339)
                            .ok()
                    })
                    .unwrap_or_else(|| "-".into());
                println!("{:<24} {:<9} {created}", k.name, k.role.as_str());
            }
        }
        KeysCmd::Revoke { name } => {
            if !keys.revoke(&name) {
                bail!("no key named `{name}` in {}", path.display());
            }
            keys.save()?;
            eprintln!(
                "revoked `{name}`; send SIGHUP to a running daemon (systemctl reload idpool)"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
