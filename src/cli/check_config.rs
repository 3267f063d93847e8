//! `idpool check-config`: the config, every profile and every strategy,
//! validated together; every problem reported with its file and line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use idpool::config::{self, Config};
use idpool::diag::Diagnostic;
use idpool::identity::profile;
use idpool::strategy::Registry;

pub fn run(explicit: Option<&Path>) -> ExitCode {
    let source = config::resolve_path(explicit)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<embedded defaults>".into());
    let report = check(explicit);
    for p in &report.problems {
        eprintln!("{p}");
    }
    if report.problems.is_empty() {
        println!(
            "{source}: ok ({}, {}, {})",
            count(report.slots, "slot", "slots"),
            count(report.profiles, "profile", "profiles"),
            count(report.strategies, "strategy", "strategies")
        );
        ExitCode::SUCCESS
    } else {
        eprintln!("{} problem(s) found", report.problems.len());
        ExitCode::FAILURE
    }
}

/// `1 strategy`, `2 strategies`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Everything `idpool check-config` found: problems, and what loaded fine.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub problems: Vec<Diagnostic>,
    pub slots: usize,
    pub profiles: usize,
    pub strategies: usize,
}

/// Validate the config, every profile and every strategy; collect all problems.
pub(super) fn check(explicit: Option<&Path>) -> CheckReport {
    let mut report = CheckReport::default();
    let cfg = match Config::load(explicit) {
        Ok(c) => c,
        Err(d) => {
            report.problems.push(d);
            return report;
        }
    };
    let (profiles, problems) = profile::load_dir(&cfg.pool.profiles_dir);
    report.problems.extend(problems);
    report.profiles = profiles.len();
    let cfg_file = cfg
        .source
        .clone()
        .unwrap_or_else(|| PathBuf::from("<embedded defaults>"));
    let text = cfg
        .source
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    for plan in cfg.slot_plan() {
        if !profiles.contains_key(&plan.profile) {
            let span = text.find(&format!("\"{}\"", plan.profile)).map(|p| p..p);
            report.problems.push(Diagnostic::at(
                &cfg_file,
                &text,
                span,
                format!(
                    "slot {} uses profile `{}`, which is not in {}",
                    plan.id,
                    plan.profile,
                    cfg.pool.profiles_dir.display()
                ),
            ));
        }
    }
    report.slots = cfg.slot_plan().len();
    for cert in &cfg.security.extra_root_certs {
        match std::fs::read(cert) {
            Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => {}
            Ok(_) => report.problems.push(Diagnostic::file(
                cert,
                "extra_root_certs: no PEM certificate in this file",
            )),
            Err(e) => report.problems.push(Diagnostic::file(
                cert,
                format!("extra_root_certs: cannot read ({e})"),
            )),
        }
    }
    for file in cfg.pool.slot.iter().filter_map(|d| d.session.as_ref()) {
        let parsed = std::fs::read_to_string(file)
            .map_err(|e| format!("[[pool.slot]] session: cannot read ({e})"))
            .and_then(|t| {
                idpool::identity::session::parse(&t, idpool::request::SessionFormat::Auto)
                    .map_err(|e| e.message().to_string())
            });
        if let Err(why) = parsed {
            report.problems.push(Diagnostic::file(file, why));
        }
    }
    let (registry, problems) = Registry::load_dir(&cfg.pool.strategies_dir);
    report.problems.extend(problems);
    report.strategies = registry.len();
    report
}
