//! A page as a caller asked for it: cleaned HTML (scripts, styles and
//! comments gone; with `only_main_content`, the main content alone), then
//! markdown or text of that, and the page's links, every URL absolute.
//!
//! Main content, as Firecrawl's `onlyMainContent` finds it: the page's
//! `<main>` (or `[role=main]`), else its one `<article>`, else the body;
//! inside it, navigation, asides, footers and elements whose class or id
//! says ad, banner, cookie, consent, share, social, sidebar, popup, modal
//! or newsletter are dropped (and headers too, when the body is all there is).

use std::collections::HashSet;
use std::sync::LazyLock;

use scraper::{ElementRef, Html, Selector};

use crate::dom::Cut;
use crate::error::{Error, ErrorKind, Result};

fn sel(css: &str) -> Selector {
    Selector::parse(css).unwrap_or_else(|e| unreachable!("built-in selector `{css}`: {e}"))
}

static NEVER: LazyLock<Selector> =
    LazyLock::new(|| sel("script, style, noscript, template, link, meta, iframe, object, embed"));
static MAIN: LazyLock<Selector> = LazyLock::new(|| sel("main, [role=main]"));
static ARTICLE: LazyLock<Selector> = LazyLock::new(|| sel("article"));
static BODY: LazyLock<Selector> = LazyLock::new(|| sel("body"));
static NOISE_TAGS: LazyLock<Selector> = LazyLock::new(|| {
    sel("nav, aside, footer, [role=navigation], [role=banner], [role=contentinfo], dialog")
});
static HEADER: LazyLock<Selector> = LazyLock::new(|| sel("header"));
static WITH_CLASS_OR_ID: LazyLock<Selector> = LazyLock::new(|| sel("[class], [id]"));
static LINKS: LazyLock<Selector> = LazyLock::new(|| sel("a[href]"));
static BASE: LazyLock<Selector> = LazyLock::new(|| sel("base[href]"));
static TITLE: LazyLock<Selector> = LazyLock::new(|| sel("title"));
static URL_ATTR: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r#"(\s(?:href|src|poster|action)=")([^"]*)""#)
        .unwrap_or_else(|e| unreachable!("{e}"))
});

/// Words that mark an element as page furniture when a class or id token
/// is the word, or starts or ends with it (`ad-banner`, `site-sidebar`).
const NOISE_WORDS: &[&str] = &[
    "ad",
    "ads",
    "advert",
    "advertisement",
    "banner",
    "cookie",
    "cookies",
    "consent",
    "share",
    "social",
    "sidebar",
    "popup",
    "modal",
    "newsletter",
    "breadcrumb",
    "breadcrumbs",
];

fn noisy_token(token: &str) -> bool {
    let t = token.to_ascii_lowercase();
    NOISE_WORDS.iter().any(|w| {
        t == *w
            || t.strip_prefix(w).is_some_and(|r| r.starts_with(['-', '_']))
            || t.strip_suffix(w).is_some_and(|r| r.ends_with(['-', '_']))
    })
}

fn noisy(e: &ElementRef<'_>) -> bool {
    let v = e.value();
    v.classes().any(noisy_token) || v.id().is_some_and(noisy_token)
}

/// What of a page a caller wants: its main content only (`only_main`),
/// only what `include` selectors match (the outermost matches, in page
/// order), and never what `exclude` selectors match (Firecrawl's
/// `includeTags` / `excludeTags`).
#[derive(Debug, Clone, Default)]
pub struct Pick {
    pub only_main: bool,
    pub include: Vec<Selector>,
    pub exclude: Vec<Selector>,
}

impl Pick {
    /// The main content (or the whole page), nothing else picked.
    pub fn main(only_main: bool) -> Pick {
        Pick {
            only_main,
            ..Pick::default()
        }
    }
}

/// A page, parsed once, within [`crate::dom`]'s bounds. Not `Send` (the
/// parse's strings are not): build and read it on one thread, a page
/// worker's ([`crate::dom::offload`]) for anything a site sent.
pub struct Page {
    doc: Html,
    base: url::Url,
    cut: Cut,
}

impl Page {
    /// `url`: where the page was fetched from (its `<base href>` wins).
    pub fn parse(html: &str, url: &url::Url) -> Page {
        let crate::dom::Parsed { html: doc, cut } = crate::dom::document(html);
        let base = (doc.select(&BASE).next())
            .and_then(|b| b.value().attr("href"))
            .and_then(|h| url.join(h).ok())
            .unwrap_or_else(|| url.clone());
        Page { doc, base, cut }
    }

    /// What the bounded parse left out of the page.
    pub fn cut(&self) -> Cut {
        self.cut
    }

