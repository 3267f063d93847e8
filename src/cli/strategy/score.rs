//! `idpool strategy score DIR`: the library's `strategy::score` on the
//! command line. Reads the folder, judges each page, prints one line per
//! check and the score; exit 0 all right, 1 some page wrong, 2 bad input.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;

use idpool::config::Config;
use idpool::strategy::Registry;
use idpool::strategy::score::{self, Page, Tally};

use super::ScoreArgs;

/// Run the command; every error is bad input (exit 2), never a wrong page.
pub fn run(config: Option<&Path>, a: ScoreArgs) -> ExitCode {
    match score_dir(config, &a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("idpool: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn score_dir(config: Option<&Path>, a: &ScoreArgs) -> anyhow::Result<ExitCode> {
    let truth = score::load(&a.dir)?;
    let strategies = match &a.strategies_dir {
        Some(d) => d.clone(),
        None => Config::load(config)?.pool.strategies_dir,
    };
    let (registry, broken) = Registry::load_dir(&strategies);
    let strategy = match score::strategy_for(&registry, a.strategy.as_deref(), &truth) {
        Ok(s) => s,
        Err(e) => {
            let mut msg = format!("{e} (strategies: {})", strategies.display());
            for d in &broken {
                msg.push_str(&format!("\n  not loaded: {d}"));
            }
            bail!(msg);
        }
    };
    score::validate(&truth, &a.dir, strategy.as_ref())?;
    let pages: Vec<&Page> = truth
        .pages
        .iter()
        .filter(|p| a.only.as_deref().is_none_or(|o| p.file.contains(o)))
        .collect();
    if pages.is_empty() {
        bail!(
            "no page of {} has `{}` in its file name",
            a.dir.join(score::TRUTH_FILE).display(),
            a.only.as_deref().unwrap_or_default()
        );
    }
    let label_width = pages.iter().map(|p| p.label().len()).max().unwrap_or(0);
    let check_width = pages
        .iter()
        .flat_map(|p| p.checks.iter().map(|c| c.operation.len()))
        .chain([SESSION.len()])
        .max()
        .unwrap_or(0);
    let line = |page: &Page, check: &str, right: bool, summary: &str| {
        let verdict = if right { "ok" } else { "WRONG" };
        println!(
            "{:<label_width$}  {check:<check_width$}  {verdict:<5}  {summary}",
            page.label()
        );
    };
    let mut tally = Tally::default();
    for page in pages {
        let text = match score::page_path(&a.dir, &page.file)
            .ok_or_else(|| format!("{}: gone", page.file))
            .and_then(|path| score::read_page(&path).map_err(|e| e.to_string()))
        {
            Ok(t) => t,
            Err(e) => {
                line(page, "(page)", false, "unreadable");
                println!("    - {e}");
                tally.add(page.kind(), false);
                continue;
            }
        };
        let mut page_right = true;
        for check in &page.checks {
            let got = score::judge(strategy.as_ref(), page, check, &text);
            let cmp = score::compare(check, &got);
            let right = cmp.problems.is_empty();
            page_right &= right;
            line(page, &check.operation, right, &got.summary());
            for p in &cmp.problems {
                println!("    - {p}");
            }
            if a.verbose {
                for r in &cmp.right {
                    println!("      ok  {r}");
                }
            }
        }
        if let Some(want) = page.session {
            let (got, why) = score::session(strategy.as_ref(), page, &text);
            let right = got == want;
            page_right &= right;
            line(page, SESSION, right, got.as_str());
            if !right {
                println!("    - want {}, got {} ({why})", want.as_str(), got.as_str());
            } else if a.verbose {
                println!("      ok  {why}");
            }
        }
        tally.add(page.kind(), page_right);
    }
    println!("{tally}");
    Ok(if tally.all_right() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The check name of a page's signed-in state.
const SESSION: &str = "(session)";
