//! The `idpool` command line, on the binary's side of the crate: raw
//! arguments live here; each subcommand resolves them into library calls
//! and prints. `anyhow` is used here and nowhere in the library.

mod calibrate;
mod call;
mod check_config;
mod completions;
mod daemon;
mod doctor;
mod fetch;
mod fleet;
mod identity;
mod keys;
mod login;
mod mcp;
mod refresh_cookies;
mod retire;
mod serve;
mod session;
mod slots;
mod strategy;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// idpool: a pool of browser identities for web data collection.
#[derive(Debug, Parser)]
#[command(name = "idpool", version = VERSION, about, after_long_help = EXIT_STATUS)]
pub struct Cli {
    /// Config file (else $IDPOOL_CONFIG, ./idpool.toml, /etc/idpool/idpool.toml, embedded defaults).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log format on stderr: readable text, or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Same as `--log-format json`.
    #[arg(long, global = true, hide = true)]
    pub log_json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate the config, every profile and every strategy; print `file:line: problem`.
    CheckConfig,
    /// One fetch through a slot's HTTP tier or browser, for debugging.
    Fetch(fetch::FetchArgs),
    /// Run the daemon: MCP over Streamable HTTP (/mcp) and legacy SSE (/sse).
    Serve,
    /// MCP over stdio: a bridge to the running daemon, or `--embedded`.
    Mcp(mcp::McpArgs),
    /// Call one tool on the running daemon and print its structured result.
    Call(call::CallArgs),
    /// The slots' health from the running daemon; `--watch` follows its events.
    Slots(slots::SlotsArgs),
    /// The fleet (`[cluster]`) from a running daemon: every daemon, every
    /// identity and who holds it, and the identities without a host.
    Fleet(fleet::FleetArgs),
    /// Manage API keys (the keys file of server.keys_file).
    #[command(subcommand)]
    Keys(keys::KeysCmd),
    /// Warm slots up in their browser for a strategy and persist the cookies.
    RefreshCookies(refresh_cookies::RefreshArgs),
    /// Calibrate slots' HTTP tier against their own Chromium now; print both
    /// fingerprints side by side and the residual.
    Calibrate(calibrate::CalibrateArgs),
    /// Give a slot a fresh identity: new jar, Chromium profile and proxy session.
    Retire(retire::RetireArgs),
    /// Sign a slot in on a strategy's site by hand (the daemon's live view, or --headful).
    Login(login::LoginArgs),
    /// A slot's session in and out: cookies.txt, Cookie-Editor JSON, Playwright storageState.
    #[command(subcommand)]
    Session(session::SessionCmd),
    /// A slot's whole identity as one encrypted bundle, and back into a slot.
    #[command(subcommand)]
    Identity(identity::IdentityCmd),
    /// Check what breaks installs (Chromium, CDP ports, data dir, audit log, keys file,
    /// extra roots, strategies and profiles, proxies, calibration, the
    /// daemon): one line per check with its fix; exit 1 when one fails.
    Doctor(doctor::DoctorArgs),
    /// Strategy fixtures: record a site's answer, test every strategy offline.
    #[command(subcommand)]
    Strategy(strategy::StrategyCmd),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff), or write every page into --dir.
    Manpage(completions::ManpageArgs),
}

/// `idpool --version`: the version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("IDPOOL_COMMIT"), ")");

/// Exit codes (also in the man page and the README).
pub const EXIT_STATUS: &str = "Exit status:
  0   success
  1   an error: bad config, no daemon where one is needed, a failed check (doctor)
  2   the tool ran and failed or was refused (call), or the fetch got no content (fetch)
  64  usage error: unknown command or option, missing or malformed argument";

/// Usage errors exit with this (EX_USAGE), apart from tool failures (2).
pub const EXIT_USAGE: u8 = 64;

impl Command {
    /// Commands that may open the pool and launch Chromium (the others only
    /// read files or talk to the running daemon).
    pub fn may_run_browsers(&self) -> bool {
        !matches!(
            self,
            Command::CheckConfig
                | Command::Keys(_)
                | Command::Call(_)
                | Command::Fleet(_)
                | Command::Doctor(_)
                | Command::Completions(_)
                | Command::Manpage(_)
                | Command::Strategy(strategy::StrategyCmd::Test(_))
                | Command::Strategy(strategy::StrategyCmd::Score(_))
        )
    }
}

/// Run a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::CheckConfig => Ok(check_config::run(cli.config.as_deref())),
        Command::Fetch(args) => fetch::run(cli.config.as_deref(), args).await,
        Command::Serve => serve::run(cli.config.as_deref()).await,
        Command::Mcp(args) => mcp::run(cli.config.as_deref(), args).await,
        Command::Call(args) => call::run(cli.config.as_deref(), args).await,
        Command::Keys(cmd) => keys::run(cli.config.as_deref(), cmd),
        Command::Slots(args) => slots::run(cli.config.as_deref(), args).await,
        Command::Fleet(args) => slots::run(cli.config.as_deref(), args.into()).await,
        Command::RefreshCookies(args) => refresh_cookies::run(cli.config.as_deref(), args).await,
        Command::Calibrate(args) => calibrate::run(cli.config.as_deref(), args).await,
        Command::Retire(args) => retire::run(cli.config.as_deref(), args).await,
        Command::Login(args) => login::run(cli.config.as_deref(), args).await,
        Command::Session(cmd) => session::run(cli.config.as_deref(), cmd).await,
        Command::Identity(cmd) => identity::run(cli.config.as_deref(), cmd).await,
        Command::Doctor(args) => doctor::run(cli.config.as_deref(), args).await,
        Command::Completions(args) => completions::completions(args),
        Command::Strategy(cmd) => strategy::run(cli.config.as_deref(), cmd).await,
        Command::Manpage(args) => completions::manpage(args),
    }
}