    /// The `<title>`, trimmed.
    pub fn title(&self) -> Option<String> {
        let t = self.doc.select(&TITLE).next()?.text().collect::<String>();
        let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
        (!t.is_empty()).then_some(t)
    }

    /// Every link of the whole page, absolute, without fragments, in
    /// order, each once (`javascript:` and the like left out).
    pub fn links(&self) -> Vec<(url::Url, String)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for a in self.doc.select(&LINKS) {
            let Some(mut url) = a
                .value()
                .attr("href")
                .and_then(|h| self.base.join(h.trim()).ok())
            else {
                continue;
            };
            if !matches!(url.scheme(), "http" | "https") {
                continue;
            }
            url.set_fragment(None);
            if seen.insert(url.clone()) {
                let text = a.text().collect::<Vec<_>>().join(" ");
                out.push((url, text.split_whitespace().collect::<Vec<_>>().join(" ")));
            }
        }
        out
    }

    /// The page cleaned: scripts, styles and the like gone, URLs absolute;
    /// what `pick` keeps of it.
    pub fn cleaned_html(&self, pick: &Pick) -> String {
        let only_main = pick.only_main;
        let mut doc = self.doc.clone();
        let mut drop: Vec<ego_tree::NodeId> = doc.select(&NEVER).map(|e| e.id()).collect();
        drop.extend(
            (doc.tree.nodes())
                .filter(|n| n.value().is_comment())
                .map(|n| n.id()),
        );
        let root = if only_main {
            let (root, whole_body) = main_root(&doc);
            if let Some(r) = ElementRef::wrap(doc.tree.get(root).unwrap_or(doc.tree.root())) {
                drop.extend(r.select(&NOISE_TAGS).map(|e| e.id()));
                drop.extend(r.select(&WITH_CLASS_OR_ID).filter(noisy).map(|e| e.id()));
                if whole_body {
                    drop.extend(r.select(&HEADER).map(|e| e.id()));
                }
            }
            Some(root)
        } else {
            doc.select(&BODY).next().map(|b| b.id())
        };
        for sel in &pick.exclude {
            drop.extend(doc.select(sel).map(|e| e.id()));
        }
        // `include_tags` look in the whole page (the main content is where
        // nothing is asked for by name).
        let body = doc.select(&BODY).next().map(|b| b.id());
        let root = if pick.include.is_empty() { root } else { body };
        // What is left when the root itself is excluded: nothing (a detached
        // node still prints).
        let gone = |id: ego_tree::NodeId, doc: &Html| {
            doc.tree.get(id).is_some_and(|n| {
                n.ancestors()
                    .chain(std::iter::once(n))
                    .any(|a| drop.contains(&a.id()))
            })
        };
        if root.is_some_and(|r| gone(r, &doc)) {
            return String::new();
        }
        for id in &drop {
            if let Some(mut n) = doc.tree.get_mut(*id) {
                n.detach();
            }
        }
        let root = root
            .and_then(|r| doc.tree.get(r))
            .and_then(ElementRef::wrap);
        if !pick.include.is_empty() {
            let within = root.unwrap_or_else(|| doc.root_element());
            return self.absolute(&included(within, &pick.include));
        }
        let html = match root {
            Some(r) if only_main => r.html(),
            Some(r) => r.inner_html(),
            None => doc.root_element().html(),
        };
        self.absolute(&html)
    }

    /// `href`, `src`, `poster` and `action` values made absolute against
    /// the page's base (the serializer always writes them double-quoted).
    fn absolute(&self, html: &str) -> String {
        URL_ATTR
            .replace_all(html, |c: &regex::Captures<'_>| {
                let raw = c[2].replace("&amp;", "&").replace("&quot;", "\"");
                match self.base.join(raw.trim()) {
                    Ok(u) if !raw.trim().is_empty() => {
                        let abs = u.as_str().replace('&', "&amp;").replace('"', "&quot;");
                        format!("{}{abs}\"", &c[1])
                    }
                    _ => c[0].to_string(),
                }
            })
            .into_owned()
    }

    /// Markdown of [`Page::cleaned_html`].
    pub fn markdown(&self, pick: &Pick) -> Result<String> {
        let converter = htmd::HtmlToMarkdown::builder()
            .skip_tags(vec!["script", "style", "noscript", "svg", "head", "iframe"])
            .build();
        converter.convert(&self.cleaned_html(pick)).map_err(|e| {
            Error::new(ErrorKind::Internal, "cannot convert the page to markdown").with_source(e)
        })
    }

    /// The text of [`Page::cleaned_html`], one line per text node.
    pub fn text(&self, pick: &Pick) -> String {
        let doc = crate::dom::fragment(&self.cleaned_html(pick)).html;
        let lines: Vec<&str> = (doc.root_element().descendants())
            .filter_map(|n| n.value().as_text().map(|t| t.trim()))
            .filter(|t| !t.is_empty())
            .collect();
        lines.join("\n")
    }
}

