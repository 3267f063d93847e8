//! `idpool-testbed`: run the local testbed shop until Ctrl-C / SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use idpool_testbed::{Modes, RateLimit, SiteLimit, Testbed, TestbedConfig};

/// The local imitation of a protected shop that idpool's tests, demo and benchmarks use.
#[derive(Debug, Parser)]
#[command(name = "idpool-testbed", version)]
struct Args {
    /// HTTPS listen address.
    #[arg(long, default_value = "127.0.0.1:8443")]
    https: SocketAddr,
    /// A second HTTPS address that sends only its leaf certificate (as most
    /// servers do): clients must trust the CA itself.
    #[arg(long)]
    https_leaf: Option<SocketAddr>,
    /// Plain HTTP listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// Folder for the generated CA (`ca.pem`).
    #[arg(long, default_value = "./.idpool/testbed")]
    state_dir: PathBuf,
    /// Block non-browser TLS fingerprints.
    #[arg(long)]
    gate: bool,
    /// Require the JS challenge's clearance cookie.
    #[arg(long)]
    challenge: bool,
    /// Bind each clearance cookie to the client that earned it (User-Agent,
    /// header order, HTTP/2 fingerprint, JA4 part b); refuse replays that differ.
    #[arg(long)]
    consistency: bool,
    /// A markup change: the review rating's class is `review-stars` instead
    /// of `review-rating` (what a strategy's selector drift looks like).
    #[arg(long)]
    layout_change: bool,
    /// A robot check a person solves on every shop page until they pass it
    /// (the characters are shown on the page; `[handoff]` strategies wait
    /// for a person in the live view).
    #[arg(long)]
    robot_check: bool,
    /// Per-identity rate limit as MAX/WINDOW_SECS[/PENALTY_SECS[/STATUS[/RETRY_AFTER]]]
    /// (e.g. 30/10/20/429: a captcha page with status 429 for 20 s, no Retry-After).
    #[arg(long, value_name = "MAX/SECS")]
    rate_limit: Option<String>,
    /// Site-wide limit: at most N shop requests per second from anyone, the
    /// rest answered 429 (N/RETRY_AFTER adds a Retry-After).
    #[arg(long, value_name = "N")]
    site_limit: Option<String>,
}

fn number<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))
}

fn parse_rate(s: &str) -> Result<RateLimit, String> {
    let parts: Vec<&str> = s.split('/').collect();
    let [max, secs, rest @ ..] = parts.as_slice() else {
        return Err("expected MAX/WINDOW_SECS, e.g. 30/60".into());
    };
    if rest.len() > 3 {
        return Err("expected MAX/WINDOW_SECS[/PENALTY_SECS[/STATUS[/RETRY_AFTER]]]".into());
    }
    Ok(RateLimit {
        max: number(max)?,
        window_secs: number(secs)?,
        block_secs: rest.first().map(|b| number(b)).transpose()?.unwrap_or(60),
        status: rest.get(1).map(|b| number(b)).transpose()?.unwrap_or(200),
        retry_after: rest.get(2).map(|b| number(b)).transpose()?,
    })
}

fn parse_site(s: &str) -> Result<SiteLimit, String> {
    let (n, retry) = match s.split_once('/') {
        Some((n, r)) => (n, Some(number(r)?)),
        None => (s, None),
    };
    Ok(SiteLimit {
        max_per_sec: number(n)?,
        retry_after: retry,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    idpool::diag::init_tracing(false);
    let args = Args::parse();
    let rate_limit = match args.rate_limit.as_deref().map(parse_rate).transpose() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("idpool-testbed: --rate-limit: {e}");
            return ExitCode::from(2);
        }
    };
    let site_limit = match args.site_limit.as_deref().map(parse_site).transpose() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("idpool-testbed: --site-limit: {e}");
            return ExitCode::from(2);
        }
    };
    let cfg = TestbedConfig {
        https: args.https,
        https_leaf: args.https_leaf,
        http: args.http,
        state_dir: args.state_dir,
        modes: Modes {
            gate: args.gate,
            challenge: args.challenge,
            consistency: args.consistency,
            layout_change: args.layout_change,
            probe: false,
            robot_check: args.robot_check,
            engines_blocked: Vec::new(),
            rate_limit,
            site_limit,
            fault: None,
        },
    };
    let testbed = match Testbed::start(cfg).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("idpool-testbed: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Machine-readable lines first: tests and scripts parse them.
    println!("ca: {}", testbed.ca_path.display());
    println!("https: {}", testbed.https_url());
    if let Some(u) = testbed.https_leaf_url() {
        println!("https-leaf: {u}");
    }
    println!("http: {}", testbed.http_url());
    println!("ready");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("idpool-testbed: cannot watch SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    testbed.shutdown().await;
    ExitCode::SUCCESS
}
