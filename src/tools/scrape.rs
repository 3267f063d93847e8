//! `scrape`: any allowed URL through the pool, as markdown, HTML, text or links,
//! read in pieces with `max_chars` / `start_index`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::http::FetchRequest;
use crate::pool::{Fetched, Pool, Via};
use crate::strategy::Outcome;
use crate::tiers::RunOptions;

/// Default `max_chars`.
pub const DEFAULT_MAX_CHARS: usize = 20_000;
/// Upper bound of `max_chars`.
pub const MAX_MAX_CHARS: usize = 2_000_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// HTTP first; the browser on a block or challenge, or when `wait_for` is not
    /// in the static HTML.
    #[default]
    Auto,
    Http,
    Browser,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Readable markdown, links kept.
    #[default]
    Markdown,
    Html,
    Text,
    /// One `- [text](url)` line per link, absolute URLs.
    Links,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    format: Format,
    #[serde(default)]
    wait_for: Option<String>,
    #[serde(default)]
    max_chars: Option<usize>,
    #[serde(default)]
    start_index: usize,
    #[serde(default)]
    slot: Option<usize>,
}

pub async fn run(pool: &Pool, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: Args =
        serde_json::from_value(args).map_err(|e| bad(&format!("invalid scrape arguments: {e}")))?;
    let max_chars = a.max_chars.unwrap_or(DEFAULT_MAX_CHARS);
    if max_chars == 0 || max_chars > MAX_MAX_CHARS {
        return Err(bad(&format!(
            "`max_chars` must be between 1 and {MAX_MAX_CHARS}"
        )));
    }
    let url = url::Url::parse(&a.url)
        .map_err(|e| bad(&format!("`{}` is not a valid URL ({e})", a.url)))?;
    pool.guard().check_static(&url)?;
    let fetched = fetch(pool, url, &a, opts).await?;
    let r = &fetched.response;
    if fetched.outcome.is_failure() {
        return Err(Error::new(
            ErrorKind::Refused,
            format!(
                "{} answered {} (HTTP {}) on slot {} via {}",
                r.final_url,
                fetched.outcome.as_str(),
                r.status,
                fetched.slot,
                via(fetched.via)
            ),
        )
        .retryable(false));
    }
    let html = r.text();
    let content = convert(&html, a.format, &r.final_url)?;
    let total = content.chars().count();
    let piece: String = content
        .chars()
        .skip(a.start_index)
        .take(max_chars)
        .collect();
    let end = (a.start_index + max_chars).min(total);
    Ok(json!({
        "url": r.final_url.as_str(),
        "status": r.status,
        "format": format!("{:?}", a.format).to_lowercase(),
        "content": piece,
        "start_index": a.start_index,
        "total_chars": total,
        "next_start_index": if end < total { Some(end) } else { None },
        "slot": fetched.slot,
        // A whole page: tier 2 over HTTP, tier 3 in the browser.
        "tier": match fetched.via { Via::Http => 2, Via::Browser => 3 },
        "via": via(fetched.via),
        "degraded": fetched.degraded,
        "outcome": fetched.outcome.as_str(),
    }))
}

async fn fetch(pool: &Pool, url: url::Url, a: &Args, opts: &RunOptions) -> Result<Fetched> {
    let slot = a.slot.or(opts.slot);
    let report = |f: &Fetched| {
        opts.report(|| {
            format!(
                "slot {} via {}: {} (HTTP {})",
                f.slot,
                via(f.via),
                f.outcome.as_str(),
                f.response.status
            )
        })
    };
    let fetched = match a.mode {
        Mode::Browser => pool.fetch_browser(url, a.wait_for.clone(), slot).await,
        Mode::Http => pool.fetch(FetchRequest::get(url), slot).await,
        Mode::Auto => {
            let http = pool.fetch(FetchRequest::get(url.clone()), slot).await?;
            report(&http);
            let needs_browser = matches!(http.outcome, Outcome::HardBlock | Outcome::Challenge)
                || a.wait_for
                    .as_deref()
                    .is_some_and(|sel| !selector_in(&http.response.text(), sel));
            if needs_browser {
                // Same identity: a challenge passed there also serves its HTTP tier.
                pool.fetch_browser(url, a.wait_for.clone(), Some(http.slot))
                    .await
            } else {
                Ok(http)
            }
        }
    }?;
    report(&fetched);
    Ok(fetched)
}

fn selector_in(html: &str, selector: &str) -> bool {
    match scraper::Selector::parse(selector) {
        Ok(sel) => scraper::Html::parse_document(html)
            .select(&sel)
            .next()
            .is_some(),
        Err(_) => false,
    }
}

fn via(v: Via) -> &'static str {
    match v {
        Via::Http => "http",
        Via::Browser => "browser",
    }
}

/// Turn a page into the requested format.
pub fn convert(html: &str, format: Format, base: &url::Url) -> Result<String> {
    match format {
        Format::Html => Ok(html.to_string()),
        Format::Markdown => {
            let converter = htmd::HtmlToMarkdown::builder()
                .skip_tags(vec!["script", "style", "noscript", "svg", "head", "iframe"])
                .build();
            converter.convert(html).map_err(|e| {
                Error::new(ErrorKind::Internal, "cannot convert the page to markdown")
                    .with_source(e)
            })
        }
        Format::Text => {
            let doc = scraper::Html::parse_document(html);
            let skip = scraper::Selector::parse("script, style, noscript, head")
                .map_err(|_| Error::new(ErrorKind::Internal, "selector"))?;
            let hidden: std::collections::HashSet<_> = doc
                .select(&skip)
                .flat_map(|e| e.descendants().map(|d| d.id()))
                .collect();
            let text: Vec<&str> = doc
                .root_element()
                .descendants()
                .filter(|n| !hidden.contains(&n.id()))
                .filter_map(|n| n.value().as_text().map(|t| t.trim()))
                .filter(|t| !t.is_empty())
                .collect();
            Ok(text.join("\n"))
        }
        Format::Links => {
            let doc = scraper::Html::parse_document(html);
            let a = scraper::Selector::parse("a[href]")
                .map_err(|_| Error::new(ErrorKind::Internal, "selector"))?;
            let lines: Vec<String> = doc
                .select(&a)
                .filter_map(|e| {
                    let href = base.join(e.value().attr("href")?).ok()?;
                    let text = e
                        .text()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    Some(format!("- [{text}]({href})"))
                })
                .collect();
            Ok(lines.join("\n"))
        }
    }
}

fn bad(msg: &str) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg.to_string()).retryable(false)
}
