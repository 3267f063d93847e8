//! `map`: the URLs of a site, from the sitemaps its `robots.txt` names and
//! `/sitemap.xml` (indexes followed, gzip read), and the start page's links.
//! Lists, does not fetch the pages: `scrape` and `crawl` obey robots.txt
//! when they do.

use std::collections::{HashSet, VecDeque};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse, result_schema};
use super::{Output, Provenance};
use crate::error::{Error, ErrorKind, Result};
use crate::request::FetchRequest;
use std::sync::Arc;

use crate::lease::cascade::RunOptions;
use crate::lease::{Call, Leases};
use crate::web::{Page, sitemap};

pub const SPEC: Spec = Spec::new(
    "map",
    Role::Operator,
    "Map a site",
    "List the URLs of a site without fetching its pages: the sitemaps its robots.txt names \
         and /sitemap.xml (sitemap indexes followed, gzip read), plus the start page's links. \
         Same host unless `include_subdomains` (Firecrawl's `includeSubdomains` also works); \
         `search` keeps URLs containing it; `limit` caps the list.",
    Run::Leases(|leases, args, opts| Box::pin(run(leases, args, opts))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({
            "url": {"type": "string"}, "count": {"type": "integer"},
            "links": {"type": "array", "items": {"type": "string"}},
            "from_sitemaps": {"type": "integer"}, "from_page": {"type": "integer"},
            "sitemaps": {"type": "array", "items": {"type": "string"}, "description": "The sitemap files read."},
            "problems": {"type": "array", "items": {"type": "string"}, "description": "Sitemaps or pages that could not be read."},
            "truncated": {"type": "boolean"},
        }),
        &["url", "count", "links"],
    )
})
.annotations(Annotations::READS_SITES)
.progress();

/// Default and largest `limit`.
pub const DEFAULT_LIMIT: usize = 1000;
pub const MAX_LIMIT: usize = 50_000;
/// Sitemap files read at most in one call (indexes included).
pub const MAX_SITEMAPS: usize = 50;

fn default_limit() -> usize {
    DEFAULT_LIMIT
}

/// Where the URLs come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Sitemaps {
    /// Sitemaps and the start page's links.
    #[default]
    Include,
    /// The start page's links only.
    Skip,
    /// Sitemaps only.
    Only,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The site: its start page (any public http(s) URL).
    url: String,
    /// Keep URLs on subdomains of the start host too.
    #[serde(default)]
    include_subdomains: bool,
    /// Keep only URLs containing this text (case-insensitive).
    search: Option<String>,
    /// At most this many URLs.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: usize,
    /// `include` (default), `skip` (links only) or `only` (sitemaps only).
    #[serde(default)]
    sitemap: Sitemaps,
    /// Use only this slot (identity).
    slot: Option<usize>,
}

/// Which hosts a map keeps.
struct Scope {
    host: String,
    subdomains: bool,
    search: Option<String>,
}

impl Scope {
    fn keeps(&self, url: &url::Url) -> bool {
        let Some(h) = url.host_str().map(str::to_ascii_lowercase) else {
            return false;
        };
        let base = self.host.strip_prefix("www.").unwrap_or(&self.host);
        let host_ok =
            h == self.host || (self.subdomains && (h == base || h.ends_with(&format!(".{base}"))));
        host_ok
            && matches!(url.scheme(), "http" | "https")
            && (self.search.as_ref())
                .is_none_or(|s| url.as_str().to_lowercase().contains(s.as_str()))
    }
}

/// URLs found, each once (fragments dropped), in the order found.
#[derive(Default)]
struct Found {
    seen: HashSet<String>,
    links: Vec<String>,
}

impl Found {
    fn add(&mut self, scope: &Scope, mut url: url::Url) -> bool {
        url.set_fragment(None);
        if !scope.keeps(&url) || !self.seen.insert(url.to_string()) {
            return false;
        }
        self.links.push(url.into());
        true
    }
}

