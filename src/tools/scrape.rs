//! `scrape`: any allowed URL through the pool, as markdown (main content),
//! cleaned or raw HTML, text, links, a screenshot or a PDF, several at once;
//! ad-hoc fields by CSS selector; actions on the page first (browser); text
//! read in pieces with `max_chars` / `start_index`.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use super::{Output, Provenance};
use crate::error::{Error, ErrorKind, Result};
use crate::request::{Action, Capture, Captured};
use std::sync::Arc;

use crate::lease::cascade::{self, RunOptions};
use crate::lease::{BrowseOptions, Fetched, Leases, Via};
use crate::strategy::Extractor;
use crate::web::{Page, Pick};

pub const SPEC: Spec = Spec::new(
    "scrape",
    Role::Operator,
    "Scrape a page",
    "Fetch any public URL through the identity pool (HTTP with a real browser's TLS \
         fingerprint, escalating to the slot's real Chromium on a challenge, never on a block) and \
         return it as markdown of its main content (or the whole page), cleaned or raw HTML, \
         text, links, a PNG screenshot or a PDF (several formats at once); `selectors` pull \
         fields without a strategy; `actions` click, type, press, scroll and wait in the \
         browser first. Long pages come in pieces of `max_chars` (shared by the text formats): \
         pass `start_index` = the previous `next_start_index`; `include_tags`/`exclude_tags` keep or drop parts of the page by CSS \
         selector. Firecrawl's argument names (`formats`, `onlyMainContent`, `includeTags`, \
         `excludeTags`, `waitFor` in milliseconds) are accepted as aliases.",
    Run::Leases(|leases, args, opts| Box::pin(run(leases, args, opts))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "url": {"type": "string"}, "status": {"type": "integer"},
            "title": {"type": ["string", "null"]},
            "format": {"type": "string"}, "content": {"type": "string"},
            "formats": {"type": "object", "description": "Each text format asked for: start_index, total_chars, next_start_index and (but for the first, whose text is `content`) content."},
            "data": {"anyOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}], "description": "The `selectors` fields: an object, or with `items` a list of objects."},
            "screenshot": {"type": "object"}, "pdf": {"type": "object"},
            "start_index": {"type": "integer"}, "total_chars": {"type": "integer"},
            "next_start_index": {"type": ["integer", "null"]},
            "slot": {"type": "integer"}, "tier": {"type": "integer", "description": "2: HTTP, 3: browser"},
            "via": {"type": "string"}, "trial": {"type": "boolean"}, "outcome": {"type": "string"},
            "attempts": super::attempts_schema(),
        }),
        &["url", "status", "content", "total_chars", "slot", "tier"],
    )
})
.annotations(Annotations::READS_SITES)
.progress()
.budget(crate::tools::Budget::Own)
.route(route);

/// Upper bound of `max_chars`.
pub const MAX_MAX_CHARS: usize = super::budget::MAX_MAX_CHARS;

/// `auto`: HTTP first; the browser on a challenge (never a block), when
/// `wait_for` is not in the static HTML, or at once for actions,
/// screenshots and PDFs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Auto,
    Http,
    Browser,
}

/// What to return: text formats come in `content` (the first) and
/// `formats` (the others' text, and each one's paging), sharing the
/// answer's `max_chars`; `screenshot` (PNG) and `pdf` as MCP image and
/// embedded-resource content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// The main content (or the whole page) as markdown, URLs absolute.
    #[default]
    Markdown,
    /// Cleaned HTML: no scripts, styles or comments; URLs absolute.
    Html,
    /// The HTML exactly as received (or as the browser left it).
    RawHtml,
    /// The text, one line per text node.
    Text,
    /// Every link of the page, `- [text](url)`, absolute, each once.
    Links,
    /// A PNG of the viewport (`full_page`: of the whole page). Browser.
    Screenshot,
    /// The page printed as PDF. Browser.
    Pdf,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Markdown => "markdown",
            Format::Html => "html",
            Format::RawHtml => "raw_html",
            Format::Text => "text",
            Format::Links => "links",
            Format::Screenshot => "screenshot",
            Format::Pdf => "pdf",
        }
    }
    fn needs_browser(self) -> bool {
        matches!(self, Format::Screenshot | Format::Pdf)
    }
}

