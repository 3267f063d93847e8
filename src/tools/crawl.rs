//! `crawl`: a bounded breadth-first crawl of one host from a URL, each page
//! fetched as `scrape` fetches it (through the pool, politely, obeying
//! robots.txt), returned with its status, title and one text format. Every
//! crawl is a job (`pool::jobs`): `async: true` returns its id at once,
//! otherwise the call waits for it; `crawl_status` pages through the
//! results and cancels.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use globset::{GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::scrape::{self, Format};
use super::spec::JobDesk;
use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use crate::error::{ErrorKind, Result};
use crate::lease::cascade::RunOptions;
use crate::services::jobs::{Job, Status};
use crate::web::Page;

pub const SPEC: Spec = Spec::new(
    "crawl",
    Role::Operator,
    "Crawl a site",
    "Crawl one host breadth-first from a URL: up to `max_pages` pages, `max_depth` links \
         deep, `include`/`exclude` path globs, each URL once, politely and obeying robots.txt. \
         Returns each page's URL, status, title and content in `format`. `async: true` returns \
         a job id at once; `crawl_status` pages through the results (`start_index`) and cancels. \
         Firecrawl's names are accepted as aliases (`limit`, `maxDepth`, `includePaths`, \
         `excludePaths`, `scrapeOptions.formats`, `onlyMainContent`).",
    Run::Jobs(|desk, args, opts| crate::tools::plain(run(desk, args, opts))),
)
.input(input_schema::<Args>)
.output(|| result_schema(result_properties(), &["id", "status", "pages"]))
.annotations(Annotations::READS_SITES)
.progress()
.budget(crate::tools::Budget::Own);

/// The result of `crawl` and `crawl_status`.
pub fn result_properties() -> Value {
    json!({
        "id": {"type": "string", "description": "The crawl's job id (for crawl_status)."},
        "status": {"type": "string", "enum": ["running", "completed", "cancelled", "failed"]},
        "url": {"type": "string"},
        "pages_done": {"type": "integer"},
        "pages": {"type": "array", "items": {"type": "object", "properties": {
            "url": {"type": "string"}, "status": {"type": ["integer", "null"]},
            "title": {"type": ["string", "null"]}, "depth": {"type": "integer"},
            "content": {"type": "string"}, "truncated": {"type": "boolean"},
            "error": {"type": "string"}
        }}},
        "skipped": {"type": "array", "description": "URLs not fetched and why (robots.txt)."},
        "start_index": {"type": "integer"},
        "next_start_index": {"type": ["integer", "null"]},
        "error": {"type": ["string", "null"]},
    })
}

/// Defaults and bounds.
pub const DEFAULT_PAGES: usize = 10;
pub const DEFAULT_DEPTH: usize = 2;
pub const MAX_DEPTH: usize = 10;
pub const DEFAULT_PAGE_CHARS: usize = 10_000;

fn default_pages() -> usize {
    DEFAULT_PAGES
}
fn default_depth() -> usize {
    DEFAULT_DEPTH
}
fn default_page_chars() -> usize {
    DEFAULT_PAGE_CHARS
}
fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Where to start (any public http(s) URL); only its host is crawled.
    url: String,
    /// At most this many pages (capped by web.max_crawl_pages).
    #[serde(default = "default_pages")]
    #[schemars(range(min = 1))]
    max_pages: usize,
    /// How many links away from the start page (0: the start page only).
    #[serde(default = "default_depth")]
    #[schemars(range(max = MAX_DEPTH))]
    max_depth: usize,
    /// Path globs a page must match (`/blog/*`, `/docs/**`); none: every path.
    #[serde(default)]
    include: Vec<String>,
    /// Path globs no page may match.
    #[serde(default)]
    exclude: Vec<String>,
    /// Each page as `markdown` (default), `html`, `raw_html`, `text` or `links`.
    #[serde(default)]
    format: Format,
    /// markdown, html and text: the main content only (default true).
    #[serde(default = "yes")]
    only_main_content: bool,
    /// At most this many characters of each page's content.
    #[serde(default = "default_page_chars")]
    #[schemars(range(min = 1, max = 1_000_000))]
    max_chars: usize,
    /// Return a job id at once; read the pages with crawl_status.
    #[serde(default, rename = "async")]
    background: bool,
}

/// The checked crawl.
struct Plan {
    start: url::Url,
    host: String,
    max_pages: usize,
    max_depth: usize,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    format: Format,
    only_main: bool,
    max_chars: usize,
}

fn globs(field: &str, patterns: &[String]) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let glob = globset::GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| invalid(format!("`{field}`: `{p}` is not a glob ({e})")))?;
        b.add(glob);
    }
    b.build()
        .map(Some)
        .map_err(|e| invalid(format!("`{field}`: {e}")))
}

