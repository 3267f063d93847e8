//! `idpool fetch URL`: one request through the pool's HTTP tier.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use idpool::config::Config;
use idpool::pool::Pool;
use idpool::request::FetchRequest;

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The URL to fetch (its host must be covered by a strategy or security.allowed_hosts).
    pub url: String,
    /// Use this slot instead of letting the router choose.
    #[arg(long)]
    pub slot: Option<usize>,
    /// Write the body here instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// `http` (the slot's impersonating HTTP session) or `browser` (its Chromium).
    #[arg(long, value_enum, default_value_t = Tier::Http)]
    pub tier: Tier,
    /// With `--tier browser`: wait until this CSS selector appears.
    #[arg(long, value_name = "SELECTOR")]
    pub wait_for: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tier {
    Http,
    Browser,
}

pub async fn run(config: Option<&Path>, args: FetchArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let url =
        url::Url::parse(&args.url).with_context(|| format!("`{}` is not a valid URL", args.url))?;
    let pool = Pool::open(&cfg.without_fleet())?;
    let fetched = match args.tier {
        Tier::Http => pool.fetch(FetchRequest::get(url), args.slot).await,
        Tier::Browser => {
            pool.end_stale_browsers().await;
            let r = pool.browse(url, args.wait_for.clone(), args.slot).await;
            pool.shutdown().await;
            r
        }
    }?;
    let r = &fetched.response;
    let identities = pool.leases().identities();
    let profile = identities.profile_of(fetched.slot)?.name.clone();
    let jar_holds = identities.jar(fetched.slot)?.count();
    eprintln!("status:   {}", r.status);
    eprintln!("outcome:  {}", fetched.outcome.as_str());
    eprintln!(
        "slot:     {} (profile {}){}",
        fetched.slot,
        profile,
        if fetched.trial {
            ", its breaker's trial"
        } else {
            ""
        }
    );
    eprintln!("strategy: {}", fetched.strategy);
    eprintln!("final:    {}", r.final_url);
    eprintln!(
        "http:     {}, {} bytes in {} ms",
        r.http_version,
        r.body.len(),
        r.elapsed.as_millis()
    );
    match fetched.via {
        idpool::lease::Via::Http => eprintln!(
            "cookies:  set {} [{}]; jar holds {}",
            r.cookies_set.len(),
            r.cookies_set.join(", "),
            jar_holds
        ),
        idpool::lease::Via::Browser => {
            let b = identities.browser(fetched.slot)?.facts();
            eprintln!("cookies:  jar holds {jar_holds}");
            eprintln!(
                "browser:  port {}, launches {}, operations {}",
                b.port, b.launches, b.total_ops
            );
        }
    }
    match &args.out {
        Some(path) => {
            std::fs::write(path, &r.body)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("body:     written to {}", path.display());
        }
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(&r.body)?;
            out.flush()?;
        }
    }
    pool.leases().identities().save_jars().await;
    Ok(if fetched.outcome.is_failure() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