pub async fn run(leases: &Arc<Leases>, args: Value, opts: &RunOptions) -> Result<Output> {
    let args = super::aliases::apply("map", args, super::aliases::MAP)?;
    let a: Args = parse("map", args)?;
    if a.limit == 0 || a.limit > MAX_LIMIT {
        return Err(invalid(format!(
            "`limit` must be between 1 and {MAX_LIMIT}"
        )));
    }
    let start = url::Url::parse(&a.url)
        .map_err(|e| invalid(format!("`{}` is not a valid URL ({e})", a.url)))?;
    leases.guard().check_static(&start)?;
    let scope = Scope {
        host: start.host_str().unwrap_or_default().to_ascii_lowercase(),
        subdomains: a.include_subdomains,
        search: a.search.as_ref().map(|s| s.to_lowercase()),
    };
    // One identity for the whole call: the start page and every sitemap.
    let mut call = Call::new(leases, a.slot.or(opts.slot), opts.scope.clone());
    let mut found = Found::default();
    let mut problems = Vec::new();
    let mut read = Vec::new();
    if a.sitemap != Sitemaps::Skip {
        read = sitemaps(&mut call, &start, &scope, opts, &mut found, &mut problems).await;
    }
    let from_sitemaps = found.links.len();
    if a.sitemap != Sitemaps::Only {
        match call.http(FetchRequest::get(start.clone())).await {
            Ok(f) if !f.outcome.is_failure() => {
                let (raw, at) = (f.response.text(), f.response.final_url.clone());
                let links = crate::dom::offload::run("reading the start page", move || {
                    Page::parse(&raw, &at).links()
                })
                .await
                .unwrap_or_else(|e| {
                    problems.push(format!("{start}: {}", e.message()));
                    Vec::new()
                });
                opts.report(|| format!("{start}: {} links", links.len()));
                for (link, _) in links {
                    found.add(&scope, link);
                }
            }
            Ok(f) => problems.push(format!(
                "{start}: {} (HTTP {})",
                f.outcome.as_str(),
                f.response.status
            )),
            Err(e) => problems.push(format!("{start}: {}", e.message())),
        }
    }
    if found.links.is_empty() && !problems.is_empty() {
        return Err(Error::new(
            ErrorKind::Network,
            format!("nothing to map: {}", problems.join("; ")),
        ));
    }
    let from_page = found.links.len() - from_sitemaps;
    let truncated = found.links.len() > a.limit;
    found.links.truncate(a.limit);
    let body = json!({
        "url": start.as_str(),
        "count": found.links.len(),
        "links": found.links,
        "from_sitemaps": from_sitemaps,
        "from_page": from_page,
        "sitemaps": read,
        "problems": problems,
        "truncated": truncated,
    });
    // Sitemaps and the start page: tier 2, on the call's one identity.
    let provenance = call.slot().map(|slot| Provenance {
        slot,
        tier: 2,
        attempts: call.sent(),
    });
    Ok(Output {
        body,
        provenance,
        text: None,
    })
}

/// Read the site's sitemaps breadth-first: those `robots.txt` names, and
/// `/sitemap.xml`; indexes add more (on the start host or, with
/// subdomains, its own). Returns the files read.
async fn sitemaps(
    call: &mut Call,
    start: &url::Url,
    scope: &Scope,
    opts: &RunOptions,
    found: &mut Found,
    problems: &mut Vec<String>,
) -> Vec<String> {
    let mut queue: VecDeque<url::Url> = VecDeque::new();
    let robots = call.robots(start).await;
    match robots {
        Ok(r) => queue.extend(r.sitemaps().iter().filter_map(|s| url::Url::parse(s).ok())),
        Err(e) => problems.push(format!("robots.txt: {}", e.message())),
    }
    if let Ok(default) = start.join("/sitemap.xml")
        && !queue.contains(&default)
    {
        queue.push_back(default);
    }
    // Sitemaps are read on the site's own hosts, whatever `search` says.
    let bare = Scope {
        host: scope.host.clone(),
        subdomains: scope.subdomains,
        search: None,
    };
    let mut seen: HashSet<url::Url> = HashSet::new();
    let mut read = Vec::new();
    while let Some(sm) = queue.pop_front() {
        if read.len() >= MAX_SITEMAPS || !seen.insert(sm.clone()) {
            continue;
        }
        if !bare.keeps(&sm) {
            problems.push(format!("{sm}: another site's sitemap (not read)"));
            continue;
        }
        let f = match call.http(FetchRequest::get(sm.clone())).await {
            Ok(f) if (200..300).contains(&f.response.status) => f,
            Ok(f) => {
                // A site without /sitemap.xml is common: not a problem.
                if !(f.response.status == 404 && sm.path() == "/sitemap.xml") {
                    problems.push(format!("{sm}: HTTP {}", f.response.status));
                }
                continue;
            }
            Err(e) => {
                problems.push(format!("{sm}: {}", e.message()));
                continue;
            }
        };
        read.push(sm.to_string());
        match sitemap::parse(&f.response.body) {
            Ok(s) => {
                let before = found.links.len();
                for page in s
                    .pages
                    .iter()
                    .filter_map(|p| url::Url::parse(p.trim()).ok())
                {
                    found.add(scope, page);
                }
                queue.extend(
                    s.sitemaps
                        .iter()
                        .filter_map(|p| url::Url::parse(p.trim()).ok()),
                );
                let added = found.links.len() - before;
                opts.report(|| format!("{sm}: {added} URLs, {} sitemaps", s.sitemaps.len()));
            }
            Err(e) => problems.push(format!("{sm}: {e}")),
        }
    }
    read
}
