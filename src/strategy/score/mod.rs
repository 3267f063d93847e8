//! Judging a strategy on real pages (`idpool strategy score DIR`): a folder
//! of pages someone saved from the site, and `truth.json`, the values a
//! person read from each page by hand. Every page is judged offline as
//! `strategy record --body` and `strategy test` judge it
//! ([`fixture::judge`], tier 2, as the marketplace its URL is on), and what
//! the strategy extracts is compared with the truth, leniently where a
//! person's reading and an extraction may differ in form only (`"24,99"` and
//! `24.99`).
//!
//! The format (every key, and how values compare) is documented in
//! `strategies/README.md`, "Judging a strategy on real pages".
//!
//! The parts, each importing only those listed before it: `error` (why a
//! folder or a page cannot be judged), `want` (what one field should be,
//! and whether a value is it), `truth` (the truth file's format), `compare`
//! (a check against what was judged); this file is the flow: load the
//! truth, find the strategy, validate, read and judge each page, tally.

use std::fmt;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::fixture;
use super::{Body, LoginState, Registry, Strategy};

mod compare;
mod error;
mod truth;
mod want;

pub use compare::compare;
pub use error::{PageError, ScoreError};
pub use truth::Page;

use compare::Judged;
use truth::{Check, Truth, parse};

/// The truth file's name inside a score folder.
pub const TRUTH_FILE: &str = "truth.json";

/// The largest page read (after gunzip): a bigger one is that page's
/// error. The truth file is held to it too.
pub const MAX_PAGE_BYTES: u64 = 16 << 20;

/// The tier a saved page is judged as (an HTML page).
pub const TIER: u8 = 2;

/// Read `DIR/truth.json`.
pub fn load(dir: &Path) -> Result<Truth, ScoreError> {
    let file = dir.join(TRUTH_FILE);
    let read_err = |error| ScoreError::Read {
        file: file.clone(),
        error,
    };
    let mut text = String::new();
    std::fs::File::open(&file)
        .and_then(|f| f.take(MAX_PAGE_BYTES + 1).read_to_string(&mut text))
        .map_err(read_err)?;
    if text.len() as u64 > MAX_PAGE_BYTES {
        return Err(ScoreError::Invalid {
            file,
            at: ".".into(),
            message: format!("larger than {MAX_PAGE_BYTES} bytes"),
        });
    }
    parse(&file, &text)
}

/// The strategy the pages are judged with: `name`, else the one covering
/// the first page's host; its family (each page is then judged as the
/// marketplace its URL is on).
pub fn strategy_for<'r>(
    registry: &'r Registry,
    name: Option<&str>,
    truth: &Truth,
) -> Result<&'r Arc<dyn Strategy>, ScoreError> {
    let found = match name {
        Some(n) => registry
            .get(n)
            .ok_or_else(|| ScoreError::NoStrategy(format!("no strategy `{n}`")))?,
        None => {
            let Some(first) = truth.pages.first() else {
                return Err(ScoreError::NoStrategy(
                    "no pages, so no host to find a strategy by: name one with --strategy".into(),
                ));
            };
            let host = url::Url::parse(&first.url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default();
            registry.for_host(&host).ok_or_else(|| {
                ScoreError::NoStrategy(format!(
                    "no strategy covers `{host}`, the host of the first page ({}): name one with --strategy",
                    first.url
                ))
            })?
        }
    };
    Ok(registry.get(found.family()).unwrap_or(found))
}

