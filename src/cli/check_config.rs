//! `idpool check-config`.

use std::path::Path;
use std::process::ExitCode;

use crate::config;

pub fn run(explicit: Option<&Path>) -> ExitCode {
    let source = config::resolve_path(explicit)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<embedded defaults>".into());
    let report = config::check(explicit);
    for p in &report.problems {
        eprintln!("{p}");
    }
    if report.problems.is_empty() {
        println!(
            "{source}: ok ({} slots, {} profiles, {} strategies)",
            report.slots, report.profiles, report.strategies
        );
        ExitCode::SUCCESS
    } else {
        eprintln!("{} problem(s) found", report.problems.len());
        ExitCode::FAILURE
    }
}
