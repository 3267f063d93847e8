//! `scrape`: any allowed URL through the pool, as markdown, HTML, text or links,
//! read in pieces with `max_chars` / `start_index`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Description, result_schema, Annotations, Role, Spec, input_schema, invalid, parse};
use crate::error::{Error, ErrorKind, Result};
use crate::http::FetchRequest;
use crate::pool::{Fetched, Pool, Via};
use crate::strategy::{Body, Outcome};
use crate::tiers::RunOptions;

pub const SPEC: Spec = Spec {
    name: "scrape",
    role: Role::Operator,
    title: "Scrape a page",
    description: Description::Fixed(
        "Fetch any allowed URL through the identity pool (HTTP with a real browser's TLS \
         fingerprint, escalating to the slot's real Chromium on a challenge, never on a block) and \
         return it as markdown, HTML, text or a list of links. Long pages come in pieces: \
         pass `start_index` = the previous `next_start_index`.",
    ),
    input: input_schema::<Args>,
    strategy_enum: false,
    output: || {
        result_schema(
            json!({
                "url": {"type": "string"}, "status": {"type": "integer"},
                "format": {"type": "string"}, "content": {"type": "string"},
                "start_index": {"type": "integer"}, "total_chars": {"type": "integer"},
                "next_start_index": {"type": ["integer", "null"]},
                "slot": {"type": "integer"}, "tier": {"type": "integer", "description": "2: HTTP, 3: browser"},
                "via": {"type": "string"}, "trial": {"type": "boolean"}, "outcome": {"type": "string"},
            }),
            &["url", "status", "content", "total_chars", "slot", "tier"],
        )
    },
    annotations: Annotations::READS_SITES,
    progress: true,
    run: |pool, args, opts| Box::pin(run(pool, args, opts)),
};

/// Default `max_chars`.
pub const DEFAULT_MAX_CHARS: usize = 20_000;
/// Upper bound of `max_chars`.
pub const MAX_MAX_CHARS: usize = 2_000_000;

fn default_max_chars() -> usize {
    DEFAULT_MAX_CHARS
}

/// `auto`: HTTP first; the browser on a challenge (never a block), or when
/// `wait_for` is not in the static HTML.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Auto,
    Http,
    Browser,
}

/// `markdown`: readable, links kept; `links`: one `- [text](url)` line per
/// link, absolute URLs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Markdown,
    Html,
    Text,
    Links,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// http(s) URL on a host a strategy or security.allowed_hosts covers.
    url: String,
    /// How to fetch: `auto` (HTTP, then the browser when needed), `http` or `browser`.
    #[serde(default)]
    mode: Mode,
    /// What to return.
    #[serde(default)]
    format: Format,
    /// CSS selector that must appear (the browser tier waits for it).
    wait_for: Option<String>,
    /// At most this many characters of content per call.
    #[serde(default = "default_max_chars")]
    #[schemars(range(min = 1, max = MAX_MAX_CHARS))]
    max_chars: usize,
    /// Where this piece starts (the previous `next_start_index`).
    #[serde(default)]
    start_index: usize,
    /// Use only this slot (identity).
    slot: Option<usize>,
}

pub async fn run(pool: &Pool, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: Args = parse("scrape", args)?;
    let max_chars = a.max_chars;
    if max_chars == 0 || max_chars > MAX_MAX_CHARS {
        return Err(invalid(format!(
            "`max_chars` must be between 1 and {MAX_MAX_CHARS}"
        )));
    }
    let url = url::Url::parse(&a.url)
        .map_err(|e| invalid(format!("`{}` is not a valid URL ({e})", a.url)))?;
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
        "trial": fetched.trial,
        "outcome": fetched.outcome.as_str(),
        // Requests of the page the browser's egress refused.
        "refused": fetched.refused,
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
    let wait_for = a.wait_for.as_deref();
    let lease = pool.lease_for(&url, slot).await?;
    let fetched = match a.mode {
        Mode::Browser => lease
            .browse(url, wait_for, |_, _| ())
            .await
            .map(|(f, ())| f),
        Mode::Http => lease
            .http(FetchRequest::get(url), |_, _| ())
            .await
            .map(|(f, ())| f),
        Mode::Auto => {
            // Whether the page needs the browser, judged from the body's one
            // parse: a challenge, or content without what the caller waits
            // for. Never a block or a rate limit (the browser would only
            // repeat the refusal), and never on a half-open trial (one request).
            let trial = lease.is_trial();
            let needs_browser = |f: &Fetched, body: &Body<'_>| {
                !trial
                    && match f.outcome {
                        Outcome::Challenge => true,
                        Outcome::Ok | Outcome::Empty => {
                            wait_for.is_some_and(|sel| !selector_in(body, sel))
                        }
                        _ => false,
                    }
            };
            let (http, browser) = match lease
                .http(FetchRequest::get(url.clone()), needs_browser)
                .await
            {
                Ok(answer) => answer,
                Err(e) => return lease.close(Err(e)),
            };
            report(&http);
            if browser {
                // Same identity: a challenge passed there also serves its HTTP tier.
                lease
                    .browse(url, wait_for, |_, _| ())
                    .await
                    .map(|(f, ())| f)
            } else {
                Ok(http)
            }
        }
    };
    let fetched = lease.close(fetched)?;
    report(&fetched);
    Ok(fetched)
}

fn selector_in(body: &Body<'_>, selector: &str) -> bool {
    match scraper::Selector::parse(selector) {
        Ok(sel) => body.html().select(&sel).next().is_some(),
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