/// Where a page's file is: `DIR/pages/FILE`, else `DIR/FILE`.
pub fn page_path(dir: &Path, file: &str) -> Option<PathBuf> {
    [dir.join("pages").join(file), dir.join(file)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Check what only the strategy and the folder can tell: every page's
/// file is there and its URL parses, every check's operation exists (on
/// the marketplace the page is on) and its params bind.
pub fn validate(truth: &Truth, dir: &Path, strategy: &dyn Strategy) -> Result<(), ScoreError> {
    let file = dir.join(TRUTH_FILE);
    let invalid = |at: String, message: String| ScoreError::Invalid {
        file: file.clone(),
        at,
        message,
    };
    for (i, p) in truth.pages.iter().enumerate() {
        let inside = Path::new(&p.file)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !inside || p.file.is_empty() {
            return Err(invalid(
                format!("pages[{i}].file"),
                format!("`{}` is not a file name inside {}", p.file, dir.display()),
            ));
        }
        if page_path(dir, &p.file).is_none() {
            return Err(invalid(
                format!("pages[{i}].file"),
                format!(
                    "no `{}` in {} or {}",
                    p.file,
                    dir.join("pages").display(),
                    dir.display()
                ),
            ));
        }
        if let Err(e) = url::Url::parse(&p.url) {
            return Err(invalid(
                format!("pages[{i}].url"),
                format!("`{}` is not a URL: {e}", p.url),
            ));
        }
        if p.checks.is_empty() && p.session.is_none() {
            return Err(invalid(
                format!("pages[{i}]"),
                "nothing to judge: no `checks` and no `session`".into(),
            ));
        }
        let market = fixture::marketplace_of(strategy, &p.url);
        for (j, c) in p.checks.iter().enumerate() {
            let at = format!("pages[{i}].checks[{j}]");
            let Some(op) = market.operations().get(&c.operation) else {
                let ops: Vec<&str> = market.operations().keys().map(String::as_str).collect();
                return Err(invalid(
                    at,
                    format!(
                        "unknown operation `{}` of strategy {} (it has: {})",
                        c.operation,
                        market.name(),
                        ops.join(", ")
                    ),
                ));
            };
            op.bind(c.params.clone())
                .map_err(|e| invalid(format!("{at}.params"), e.to_string()))?;
        }
    }
    Ok(())
}

/// A page's text: gunzipped when `.gz`, at most [`MAX_PAGE_BYTES`].
pub fn read_page(path: &Path) -> Result<String, PageError> {
    let read_err = |error| PageError::Read {
        file: path.to_path_buf(),
        error,
    };
    let f = std::fs::File::open(path).map_err(read_err)?;
    let gz = path.extension().is_some_and(|e| e == "gz");
    let reader: Box<dyn Read> = if gz {
        Box::new(flate2::read::GzDecoder::new(f))
    } else {
        Box::new(f)
    };
    let mut bytes = Vec::new();
    reader
        .take(MAX_PAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_PAGE_BYTES {
        return Err(PageError::TooLarge {
            file: path.to_path_buf(),
            limit: MAX_PAGE_BYTES,
        });
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Judge `page` (its `text`) for `check` as `strategy record --body` does:
/// tier 2, the page's URL and status, as the marketplace the URL is on.
pub fn judge(strategy: &dyn Strategy, page: &Page, check: &Check, text: &str) -> Judged {
    let market = fixture::marketplace_of(strategy, &page.url);
    let Some(op) = market.operations().get(&check.operation) else {
        return Judged {
            outcome: None,
            items: Vec::new(),
            has_more: None,
            error: Some(format!(
                "no operation `{}` in strategy {}",
                check.operation,
                market.name()
            )),
        };
    };
    let ct = page.content_type();
    match fixture::judge(market, op, TIER, page.status, &page.url, Some(ct), text) {
        Err(e) => Judged {
            outcome: None,
            items: Vec::new(),
            has_more: None,
            error: Some(e),
        },
        Ok(j) => {
            let (items, has_more, error) = match j.extracted {
                Ok(ex) => (ex.items, Some(ex.has_more), None),
                Err(e) => (Vec::new(), None, Some(e)),
            };
            Judged {
                outcome: Some(j.outcome.as_str().to_string()),
                items,
                has_more,
                error,
            }
        }
    }
}

/// The signed-in state `page` shows under the `[session]` markers of the
/// marketplace it is on, and which marker said so.
pub fn session(strategy: &dyn Strategy, page: &Page, text: &str) -> (LoginState, String) {
    let market = fixture::marketplace_of(strategy, &page.url);
    let body = Body::new(text, Some(page.content_type()));
    market
        .login_state(page.status, &page.url, &body)
        .unwrap_or((LoginState::Unknown, "no [session] marker matches".into()))
}

/// Right pages per kind, in the order kinds first appear.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    kinds: Vec<(String, usize, usize)>,
}

impl Tally {
    /// Count one page of `kind`.
    pub fn add(&mut self, kind: &str, right: bool) {
        let i = match self.kinds.iter().position(|(k, _, _)| k == kind) {
            Some(i) => i,
            None => {
                self.kinds.push((kind.to_string(), 0, 0));
                self.kinds.len() - 1
            }
        };
        if let Some(k) = self.kinds.get_mut(i) {
            k.1 += usize::from(right);
            k.2 += 1;
        }
    }

    /// Right pages and all pages.
    pub fn totals(&self) -> (usize, usize) {
        self.kinds
            .iter()
            .fold((0, 0), |(r, n), (_, kr, kn)| (r + kr, n + kn))
    }

    pub fn all_right(&self) -> bool {
        let (r, n) = self.totals();
        r == n
    }
}

impl fmt::Display for Tally {
    /// `score: 7/9 pages right; reviews 3/4, product 2/3, wall 2/2`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (right, all) = self.totals();
        write!(f, "score: {right}/{all} pages right")?;
        for (n, (kind, r, k)) in self.kinds.iter().enumerate() {
            let sep = if n == 0 { "; " } else { ", " };
            write!(f, "{sep}{kind} {r}/{k}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_counts_per_kind() {
        let mut t = Tally::default();
        t.add("reviews", true);
        t.add("product", false);
        t.add("reviews", true);
        assert_eq!(
            t.to_string(),
            "score: 2/3 pages right; reviews 2/2, product 0/1"
        );
        assert!(!t.all_right());
    }

    #[test]
    fn a_page_too_large_is_an_error_of_that_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("big.html.gz");
        let f = std::fs::File::create(&p).expect("create");
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..17 {
            std::io::Write::write_all(&mut gz, &chunk).expect("write");
        }
        gz.finish().expect("finish");
        assert!(matches!(read_page(&p), Err(PageError::TooLarge { .. })));
        let small = dir.path().join("small.html.gz");
        let f = std::fs::File::create(&small).expect("create");
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, b"<p>hi</p>").expect("write");
        gz.finish().expect("finish");
        assert_eq!(read_page(&small).expect("reads"), "<p>hi</p>");
        let broken = dir.path().join("broken.html.gz");
        std::fs::write(&broken, b"not gzip").expect("write");
        assert!(matches!(read_page(&broken), Err(PageError::Read { .. })));
    }
}
