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
/// origin (scheme, host and port) over http(s).
fn usable(at: &url::Url, href: &str) -> Option<url::Url> {
    let mut u = at.join(href.trim()).ok()?;
    u.set_fragment(None);
    let mut here = at.clone();
    here.set_fragment(None);
    let same = u.origin() == at.origin() && matches!(u.scheme(), "http" | "https");
    (same && u != here).then_some(u)
}

/// Whether `next` can continue the list on `at`: the same path (another
/// query), a path under it (`/p/kettle/reviews`, `…/page/2/`), or the
/// same folder with a name that differs only in its digits
/// (`reviews-1.html` → `reviews-2.html`). A `rel=next` to another product
/// (themes link products in a row) is none of these.
fn continues(at: &url::Url, next: &url::Url) -> bool {
    let (here, there) = (
        at.path().trim_end_matches('/'),
        next.path().trim_end_matches('/'),
    );
    if here == there || there.starts_with(&format!("{here}/")) {
        return true;
    }
    let (Some((dir_a, name_a)), Some((dir_b, name_b))) =
        (here.rsplit_once('/'), there.rsplit_once('/'))
    else {
        return false;
    };
    let letters = |s: &str| {
        s.chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
    };
    dir_a == dir_b
        && name_b.chars().any(|c| c.is_ascii_digit())
        && letters(name_a) == letters(name_b)
}

fn rel_next(html: &Html, at: &url::Url) -> Option<url::Url> {
    let sel = REL_NEXT.as_ref()?;
    html.select(sel).take(MAX_LINKS).find_map(|e| {
        let rel = e.value().attr("rel")?;
        let next = rel
            .split_ascii_whitespace()
            .any(|t| t.eq_ignore_ascii_case("next"));
        let u = next
            .then(|| usable(at, e.value().attr("href")?))
            .flatten()?;
        continues(at, &u).then_some(u)
    })
}

/// The page number `u` is on, the parameter that says it (1 when none
/// does), and the other parameters, sorted.
fn page_of(u: &url::Url) -> (Option<String>, u64, Vec<(String, String)>) {
    let mut param = None;
    let mut n = 1;
    let mut rest = Vec::new();
    for (k, v) in u.query_pairs().take(64) {
        if param.is_none()
            && PAGE_PARAMS.contains(&k.to_ascii_lowercase().as_str())
            && let Ok(x) = v.trim().parse()
        {
            param = Some(k.into_owned());
            n = x;
            continue;
        }
        rest.push((k.into_owned(), v.into_owned()));
    }
    rest.sort();
    (param, n, rest)
}

/// A link to the same path and the same other parameters, with the page
/// parameter one higher.
fn page_link(html: &Html, at: &url::Url) -> Option<url::Url> {
    let sel = LINKS.as_ref()?;
    let (param, n, rest) = page_of(at);
    let want = n.checked_add(1)?;
    html.select(sel).take(MAX_LINKS).find_map(|e| {
        let u = usable(at, e.value().attr("href")?)?;
        if u.path() != at.path() {
            return None;
        }
        let (their, m, their_rest) = page_of(&u);
        let same_param = match (&param, &their) {
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            (None, Some(_)) => true,
            _ => false,
        };
        (same_param && m == want && their_rest == rest).then_some(u)
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
        // Page 3 of this list, not of another listing on the same path.
        let numbered = "<a href=\"?page=1\">1</a><a href=\"?page=3&sort=new\">3</a><a href=\"/p/kettle?page=3\">3</a>";
        assert_eq!(
            next(numbered, at, None).as_deref(),
            Some("https://shop.test/p/kettle?page=3")
        );
        // A path under the page, or the next name in its folder.
        assert_eq!(
            next(
                "<link rel=\"next\" href=\"/p/kettle/page/2/\">",
                "https://shop.test/p/kettle/",
                None
            )
            .as_deref(),
            Some("https://shop.test/p/kettle/page/2/")
        );
        assert_eq!(
            next(
                "<a rel=\"next\" href=\"reviews-2.html\">",
                "https://shop.test/p/reviews-1.html",
                None
            )
            .as_deref(),
            Some("https://shop.test/p/reviews-2.html")
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
        // Another port or scheme is another site.
        assert_eq!(
            next(
                "<a rel=\"next\" href=\"https://shop.test:8443/p/kettle?page=2\">",
                at,
                None
            ),
            None
        );
        assert_eq!(
            next(
                "<a rel=\"next\" href=\"http://shop.test/p/kettle?page=2\">",
                at,
                None
            ),
            None
        );
        // A theme's link to the next product is no next page.
        assert_eq!(
            next("<a rel=\"next\" href=\"/p/teapot\">Teapot ›</a>", at, None),
            None
        );
    }
}