/// One format or several.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Formats {
    One(Format),
    Many(Vec<Format>),
}

impl Default for Formats {
    fn default() -> Self {
        Formats::One(Format::Markdown)
    }
}

impl Formats {
    fn list(&self) -> Vec<Format> {
        let mut out: Vec<Format> = Vec::new();
        let all = match self {
            Formats::One(f) => std::slice::from_ref(f),
            Formats::Many(v) => v.as_slice(),
        };
        for f in all {
            if !out.contains(f) {
                out.push(*f);
            }
        }
        out
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Any public http(s) URL (or, with security.public_web off, one a
    /// strategy or security.allowed_hosts covers).
    url: String,
    /// How to fetch: `auto` (HTTP, then the browser when needed), `http` or `browser`.
    #[serde(default)]
    mode: Mode,
    /// A format or a list of them: markdown, html, raw_html, text, links, screenshot, pdf.
    #[serde(default)]
    format: Formats,
    /// markdown, html and text: the page's main content only (no navigation,
    /// header, footer, ads, cookie banners); `false` for the whole page.
    #[serde(default = "yes")]
    only_main_content: bool,
    /// markdown, html and text: only what these CSS selectors match (the
    /// outermost matches, in page order), e.g. `["article", ".review"]`.
    #[serde(default)]
    include_tags: Vec<String>,
    /// markdown, html and text: never what these CSS selectors match, e.g.
    /// `[".comments", "#promo"]`.
    #[serde(default)]
    exclude_tags: Vec<String>,
    /// screenshot: the whole page rather than the viewport.
    #[serde(default)]
    full_page: bool,
    /// Fields to extract without a strategy: `{"title": "h1"}` or
    /// `{"rating": {"css": ".stars", "attr": "data-rating", "number": true}}`
    /// (also `regex`, `exists`). One object, or with `items` a list.
    selectors: Option<serde_json::Map<String, Value>>,
    /// With `selectors`: the CSS selector of each item; the fields are read inside it.
    items: Option<String>,
    /// Steps on the page before it is captured (browser): click, type,
    /// press, scroll, wait.
    #[serde(default)]
    #[schemars(length(max = crate::request::MAX_ACTIONS))]
    actions: Vec<Action>,
    /// Extra request headers (HTTP tier; the browser sends its own).
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Give up after this many seconds (the whole call).
    #[schemars(range(min = 1, max = MAX_TIMEOUT_SECS))]
    timeout: Option<u64>,
    /// CSS selector that must appear (the browser tier waits for it).
    wait_for: Option<String>,
    /// At most this many characters of page text per call, shared by the
    /// text formats asked for (default: the server's answer budget,
    /// `server.max_answer_chars`).
    #[schemars(range(min = 1, max = MAX_MAX_CHARS))]
    max_chars: Option<usize>,
    /// Where this piece starts (the previous `next_start_index`).
    #[serde(default)]
    start_index: usize,
    /// Use only this slot (identity).
    slot: Option<usize>,
}

/// Most selectors in `include_tags` or `exclude_tags`.
pub const MAX_TAGS: usize = 50;

/// What of the page the call keeps: `only_main_content`, `include_tags`,
/// `exclude_tags` (each selector checked).
fn pick(a: &Args) -> Result<Pick> {
    let list = |name: &str, sels: &[String]| -> Result<Vec<scraper::Selector>> {
        if sels.len() > MAX_TAGS {
            return Err(invalid(format!(
                "`{name}` takes at most {MAX_TAGS} selectors"
            )));
        }
        sels.iter()
            .map(|c| {
                crate::dom::selector::parse(c).map_err(|why| {
                    invalid(format!(
                        "`{name}`: `{}` {why}",
                        crate::dom::selector::shown(c)
                    ))
                })
            })
            .collect()
    };
    Ok(Pick {
        only_main: a.only_main_content,
        include: list("include_tags", &a.include_tags)?,
        exclude: list("exclude_tags", &a.exclude_tags)?,
    })
}

/// Longest `timeout`.
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// Headers a caller may not set: the connection's own, and cookies (the
/// slot's jar sends those; import a session to change them).
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "cookie",
];

/// The checked call: what to fetch and how.
struct Plan {
    url: url::Url,
    /// What of the page the text formats keep.
    pick: Pick,
    formats: Vec<Format>,
    extractor: Option<Extractor>,
    browse: BrowseOptions,
    headers: Vec<(String, String)>,
    mode: Mode,
    slot: Option<usize>,
}

fn plan(a: &Args) -> Result<Plan> {
    if a.max_chars.is_some_and(|m| m == 0 || m > MAX_MAX_CHARS) {
        return Err(invalid(format!(
            "`max_chars` must be between 1 and {MAX_MAX_CHARS}"
        )));
    }
    if a.timeout.is_some_and(|t| t == 0 || t > MAX_TIMEOUT_SECS) {
        return Err(invalid(format!(
            "`timeout` must be between 1 and {MAX_TIMEOUT_SECS} seconds"
        )));
    }
    let url = url::Url::parse(&a.url)
        .map_err(|e| invalid(format!("`{}` is not a valid URL ({e})", a.url)))?;
    if let Some(p) = a.wait_for.as_deref().and_then(crate::diag::css_problem) {
        return Err(invalid(format!("`wait_for`: {p}")));
    }
    let formats = a.format.list();
    if formats.is_empty() {
        return Err(invalid("`format` lists no format"));
    }
    if a.actions.len() > crate::request::MAX_ACTIONS {
        return Err(invalid(format!(
            "at most {} actions",
            crate::request::MAX_ACTIONS
        )));
    }
    for (i, act) in a.actions.iter().enumerate() {
        if let Some(p) = act.problem() {
            return Err(invalid(format!("actions[{i}]: {p}")));
        }
    }
    let browser_only = !a.actions.is_empty() || formats.iter().any(|f| f.needs_browser());
    if browser_only && a.mode == Mode::Http {
        return Err(invalid(
            "screenshot, pdf and actions need the browser: use mode `browser` or `auto`",
        ));
    }
    let mut headers = Vec::new();
    for (name, value) in &a.headers {
        let lower = name.to_ascii_lowercase();
        if FORBIDDEN_HEADERS.contains(&lower.as_str()) {
            return Err(invalid(format!("header `{name}` cannot be set")));
        }
        if http::HeaderName::from_bytes(name.as_bytes()).is_err()
            || http::HeaderValue::from_str(value).is_err()
        {
            return Err(invalid(format!("header `{name}` is not a valid header")));
        }
        headers.push((lower, value.clone()));
    }
    let extractor = match &a.selectors {
        Some(fields) => Some(
            Extractor::ad_hoc(a.items.as_deref(), fields)
                .map_err(|e| invalid(format!("`selectors`: {e}")))?,
        ),
        None if a.items.is_some() => return Err(invalid("`items` needs `selectors`")),
        None => None,
    };
    let browse = BrowseOptions {
        wait_for: a.wait_for.clone(),
        actions: a.actions.clone(),
        capture: Capture {
            screenshot: formats.contains(&Format::Screenshot).then_some(a.full_page),
            pdf: formats.contains(&Format::Pdf),
        },
    };
    Ok(Plan {
        url,
        pick: pick(a)?,
        formats,
        extractor,
        browse,
        headers,
        mode: a.mode,
        slot: a.slot,
    })
}

/// What a page worker read of a page.
struct Read {
    title: Option<String>,
    pieces: serde_json::Map<String, Value>,
    data: Option<Value>,
    cut: crate::dom::Cut,
}

/// The strategy covering `url` (`strategy` may name it), else its host.
fn route(leases: &Leases, args: &Value) -> Option<super::Route> {
    if let Some(name) = args["strategy"].as_str() {
        return Some(super::spec::route_to(
            leases.registry().get(name)?.as_ref(),
            "",
        ));
    }
    let url = url::Url::parse(args["url"].as_str()?).ok()?;
    Some(match leases.strategy_for(&url) {
        Some(s) => super::spec::route_to(s.as_ref(), ""),
        None => super::Route {
            key: leases.site_key(&url)?,
            login: false,
        },
    })
}

pub async fn run(leases: &Arc<Leases>, args: Value, opts: &RunOptions) -> Result<Output> {
    let args = super::aliases::apply("scrape", args, super::aliases::SCRAPE)?;
    let mut a: Args = parse("scrape", args)?;
    a.max_chars.get_or_insert(opts.answer_chars);
    let mut plan = plan(&a)?;
    let paged = match a.timeout {
        Some(t) => tokio::time::timeout(Duration::from_secs(t), fetch(leases, &plan, opts))
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Timeout,
                    format!("scraping {} took longer than `timeout` ({t} s)", plan.url),
                )
            })??,
        None => fetch(leases, &plan, opts).await?,
    };
    let fetched = &paged.fetched;
    let by = Provenance {
        slot: fetched.slot,
        // A whole page: tier 2 over HTTP, tier 3 in the browser.
        tier: match fetched.via {
            Via::Http => 2,
            Via::Browser => 3,
        },
        attempts: paged.attempts.len(),
    };
    // The cascade hands back content (or a page proven empty) only.
    let r = &fetched.response;
    // Everything that reads the page runs on a page worker: a hostile page
    // costs a worker its time, never a runtime thread.
    let raw = r.text();
    let page_url = r.final_url.clone();
    let formats = plan.formats.clone();
    let extractor = plan.extractor.take();
    let (pick, start, max, list) = (
        plan.pick.clone(),
        a.start_index,
        a.max_chars.unwrap_or(opts.answer_chars),
        a.items.is_some(),
    );
    let read = crate::dom::offload::run("reading the page", move || -> Result<Read> {
        let page = Page::parse(&raw, &page_url);
        let mut pieces = serde_json::Map::new();
        let texts: Vec<Format> = formats
            .iter()
            .filter(|f| !f.needs_browser())
            .copied()
            .collect();
        // The text formats share the answer's budget.
        let share = (max / texts.len().max(1)).max(1);
        for f in texts {
            let text = convert(&page, &raw, f, &pick)?;
            pieces.insert(f.name().into(), piece(&text, start, share));
        }
        let mut cut = page.cut();
        let data = match &extractor {
            Some(x) => {
                let (v, c) = extract(x, &raw, &page_url, list)?;
                cut.merge(c);
                Some(v)
            }
            None => None,
        };
        Ok(Read {
            title: page.title(),
            pieces,
            data,
            cut,
        })
    })
    .await??;
    let mut out = json!({
        "url": r.final_url.as_str(),
        "status": r.status,
        "title": read.title,
        "slot": by.slot,
        "tier": by.tier,
        "via": via(fetched.via),
        "trial": fetched.trial,
        "outcome": fetched.outcome.as_str(),
        // Requests of the page the browser's egress refused.
        "refused": fetched.refused,
        "attempts": paged.attempts,
    });
    let mut pieces = read.pieces;
    let first = plan.formats.iter().find(|f| !f.needs_browser());
    // The first text format's text is `content`, said once: its entry in
    // `formats` keeps the paging numbers only.
    let head = first
        .and_then(|f| pieces.get_mut(f.name()))
        .and_then(Value::as_object_mut)
        .map(|entry| {
            let head = Value::Object(entry.clone());
            entry.remove("content");
            head
        })
        .unwrap_or_else(|| piece("", 0, a.max_chars.unwrap_or(opts.answer_chars)));
    out["format"] = json!(plan.formats.first().map(|f| f.name()));
    for k in ["content", "start_index", "total_chars", "next_start_index"] {
        out[k] = head[k].clone();
    }
    out["formats"] = Value::Object(pieces);
    if let Some(data) = read.data {
        out["data"] = data;
    }
    let mut warnings = read.cut.notes();
    warnings.extend(fetched.cut.iter().cloned());
    if !warnings.is_empty() {
        out["warnings"] = json!(warnings);
    }
    media(&mut out, &fetched.captured, &r.final_url)?;
    Ok(Output::served(out, by))
}