fn plan(desk: &JobDesk, a: &Args) -> Result<Plan> {
    let cap = desk.leases.config().web.max_crawl_pages;
    if a.max_pages == 0 || a.max_pages > cap {
        return Err(invalid(format!(
            "`max_pages` must be between 1 and {cap} (web.max_crawl_pages)"
        )));
    }
    if a.max_depth > MAX_DEPTH {
        return Err(invalid(format!("`max_depth` is at most {MAX_DEPTH}")));
    }
    if matches!(a.format, Format::Screenshot | Format::Pdf) {
        return Err(invalid(
            "a crawl's `format` is a text format (markdown, html, raw_html, text, links)",
        ));
    }
    if a.max_chars == 0 {
        return Err(invalid("`max_chars` must be at least 1"));
    }
    let start = url::Url::parse(&a.url)
        .map_err(|e| invalid(format!("`{}` is not a valid URL ({e})", a.url)))?;
    desk.leases.guard().check_static(&start)?;
    Ok(Plan {
        host: start.host_str().unwrap_or_default().to_ascii_lowercase(),
        start,
        max_pages: a.max_pages,
        max_depth: a.max_depth,
        include: globs("include", &a.include)?,
        exclude: globs("exclude", &a.exclude)?,
        format: a.format,
        only_main: a.only_main_content,
        max_chars: a.max_chars,
    })
}

impl Plan {
    /// Whether a link found on a page is crawled: same host, http(s), and
    /// its path passes `include` and `exclude`.
    fn follows(&self, url: &url::Url) -> bool {
        let path = url.path();
        url.host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case(&self.host))
            && matches!(url.scheme(), "http" | "https")
            && self.include.as_ref().is_none_or(|g| g.is_match(path))
            && self.exclude.as_ref().is_none_or(|g| !g.is_match(path))
    }
}

/// The normalised form a crawl dedups by: no fragment, no empty query.
fn normal(url: &url::Url) -> url::Url {
    let mut u = url.clone();
    u.set_fragment(None);
    if u.query() == Some("") {
        u.set_query(None);
    }
    u
}

pub async fn run(desk: &JobDesk, args: Value, opts: &RunOptions) -> Result<Value> {
    let args = super::aliases::apply("crawl", args, super::aliases::CRAWL)?;
    let a: Args = parse("crawl", args.clone())?;
    let plan = plan(desk, &a)?;
    let job = desk.jobs.start("crawl", args, opts.caller.as_deref())?;
    let task = {
        let (desk, job) = (desk.clone(), job.clone());
        // A background crawl outlives its call: no progress to it.
        let opts = RunOptions {
            progress: if a.background {
                None
            } else {
                opts.progress.clone()
            },
            slot: opts.slot,
            // The key's grants hold for the whole crawl.
            scope: opts.scope.clone(),
            ..RunOptions::default()
        };
        tokio::spawn(async move { crawl(&desk, &plan, &job, &opts).await })
    };
    if a.background {
        drop(task);
        return Ok(answer(&job.record(), 0, opts.answer_chars));
    }
    // The call waits; cancelling the call (dropping this future) cancels the job.
    let guard = job.cancel_token().clone().drop_guard();
    job.finished().await;
    let _ = task.await;
    guard.disarm();
    Ok(answer(&job.record(), 0, opts.answer_chars))
}

/// Ends a job that its task left running (a panic): as failed, so it does
/// not hold one of the running places for ever.
struct Unfinished<'a>(&'a JobDesk, &'a Job);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if !self.1.is_running() {
            return;
        }
        if self.1.cancel_token().is_cancelled() {
            // Dropped mid-page by a cancel or the daemon's shutdown.
            self.0.jobs.finish(self.1, Status::Cancelled, None);
        } else {
            let why = "the crawl stopped unexpectedly (see the daemon's log)".to_string();
            self.0.jobs.finish(self.1, Status::Failed, Some(why));
        }
    }
}

