//! `idpool strategy record` and `idpool strategy test`: a site's answer
//! saved as a fixture beside the strategy, and every fixture judged offline
//! against the strategy as it is now, with a readable diff. `idpool
//! strategy score`: a folder of real saved pages judged against values read
//! by hand (the library's `strategy::score`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use idpool::config::Config;
use idpool::lease::cascade::{Recorded, Recorder, RunOptions};
use idpool::pool::Pool;
use idpool::strategy::expect::{Expect, FieldRule, is_blank};
use idpool::strategy::fixture::{self, Fixture};
use idpool::strategy::{Registry, Strategy};

mod score;

#[derive(Debug, Subcommand)]
pub enum StrategyCmd {
    /// Run one operation through a slot and save the answer it ended on
    /// (body, status, final URL, headers, tier) as a fixture with what it
    /// extracts as the expectation.
    Record(RecordArgs),
    /// Judge every fixture of the strategies (or of one) offline against
    /// its expectation; print a diff and exit 1 on a mismatch.
    Test(TestArgs),
    /// Judge a strategy on a folder of real saved pages against the values
    /// a person read from them (DIR/truth.json); one line per check, a
    /// score per kind of page.
    #[command(after_long_help = SCORE_EXIT)]
    Score(ScoreArgs),
}

const SCORE_EXIT: &str = "Exit status:
  0   every page right
  1   some page wrong (or unreadable)
  2   bad input: truth.json, a page file it names, the strategy, the config";

#[derive(Debug, Args)]
pub struct RecordArgs {
    #[arg(long)]
    pub strategy: String,
    #[arg(long)]
    pub operation: String,
    /// The operation's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// Only this tier (1 AJAX, 2 HTML page, 3 browser); default: the
    /// cascade, and the answer it ended on.
    #[arg(long)]
    pub tier: Option<u8>,
    #[arg(long)]
    pub slot: Option<usize>,
    /// The fixture's name (default: the operation and its first argument).
    #[arg(long)]
    pub name: Option<String>,
    /// Write rules (how many items, which fields are never empty) instead
    /// of the exact items.
    #[arg(long)]
    pub rules: bool,
    /// Make the fixture from a page saved before (from a browser, say)
    /// instead of fetching: FILE is its body; nothing is sent.
    #[arg(long, value_name = "FILE")]
    pub body: Option<PathBuf>,
    /// With --body: the answer's status.
    #[arg(long, default_value_t = 200, requires = "body")]
    pub status: u16,
    /// With --body: the page's URL (default: the tier's URL for --params).
    #[arg(long, requires = "body")]
    pub url: Option<String>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Only this strategy.
    pub strategy: Option<String>,
    /// The strategies folder (default: the config's pool.strategies_dir).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// The folder: truth.json, and the pages (in DIR/pages or DIR).
    pub dir: PathBuf,
    /// The strategy (default: the one covering the first page's host).
    #[arg(long)]
    pub strategy: Option<String>,
    /// Only the pages whose file name contains this.
    #[arg(long, value_name = "SUBSTR")]
    pub only: Option<String>,
    /// Print every field compared, not only the wrong ones.
    #[arg(long)]
    pub verbose: bool,
    /// The strategies folder, as for `strategy test` (default: the
    /// config's pool.strategies_dir).
    #[arg(long = "dir", value_name = "STRATEGIES")]
    pub strategies_dir: Option<PathBuf>,
}

pub async fn run(config: Option<&Path>, cmd: StrategyCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        StrategyCmd::Record(a) => record(config, a).await,
        StrategyCmd::Test(a) => test(config, a),
        StrategyCmd::Score(a) => Ok(score::run(config, a)),
    }
}