/// `text` from `start` (in characters), at most `max` of them.
fn piece(text: &str, start: usize, max: usize) -> Value {
    let total = text.chars().count();
    let content: String = text.chars().skip(start).take(max).collect();
    let end = (start + max).min(total);
    json!({
        "content": content,
        "start_index": start,
        "total_chars": total,
        "next_start_index": if end < total { Some(end) } else { None },
    })
}

/// The `selectors` fields: one object, or with `items` a list.
fn extract(
    x: &Extractor,
    raw: &str,
    url: &url::Url,
    list: bool,
) -> Result<(Value, crate::dom::Cut)> {
    let got = x
        .extract(raw, None, url)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("`selectors`: {e}")))?;
    let cut = got.cut;
    let mut items = got.items.into_iter().map(Value::Object);
    let v = if list {
        Value::Array(items.collect())
    } else {
        items.next().unwrap_or_else(|| json!({}))
    };
    Ok((v, cut))
}

/// The screenshot and PDF: described in the result, their bytes in
/// `media` (the MCP server turns it into image and resource content).
fn media(out: &mut Value, captured: &Captured, url: &url::Url) -> Result<()> {
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut media = Vec::new();
    if let Some(png) = &captured.png {
        let (width, height) = png_size(png).ok_or_else(|| {
            Error::new(ErrorKind::Internal, "the browser's screenshot is not a PNG")
        })?;
        let viewport = captured
            .viewport
            .map(|(w, h)| json!({"width": w, "height": h}));
        out["screenshot"] = json!({"mime_type": "image/png", "bytes": png.len(),
            "width": width, "height": height, "viewport": viewport});
        media.push(json!({"type": "image", "mime_type": "image/png", "data": b64(png)}));
    }
    if let Some(pdf) = &captured.pdf {
        out["pdf"] = json!({"mime_type": "application/pdf", "bytes": pdf.len()});
        media.push(json!({"type": "resource", "mime_type": "application/pdf",
            "uri": format!("{url}#pdf"), "data": b64(pdf)}));
    }
    if !media.is_empty() {
        out["media"] = Value::Array(media);
    }
    Ok(())
}