/// The outermost elements under `within` that one of `include` matches,
/// in page order, one after the other.
fn included(within: ElementRef<'_>, include: &[Selector]) -> String {
    let hits: HashSet<ego_tree::NodeId> = include
        .iter()
        .flat_map(|sel| within.select(sel).map(|e| e.id()))
        .collect();
    let out: Vec<String> = (within.descendants())
        .filter(|n| hits.contains(&n.id()))
        .filter(|n| !n.ancestors().any(|a| hits.contains(&a.id())))
        .filter_map(ElementRef::wrap)
        .map(|e| e.html())
        .collect();
    out.join("\n")
}

/// The main content's root, and whether it is the whole body.
fn main_root(doc: &Html) -> (ego_tree::NodeId, bool) {
    if let Some(m) = doc.select(&MAIN).next() {
        return (m.id(), false);
    }
    let mut articles = doc.select(&ARTICLE);
    if let (Some(a), None) = (articles.next(), articles.next()) {
        return (a.id(), false);
    }
    match doc.select(&BODY).next() {
        Some(b) => (b.id(), true),
        None => (doc.root_element().id(), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOISY: &str = r#"<html><head><title> Kettles
      compared </title><script>var x = 1;</script></head><body>
      <div class="cookie-banner">We use cookies</div>
      <header><nav><a href="/">Home</a></nav></header>
      <aside class="ad-banner">BUY NOW</aside>
      <article><header><h1>Kettles</h1></header><p>Steel won. <a href="about?a=1&amp;b=2">Us</a></p>
      <img src="img/c.png" alt="chart"><div class="share-buttons">Share</div><!-- note --></article>
      <footer>© Footer</footer></body></html>"#;

    fn page() -> Page {
        Page::parse(
            NOISY,
            &url::Url::parse("https://127.0.0.1/site/article").unwrap(),
        )
    }

    #[test]
    fn main_content_drops_the_furniture_and_keeps_the_article_whole() {
        let md = page().markdown(&Pick::main(true)).unwrap();
        assert!(
            md.contains("# Kettles") && md.contains("Steel won."),
            "{md}"
        );
        assert!(
            md.contains("[Us](https://127.0.0.1/site/about?a=1&b=2)"),
            "{md}"
        );
        assert!(
            md.contains("![chart](https://127.0.0.1/site/img/c.png)"),
            "{md}"
        );
        for noise in [
            "cookies", "BUY NOW", "Footer", "Home", "Share", "var x", "note",
        ] {
            assert!(!md.contains(noise), "{noise} in {md}");
        }
        let whole = page().markdown(&Pick::main(false)).unwrap();
        for kept in ["cookies", "BUY NOW", "Footer", "[Home](https://127.0.0.1/)"] {
            assert!(whole.contains(kept), "{kept} not in {whole}");
        }
        assert!(!whole.contains("var x"));
    }

    #[test]
    fn links_are_absolute_unique_and_titles_trimmed() {
        let p = page();
        assert_eq!(p.title().as_deref(), Some("Kettles compared"));
        let links: Vec<String> = p.links().iter().map(|(u, _)| u.to_string()).collect();
        assert_eq!(
            links,
            ["https://127.0.0.1/", "https://127.0.0.1/site/about?a=1&b=2"]
        );
        let html = p.cleaned_html(&Pick::main(true));
        assert!(
            html.starts_with("<article>")
                && html.contains("href=\"https://127.0.0.1/site/about?a=1&amp;b=2\""),
            "{html}"
        );
        assert_eq!(p.text(&Pick::main(true)), "Kettles\nSteel won.\nUs");
    }

    fn sel(css: &str) -> Selector {
        Selector::parse(css).unwrap()
    }

    #[test]
    fn include_and_exclude_tags_pick_parts_of_the_whole_page() {
        let p = page();
        // Outside the main content, and outermost matches once each.
        let nav = p.text(&Pick {
            only_main: true,
            include: vec![sel("footer"), sel("article p")],
            exclude: vec![],
        });
        assert_eq!(nav, "Steel won.\nUs\n© Footer");
        // Excluding the root (the article, or the body) leaves nothing.
        let none = |only_main: bool, root: &str| {
            p.text(&Pick {
                only_main,
                include: vec![],
                exclude: vec![sel(root)],
            })
        };
        assert_eq!(none(true, "article"), "");
        assert_eq!(none(false, "body"), "");
        assert_eq!(
            p.text(&Pick {
                only_main: true,
                include: vec![],
                exclude: vec![sel("p")],
            }),
            "Kettles"
        );
    }
}