async fn record(config: Option<&Path>, a: RecordArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(config)?;
    let params: Map<String, Value> = serde_json::from_str(&a.params)
        .with_context(|| format!("--params is not a JSON object: {}", a.params))?;
    // Read once: the fixture is judged (and a saved page placed) with it.
    let (registry, _) = Registry::load_dir(&cfg.pool.strategies_dir);
    let (strategy, op) = operation(&registry, &cfg, &a)?;
    let last = match &a.body {
        Some(file) => from_file(strategy.as_ref(), op, &a, &params, file)?,
        None => fetch(&cfg, &a, &params).await?,
    };
    let mut f = Fixture {
        operation: a.operation.clone(),
        params,
        tier: last.tier,
        status: last.status,
        final_url: last.final_url.clone(),
        body: String::new(),
        headers: last.headers.iter().cloned().collect(),
        recorded: a.body.is_none().then(idpool::events::now_rfc3339),
        expect: Expect::default(),
    };
    let text = String::from_utf8_lossy(&last.body);
    let ct = f.headers.get("content-type").cloned();
    // Judged as `strategy test` will: as the marketplace the page is on.
    let market = fixture::marketplace_of(strategy.as_ref(), &f.final_url);
    let op = market.operations().get(&op.name).unwrap_or(op);
    let judged = fixture::judge(
        market,
        op,
        f.tier,
        f.status,
        &f.final_url,
        ct.as_deref(),
        &text,
    )
    .map_err(anyhow::Error::msg)?;
    f.expect.outcome = Some(judged.outcome.as_str().to_string());
    let count = judged.extracted.as_ref().map_or(0, |ex| ex.items.len());
    if let Ok(ex) = &judged.extracted {
        f.expect.has_more = Some(ex.has_more);
        if a.rules {
            f.expect.min_items = Some(count);
            f.expect.fields = never_blank(&ex.items);
        } else {
            f.expect.items = Some(ex.items.clone());
        }
    }
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| default_name(&a.operation, &f.params));
    let dir = fixture::dir_of(&cfg.pool.strategies_dir, &a.strategy);
    // A page already in the fixture folder is pointed at, not copied.
    let existing = a.body.as_deref().filter(|b| {
        let parent = b.parent().and_then(|p| p.canonicalize().ok());
        parent.is_some() && parent == dir.canonicalize().ok()
    });
    let existing = existing
        .and_then(|b| b.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let path = fixture::save(&dir, &name, &mut f, &last.body, existing.as_deref())
        .with_context(|| format!("cannot write the fixture into {}", dir.display()))?;
    println!(
        "recorded {}/{name}: tier {}, status {}, {}, {count} items -> {}",
        a.strategy,
        f.tier,
        f.status,
        judged.outcome.as_str(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The strategy and operation `a` names, or an error listing what there is.
fn operation<'r>(
    registry: &'r Registry,
    cfg: &Config,
    a: &RecordArgs,
) -> anyhow::Result<(
    &'r Arc<dyn Strategy>,
    &'r idpool::strategy::operation::Operation,
)> {
    let Some(strategy) = registry.get(&a.strategy) else {
        bail!(
            "no strategy `{}` in {}",
            a.strategy,
            cfg.pool.strategies_dir.display()
        );
    };
    let Some(op) = strategy.operations().get(&a.operation) else {
        let ops: Vec<&String> = strategy.operations().keys().collect();
        bail!(
            "strategy `{}` has no operation `{}` (it has {ops:?})",
            a.strategy,
            a.operation
        );
    };
    Ok((strategy, op))
}

/// Run the operation through a slot and keep the answer it ended on.
async fn fetch(
    cfg: &Config,
    a: &RecordArgs,
    params: &Map<String, Value>,
) -> anyhow::Result<Recorded> {
    let pool = Pool::open(&cfg.without_fleet())
        .context("cannot open the pool (a running daemon holds the data dir: stop it, or record with a config of its own data dir)")?;
    let registry = pool.registry();
    let (strategy, op) = operation(&registry, cfg, a)?;
    let args = op
        .bind(params.clone())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let recorder = Recorder::default();
    let opts = RunOptions {
        only_tiers: a.tier.map(|t| vec![t]),
        slot: a.slot,
        record: Some(recorder.clone()),
        ..RunOptions::default()
    };
    let ran = idpool::lease::cascade::run(
        &mut idpool::lease::Call::new(pool.leases(), None, None),
        strategy,
        op,
        &args,
        &opts,
    )
    .await;
    pool.shutdown().await;
    if let Ok(r) = &ran
        && let Some(fb) = &r.fallback
    {
        bail!(
            "`{}` ran its fallback `{}` instead (no slot may be signed in): sign a slot in, or record `{}`",
            a.operation,
            fb.operation,
            fb.operation
        );
    }
    recorder.last().ok_or_else(|| {
        anyhow::anyhow!(
            "nothing was fetched: {}",
            ran.err().map(|e| e.to_string()).unwrap_or_default()
        )
    })
}

/// A saved page as if it had been fetched by tier `--tier` (default 2).
fn from_file(
    strategy: &dyn Strategy,
    op: &idpool::strategy::operation::Operation,
    a: &RecordArgs,
    params: &Map<String, Value>,
    file: &Path,
) -> anyhow::Result<Recorded> {
    let body = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let tier = a.tier.unwrap_or(2);
    let Some(t) = op.tiers.iter().find(|t| t.number == tier) else {
        bail!("operation `{}` has no tier {tier}", a.operation);
    };
    let mut vars = op
        .bind(params.clone())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(b) = strategy.base_url() {
        vars.insert("base_url".into(), Value::String(b.to_string()));
    }
    let final_url = match &a.url {
        Some(u) => u.clone(),
        None => idpool::strategy::template::render(&t.url, &vars, true),
    };
    let json = file.extension().is_some_and(|e| e == "json");
    let ct = if json {
        "application/json"
    } else {
        "text/html; charset=utf-8"
    };
    Ok(Recorded {
        tier,
        status: a.status,
        final_url,
        headers: vec![("content-type".into(), ct.into())],
        body: body.into(),
    })
}

/// `reviews-B0TESTA1-p2`: the operation, then its arguments' values.
fn default_name(op: &str, params: &Map<String, Value>) -> String {
    let mut name = op.to_string();
    for v in params.values() {
        let v = v
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string());
        name.push('-');
        name.extend(
            v.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(40),
        );
    }
    name
}

/// `required = true` for every field no item left blank.
fn never_blank(items: &[Map<String, Value>]) -> std::collections::BTreeMap<String, FieldRule> {
    let Some(first) = items.first() else {
        return Default::default();
    };
    first
        .keys()
        .filter(|k| items.iter().all(|i| !is_blank(i.get(*k))))
        .map(|k| {
            let rule = FieldRule {
                required: true,
                ..FieldRule::default()
            };
            (k.clone(), rule)
        })
        .collect()
}

fn test(config: Option<&Path>, a: TestArgs) -> anyhow::Result<ExitCode> {
    let dir = match a.dir {
        Some(d) => d,
        None => Config::load(config)?.pool.strategies_dir,
    };
    let (registry, problems) = Registry::load_dir(&dir);
    let mut failed = 0usize;
    for p in &problems {
        println!("FAIL  {p}");
        failed += 1;
    }
    let strategies: Vec<&Arc<dyn Strategy>> = match &a.strategy {
        Some(name) => match registry.get(name) {
            Some(s) => vec![s],
            None => bail!("no strategy `{name}` in {}", dir.display()),
        },
        None => registry.iter().collect(),
    };
    let (mut passed, mut untested) = (0usize, 0usize);
    for s in strategies {
        let (fixtures, broken) = fixture::load_dir(&fixture::dir_of(&dir, s.name()));
        for d in &broken {
            println!("FAIL  {d}");
            failed += 1;
        }
        for l in &fixtures {
            let problems = fixture::test(s.as_ref(), l);
            let label = format!(
                "{}/{} ({} tier {})",
                s.name(),
                l.name,
                l.fixture.operation,
                l.fixture.tier
            );
            if problems.is_empty() {
                println!("ok    {label}");
                passed += 1;
            } else {
                println!("FAIL  {label}: {}", l.path.display());
                for p in problems {
                    println!("        {p}");
                }
                failed += 1;
            }
        }
        for op in s.operations().keys() {
            if !fixtures.iter().any(|l| &l.fixture.operation == op) {
                println!(
                    "none  {}/{op}: no fixture (`idpool strategy record --strategy {} --operation {op} …`)",
                    s.name(),
                    s.name()
                );
                untested += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed, {untested} operations without fixtures");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