/// Width and height from a PNG's IHDR.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.get(..8)? != b"\x89PNG\r\n\x1a\n" || png.get(12..16)? != b"IHDR" {
        return None;
    }
    let be = |r: std::ops::Range<usize>| Some(u32::from_be_bytes(png.get(r)?.try_into().ok()?));
    Some((be(16..20)?, be(20..24)?))
}

/// One page as `scrape` fetches it in `auto` mode, with nothing else asked
/// (a crawl's pages).
pub async fn fetch_page(leases: &Arc<Leases>, url: url::Url, opts: &RunOptions) -> Result<Fetched> {
    let plan = Plan {
        url,
        pick: Pick::main(true),
        formats: vec![Format::Markdown],
        extractor: None,
        browse: BrowseOptions::default(),
        headers: Vec::new(),
        mode: Mode::Auto,
        slot: None,
    };
    Ok(fetch(leases, &plan, opts).await?.fetched)
}

/// The page through the cascade, on the caller's pin if any.
async fn fetch(leases: &Arc<Leases>, plan: &Plan, opts: &RunOptions) -> Result<cascade::Paged> {
    let page = cascade::PagePlan {
        url: plan.url.clone(),
        headers: plan.headers.clone(),
        browse: plan.browse.clone(),
        mode: match plan.mode {
            Mode::Auto => cascade::PageMode::Auto,
            Mode::Http => cascade::PageMode::Http,
            Mode::Browser => cascade::PageMode::Browser,
        },
    };
    let opts = RunOptions {
        slot: plan.slot.or(opts.slot),
        ..opts.clone()
    };
    let mut call = crate::lease::Call::new(leases, None, opts.scope.clone());
    cascade::page(&mut call, &page, &opts).await
}

fn via(v: Via) -> &'static str {
    match v {
        Via::Http => "http",
        Via::Browser => "browser",
    }
}

/// A page in one text format.
pub fn convert(page: &Page, raw: &str, format: Format, pick: &Pick) -> Result<String> {
    Ok(match format {
        Format::Markdown => page.markdown(pick)?,
        Format::Html => page.cleaned_html(pick),
        Format::RawHtml => raw.to_string(),
        Format::Text => page.text(pick),
        Format::Links => {
            let lines: Vec<String> = (page.links().into_iter())
                .map(|(url, text)| format!("- [{text}]({url})"))
                .collect();
            lines.join("\n")
        }
        Format::Screenshot | Format::Pdf => String::new(),
    })
}
