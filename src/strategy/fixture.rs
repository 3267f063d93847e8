//! Strategy fixtures: a site's answer saved once (`idpool strategy record`)
//! and judged offline against the strategy as it is now (`idpool strategy
//! test`). A fixture is `<strategies>/fixtures/<strategy>/<name>.toml` (the
//! request, the answer's status, final URL, headers and tier, and the
//! expectation) beside its body, `<name>.html` or `<name>.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::expect::Expect;
use super::extract::Extracted;
use super::operation::Operation;
use super::{Body, Outcome, Strategy};
use crate::diag::Diagnostic;

/// One recorded answer and what judging it should give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    pub operation: String,
    /// The operation's arguments when it was recorded.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// 1 (AJAX), 2 (HTML page) or 3 (browser).
    pub tier: u8,
    pub status: u16,
    pub final_url: String,
    /// The body's file, beside this one.
    pub body: String,
    /// The answer's headers (never `set-cookie`).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// When it was recorded (RFC 3339); absent for hand-written ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
    #[serde(default)]
    pub expect: Expect,
}

/// A fixture as found on disk.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub name: String,
    pub path: PathBuf,
    pub fixture: Fixture,
    pub body: String,
}

/// What judging a fixture gave.
#[derive(Debug, Clone)]
pub struct Judged {
    pub outcome: Outcome,
    /// The items, when the outcome is content; or why extraction failed.
    pub extracted: Result<Extracted, String>,
    /// What the `[session]` markers say of the page, and by which marker.
    pub login: Option<(super::LoginState, String)>,
}

/// The folder of `strategy`'s fixtures under `strategies_dir`.
pub fn dir_of(strategies_dir: &Path, strategy: &str) -> PathBuf {
    strategies_dir.join("fixtures").join(strategy)
}

/// Every fixture in `dir` (sorted by name); a broken one is a diagnostic.
pub fn load_dir(dir: &Path) -> (Vec<Loaded>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (out, problems);
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        match load(&path) {
            Ok(l) => out.push(l),
            Err(d) => problems.push(d),
        }
    }
    (out, problems)
}

/// One fixture and its body.
pub fn load(path: &Path) -> Result<Loaded, Diagnostic> {
    let (fixture, _): (Fixture, String) = crate::diag::read_toml(path)?;
    fixture
        .expect
        .validate()
        .map_err(|e| Diagnostic::file(path, format!("expect.{e}")))?;
    if !(1..=3).contains(&fixture.tier) {
        return Err(Diagnostic::file(
            path,
            format!("tier {} is not 1, 2 or 3", fixture.tier),
        ));
    }
    let body_path = path.with_file_name(&fixture.body);
    let body = std::fs::read_to_string(&body_path)
        .map_err(|e| Diagnostic::file(path, format!("body {}: {e}", body_path.display())))?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Loaded {
        name,
        path: path.to_path_buf(),
        fixture,
        body,
    })
}

/// Write `fixture` as `name.toml` into `dir`, and its `body` as
/// `name.<ext>` (or, with `existing`, point at that file of `dir`, which
/// holds the body already); returns the TOML's path.
pub fn save(
    dir: &Path,
    name: &str,
    fixture: &mut Fixture,
    body: &[u8],
    existing: Option<&str>,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let ext = match fixture.headers.get("content-type").map(String::as_str) {
        Some(ct) if ct.contains("json") => "json",
        Some(ct) if ct.contains("html") || ct.contains("xml") => "html",
        Some(_) => "txt",
        None => "html",
    };
    match existing {
        Some(file) => fixture.body = file.to_string(),
        None => {
            fixture.body = format!("{name}.{ext}");
            std::fs::write(dir.join(&fixture.body), body)?;
        }
    }
    // TOML has no null: a field extracted as null is left out (and an
    // absent field counts as null when compared).
    if let Some(items) = &mut fixture.expect.items {
        for item in items.iter_mut() {
            item.retain(|_, v| !v.is_null());
        }
    }
    let toml = toml::to_string(fixture).map_err(std::io::Error::other)?;
    let path = dir.join(format!("{name}.toml"));
    let head = format!(
        "# A fixture of strategy {}: `idpool strategy test` judges {} offline\n\
         # against [expect]. Replace `items` with rules (min_items, fields.X.required,\n\
         # range, format, pattern, one_of) to keep it true as the site's content changes.\n",
        dir.file_name()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default(),
        fixture.body
    );
    std::fs::write(&path, format!("{head}{toml}"))?;
    Ok(path)
}

