//! Where a review list continues: the page's `rel=next` link, else a link
//! to the same page with its `page=` one higher, else the URL the rating
//! summary gives for its reviews (a product page listing a few, pointing at
//! the page that lists them all). Never the page itself; same site only.

use std::sync::LazyLock;

use scraper::{Html, Selector};

static REL_NEXT: LazyLock<Option<Selector>> =
    LazyLock::new(|| Selector::parse("link[rel][href], a[rel][href]").ok());
static LINKS: LazyLock<Option<Selector>> = LazyLock::new(|| Selector::parse("a[href]").ok());

/// Query parameters that number a list's pages.
const PAGE_PARAMS: &[&str] = &["page", "pg", "p", "pagenumber", "page_number", "reviewpage"];

/// Links looked at for a `page=` link: a hostile page may carry millions.
const MAX_LINKS: usize = 5_000;

/// The next page of the list on `page` at `at`; `summary_url` is the rating
/// summary's own URL, when its structured data names one.
pub fn find(html: &Html, at: &url::Url, summary_url: Option<&str>) -> Option<url::Url> {
    rel_next(html, at)
        .or_else(|| page_link(html, at))
        .or_else(|| summary_url.and_then(|u| usable(at, u)))
}

/// `href` made absolute against `at`, if it is another page of the same
/// site over http(s).
fn usable(at: &url::Url, href: &str) -> Option<url::Url> {
    let mut u = at.join(href.trim()).ok()?;
    u.set_fragment(None);
    let same_site = u.host_str() == at.host_str() && matches!(u.scheme(), "http" | "https");
    let mut here = at.clone();
    here.set_fragment(None);
    (same_site && u != here).then_some(u)
}

fn rel_next(html: &Html, at: &url::Url) -> Option<url::Url> {
    let sel = REL_NEXT.as_ref()?;
    html.select(sel).take(MAX_LINKS).find_map(|e| {
        let rel = e.value().attr("rel")?;
        let next = rel
            .split_ascii_whitespace()
            .any(|t| t.eq_ignore_ascii_case("next"));
        next.then(|| usable(at, e.value().attr("href")?)).flatten()
    })
}

/// The page number `u` is on, and the parameter that says it (1 when none does).
fn page_of(u: &url::Url) -> (Option<String>, u64) {
    u.query_pairs()
        .find(|(k, _)| PAGE_PARAMS.contains(&k.to_ascii_lowercase().as_str()))
        .and_then(|(k, v)| Some((Some(k.into_owned()), v.trim().parse().ok()?)))
        .unwrap_or((None, 1))
}

/// A link to the same path with the page parameter one higher.
fn page_link(html: &Html, at: &url::Url) -> Option<url::Url> {
    let sel = LINKS.as_ref()?;
    let (param, n) = page_of(at);
    let want = n.checked_add(1)?;
    html.select(sel).take(MAX_LINKS).find_map(|e| {
        let u = usable(at, e.value().attr("href")?)?;
        if u.path() != at.path() {
            return None;
        }
        let (their, m) = page_of(&u);
        let same_param = match (&param, &their) {
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            (None, Some(_)) => true,
            _ => false,
        };
        (same_param && m == want).then_some(u)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(page: &str, at: &str, summary: Option<&str>) -> Option<String> {
        let html = Html::parse_document(page);
        let at = url::Url::parse(at).ok()?;
        find(&html, &at, summary).map(|u| u.to_string())
    }

    #[test]
    fn rel_next_then_a_page_link_then_the_summary_url() {
        let at = "https://shop.test/p/kettle?page=2";
        assert_eq!(
            next("<link rel=\"next\" href=\"?page=3\">", at, None).as_deref(),
            Some("https://shop.test/p/kettle?page=3")
        );
        assert_eq!(
            next(
                "<a rel=\"nofollow NEXT\" href=\"/p/kettle?page=3#r\">›</a>",
                at,
                None
            )
            .as_deref(),
            Some("https://shop.test/p/kettle?page=3")
        );
        let numbered = "<a href=\"?page=1\">1</a><a href=\"?page=4\">4</a><a href=\"/p/kettle?page=3&sort=new\">3</a>";
        assert_eq!(
            next(numbered, at, None).as_deref(),
            Some("https://shop.test/p/kettle?page=3&sort=new")
        );
        // The first page names no number: a link to page 2 continues it.
        assert_eq!(
            next("<a href=\"?p=2\">2</a>", "https://shop.test/p/kettle", None).as_deref(),
            Some("https://shop.test/p/kettle?p=2")
        );
        assert_eq!(
            next("<p>no links</p>", at, Some("/p/kettle/reviews")).as_deref(),
            Some("https://shop.test/p/kettle/reviews")
        );
    }

    #[test]
    fn never_the_page_itself_nor_another_site() {
        let at = "https://shop.test/p/kettle";
        assert_eq!(
            next("<link rel=\"next\" href=\"#reviews\">", at, None),
            None
        );
        assert_eq!(
            next("<a rel=\"next\" href=\"https://other.test/x\">", at, None),
            None
        );
        assert_eq!(
            next("<a rel=\"next\" href=\"javascript:go()\">", at, None),
            None
        );
        assert_eq!(next("", at, Some("https://shop.test/p/kettle")), None);
    }
}
