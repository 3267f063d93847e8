//! `idpool keys add|list|revoke|grant|revoke-grant`: manage the API keys
//! file and what each key may act as.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use clap::Subcommand;

use idpool::auth::{Keys, Role};
use idpool::config::Config;
use idpool::routing::grants::Grant;

#[derive(Debug, Subcommand)]
pub enum KeysCmd {
    /// Make a key; it is printed once and only its SHA-256 is stored.
    Add {
        name: String,
        /// viewer, operator or admin.
        #[arg(long)]
        role: Role,
        /// Limit the key (repeatable; the grants add up):
        /// `slots=1,2;labels=de;signed_in=STRATEGY;strategies=S;hosts=H;tools=T,U;until=2027-01-01`.
        /// Without any, the key may use every identity its role allows.
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
    },
    /// Names, roles, creation times and numbered grants (never the keys).
    List,
    /// Remove a key; a running daemon forgets it on SIGHUP.
    Revoke { name: String },
    /// Give a key one more grant (a key with grants may use only what they
    /// cover); a running daemon applies it on SIGHUP.
    Grant {
        name: String,
        /// `slots=…;labels=…;signed_in=…;strategies=…;hosts=…;tools=…;until=…`
        grant: String,
    },
    /// Take a key's grant back, by its number in `keys list`.
    RevokeGrant { name: String, number: usize },
}

pub fn run(config: Option<&Path>, cmd: KeysCmd) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let path = cfg.server.keys_file.clone();
    let mut keys = Keys::load(&path)?;
    match cmd {
        KeysCmd::Add { name, role, grants } => {
            let grants = grants
                .iter()
                .map(|g| Grant::parse(g).map_err(|e| anyhow::anyhow!("--grant `{g}`: {e}")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let secret = keys
                .add_granted(&name, role, grants)
                .map_err(anyhow::Error::msg)?;
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
                for (i, g) in k.grant.iter().enumerate() {
                    println!("  grant {}: {g}", i + 1);
                }
            }
        }
        KeysCmd::Grant { name, grant } => {
            let g = Grant::parse(&grant).map_err(|e| anyhow::anyhow!("grant `{grant}`: {e}"))?;
            keys.grant(&name, g.clone()).map_err(anyhow::Error::msg)?;
            keys.save()?;
            eprintln!(
                "key `{name}` may now also use: {g}; send SIGHUP to a running daemon (systemctl reload idpool)"
            );
        }
        KeysCmd::RevokeGrant { name, number } => {
            let g = keys
                .revoke_grant(&name, number)
                .map_err(anyhow::Error::msg)?;
            keys.save()?;
            eprintln!(
                "took grant {number} ({g}) from `{name}`; send SIGHUP to a running daemon (systemctl reload idpool)"
            );
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