/// Judge `body` as tier `tier` of `op` would: classified by the strategy's
/// markers (and the tier's own `block`), then its items extracted.
pub fn judge(
    strategy: &dyn Strategy,
    op: &Operation,
    tier: u8,
    status: u16,
    final_url: &str,
    content_type: Option<&str>,
    text: &str,
) -> Result<Judged, String> {
    let Some(t) = op.tiers.iter().find(|t| t.number == tier) else {
        return Err(format!("operation `{}` has no tier {tier}", op.name));
    };
    let body = if tier == 3 {
        Body::html_page(text)
    } else {
        Body::new(text, content_type)
    };
    let mut outcome = strategy.classify(status, final_url, &body);
    let login = strategy.login_state(status, final_url, &body);
    if matches!(outcome, Outcome::Ok | Outcome::Empty)
        && t.block
            .as_ref()
            .is_some_and(|b| b.explain(status, final_url, &body).is_some())
    {
        outcome = Outcome::TierBlock;
    }
    // As the cascade does: an operation that needs a signed-in identity
    // got a signed-out page; its content decides, and only a page without
    // items (or the page's own empty marker) is the sign-in wall.
    let signed_out = op.requires_login && matches!(&login, Some((super::LoginState::LoggedOut, _)));
    if !matches!(outcome, Outcome::Ok | Outcome::Empty) {
        return Ok(Judged {
            outcome,
            extracted: Err(format!("not content: {}", outcome.as_str())),
            login,
        });
    }
    let page_url =
        url::Url::parse(final_url).map_err(|e| format!("final_url `{final_url}`: {e}"))?;
    let extracted = strategy.extract(op, t, &body, &page_url);
    let outcome = match &extracted {
        Ok(ex) if ex.items.is_empty() => Outcome::Empty,
        Ok(_) => Outcome::Ok,
        Err(_) if signed_out => Outcome::LoginRequired,
        Err(_) => Outcome::Failed,
    };
    Ok(Judged {
        outcome,
        extracted,
        login,
    })
}

/// The strategy of `strategy`'s family whose marketplace `url` is on
/// (the strategy itself when it has none, or the URL is on none).
pub fn marketplace_of<'a>(strategy: &'a dyn Strategy, url: &str) -> &'a dyn Strategy {
    let host = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string));
    let Some(host) = host else { return strategy };
    if strategy.covers(&host) {
        return strategy;
    }
    strategy
        .variants()
        .iter()
        .find(|v| v.covers(&host))
        .map_or(strategy, |v| v.as_ref())
}

/// Judge a loaded fixture under `strategy` and check it against its
/// expectation: the problems, one line each (empty: it passes).
pub fn test(strategy: &dyn Strategy, l: &Loaded) -> Vec<String> {
    let f = &l.fixture;
    // Judged as the marketplace its URL is on would be (its locale, its
    // sign-in markers).
    let strategy = marketplace_of(strategy, &f.final_url);
    let Some(op) = strategy.operations().get(&f.operation) else {
        return vec![format!(
            "no operation `{}` in strategy {}",
            f.operation,
            strategy.name()
        )];
    };
    let ct = f.headers.get("content-type").map(String::as_str);
    match judge(strategy, op, f.tier, f.status, &f.final_url, ct, &l.body) {
        Err(e) => vec![e],
        Ok(j) => {
            let mut problems = Vec::new();
            if let Some(want) = &f.expect.marketplace {
                let got = strategy.marketplace().unwrap_or("(none)");
                if want != got {
                    problems.push(format!("marketplace: expected {want}, got {got}"));
                }
            }
            if let Some(want) = &f.expect.login {
                let (got, why) = match &j.login {
                    Some((state, why)) => (state.as_str(), format!(" ({why})")),
                    None => ("unknown", " (no [session] marker matched)".to_string()),
                };
                if want != got {
                    problems.push(format!("login: expected {want}, got {got}{why}"));
                }
            }
            // A page that should fail (a layout the strategy does not read)
            // says so in its expectation.
            if let Err(e) = &j.extracted
                && j.outcome == Outcome::Failed
                && f.expect.outcome.as_deref() != Some("failed")
            {
                problems.push(format!("extraction failed: {e}"));
            }
            problems.extend(
                f.expect
                    .check(j.outcome.as_str(), j.extracted.as_ref().ok()),
            );
            problems
        }
    }
}