/// The crawl itself, recording into `job` until done, cancelled or failed.
async fn crawl(desk: &JobDesk, plan: &Plan, job: &Arc<Job>, opts: &RunOptions) {
    let _unfinished = Unfinished(desk, job);
    let cancel = job.cancel_token().clone();
    let mut queue: VecDeque<(url::Url, usize)> = VecDeque::from([(normal(&plan.start), 0)]);
    let mut seen: HashSet<url::Url> = HashSet::from([normal(&plan.start)]);
    let mut done = 0;
    while let Some((url, depth)) = queue.pop_front() {
        if done >= plan.max_pages {
            break;
        }
        if cancel.is_cancelled() {
            desk.jobs.finish(job, Status::Cancelled, None);
            return;
        }
        if let Some(why) = robots_refusal(desk, &url, opts).await {
            job.skip(json!({"url": url.as_str(), "reason": why}));
            continue;
        }
        let fetched = tokio::select! {
            f = scrape::fetch_page(&desk.leases, url.clone(), opts) => f,
            () = cancel.cancelled() => {
                desk.jobs.finish(job, Status::Cancelled, None);
                return;
            }
        };
        done += 1;
        let record = match fetched {
            Ok(f) => {
                // Read on a page worker: a hostile page costs a worker its
                // time, never the runtime's.
                let raw = f.response.text();
                let (format, only_main, max_chars) = (plan.format, plan.only_main, plan.max_chars);
                let read = crate::dom::offload::run("reading a crawled page", move || {
                    let page = Page::parse(&raw, &f.response.final_url);
                    let links = page.links();
                    let record = page_record(format, only_main, max_chars, &f, &page, &raw, depth);
                    (links, record)
                })
                .await;
                match read {
                    Ok((links, record)) => {
                        if depth < plan.max_depth {
                            for (link, _) in links {
                                let link = normal(&link);
                                if plan.follows(&link) && seen.insert(link.clone()) {
                                    queue.push_back((link, depth + 1));
                                }
                            }
                        }
                        record
                    }
                    Err(e) => json!({"url": url.as_str(), "status": null, "title": null,
                        "depth": depth, "content": "", "error": e.message()}),
                }
            }
            Err(e) => json!({"url": url.as_str(), "status": null, "title": null, "depth": depth,
                "content": "", "error": e.message()}),
        };
        opts.report(|| {
            format!(
                "page {done}/{}: {} ({})",
                plan.max_pages,
                record["url"].as_str().unwrap_or(""),
                record["status"]
            )
        });
        job.push(record);
    }
    desk.jobs.finish(job, Status::Completed, None);
}

/// Why robots.txt keeps `url` out, for a host no strategy covers.
async fn robots_refusal(desk: &JobDesk, url: &url::Url, opts: &RunOptions) -> Option<String> {
    if !desk.leases.config().web.respect_robots || desk.leases.strategy_for(url).is_some() {
        return None;
    }
    // An unreadable robots.txt is the page fetch's to report.
    let robots = crate::lease::Call::new(&desk.leases, None, opts.scope.clone())
        .robots(url)
        .await
        .ok()?;
    robots.check(url).err()
}

fn page_record(
    format: Format,
    only_main: bool,
    max_chars: usize,
    f: &crate::lease::Fetched,
    page: &Page,
    raw: &str,
    depth: usize,
) -> Value {
    let r = &f.response;
    let (content, error) = if f.outcome.is_failure() {
        (
            String::new(),
            Some(format!("{} (HTTP {})", f.outcome.as_str(), r.status)),
        )
    } else {
        match scrape::convert(page, raw, format, &crate::web::Pick::main(only_main)) {
            Ok(c) => (c, None),
            Err(e) => (String::new(), Some(e.message().to_string())),
        }
    };
    let total = content.chars().count();
    let content: String = content.chars().take(max_chars).collect();
    let mut v = json!({
        "url": r.final_url.as_str(), "status": r.status, "title": page.title(), "depth": depth,
        "outcome": f.outcome.as_str(), "via": match f.via { crate::lease::Via::Http => "http", crate::lease::Via::Browser => "browser" },
        "content": content, "truncated": total > max_chars,
    });
    let cut = page.cut().notes();
    if !cut.is_empty() {
        v["warnings"] = json!(cut);
    }
    if let Some(e) = error {
        v["error"] = json!(e);
    }
    v
}

/// A job's record as `crawl` and `crawl_status` answer: its pages from
/// `start`, as many as fit in `budget` characters of answer (at least one).
pub fn answer(r: &crate::services::jobs::Record, start: usize, budget: usize) -> Value {
    let mut pages = Vec::new();
    // What the answer holds besides its pages.
    let mut chars = 300
        + crate::tools::budget::json_chars(&r.request["url"])
        + crate::tools::budget::json_chars(&serde_json::json!(r.skipped));
    for p in r.items.iter().skip(start) {
        let n = crate::tools::budget::json_chars(p) + 1;
        if !pages.is_empty() && chars + n > budget {
            break;
        }
        chars += n;
        pages.push(p.clone());
    }
    let end = start + pages.len();
    json!({
        "id": r.id,
        "status": r.status,
        "url": r.request["url"],
        "pages_done": r.items.len(),
        "pages": pages,
        "skipped": r.skipped,
        "start_index": start,
        // While it runs, more pages may come after the last one returned.
        "next_start_index": (end < r.items.len() || r.status == Status::Running).then_some(end),
        "error": r.error,
    })
}

/// A job that is not a crawl, or none.
pub fn not_found(id: &str) -> crate::error::Error {
    crate::error::Error::new(
        ErrorKind::NotFound,
        format!("no crawl `{id}` (finished crawls are kept a day)"),
    )
}
