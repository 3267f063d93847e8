//! Reviews from the page's repeated structure, for pages whose structured
//! data has none (or fewer than the page shows): sibling elements that one
//! class marks as a review (`review`, `review-item`, `reviewCard`,
//! `R-ReviewsList__item`, `data-review-id`, …), the group with the most
//! members that read as reviews; in each, the parts a review widget names
//! by class (`…rating…`/`…stars…`, `…author…`, `…date…`/`<time>`,
//! `…title…`, `…body…`/`…text…`, `…verified…`).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use scraper::{ElementRef, Html};

use crate::strategy::locale::Locale;
use crate::strategy::structured::{Rating, Review, values};
use crate::strategy::text::SHOWN;

/// Elements looked at on a page, and inside one review.
const MAX_ELEMENTS: usize = 100_000;
const MAX_PARTS: usize = 2_000;
/// Reviews read from one page, and groups of candidates read.
pub const MAX_REVIEWS: usize = 200;
const MAX_GROUPS: usize = 32;
/// A part's text kept, in bytes, and all the text one page's reading may
/// copy (a hostile page nests parts in parts around megabytes of text).
const MAX_TEXT: usize = 8 * 1024;
const PAGE_TEXT: usize = 4 * 1024 * 1024;

/// Words that make a class a part of a review, or the list around them.
const PARTS: &[&str] = &[
    "author",
    "date",
    "time",
    "rating",
    "star",
    "score",
    "title",
    "head",
    "body",
    "text",
    "content",
    "helpful",
    "vote",
    "count",
    "total",
    "summary",
    "form",
    "write",
    "button",
    "btn",
    "link",
    "nav",
    "pag",
    "image",
    "img",
    "photo",
    "media",
    "filter",
    "sort",
    "tab",
    "list",
    "histogram",
    "breakdown",
    "snippet",
    "meta",
    "footer",
    "action",
    "repl",
    "respon",
    "avatar",
    "badge",
    "icon",
    "verified",
    "location",
    "source",
    "stat",
    "bar",
    "search",
    "empty",
    "more",
];

/// Item classes of widespread review widgets that do not say "review".
const KNOWN_ITEMS: &[&str] = &["jdgm-rev"];

/// The token that marks `e` as one review, if one does.
fn review_token(e: &ElementRef<'_>) -> Option<String> {
    let v = e.value();
    if v.attr("data-review-id").is_some() {
        return Some("[data-review-id]".into());
    }
    if let Some(c) = v.classes().find(|c| is_item_class(c)) {
        return Some(c.to_ascii_lowercase());
    }
    // A numbered id (`review-1234`): its letters mark the group.
    let id = v.id()?;
    let letters = id.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '_');
    (letters.len() < id.len() && is_item_class(letters))
        .then(|| format!("#{}", letters.to_ascii_lowercase()))
}

/// Where "review" starts a word of `c` (`yotpo-review`, `productReview`,
/// `R-ReviewsList`), not inside one (`preview`).
fn review_word(c: &str) -> Option<usize> {
    let lower = c.to_ascii_lowercase();
    lower.match_indices("review").map(|(at, _)| at).find(|&at| {
        let before = c[..at].chars().next_back();
        let first = c[at..].chars().next();
        before.is_none_or(|b| !b.is_ascii_alphanumeric())
            || (first.is_some_and(|f| f.is_ascii_uppercase())
                && before.is_some_and(|b| b.is_ascii_lowercase()))
    })
}

/// Whether a class names one review (not a part of it, not the list of
/// them, not its writer).
fn is_item_class(c: &str) -> bool {
    let lower = c.to_ascii_lowercase();
    if KNOWN_ITEMS.contains(&lower.as_str()) {
        return true;
    }
    let has_part = |s: &str| PARTS.iter().any(|p| s.contains(p));
    // A BEM element (`block__element`): the element says what it is.
    let (block, element) = match c.rsplit_once("__") {
        Some((b, e)) => (b, Some(e)),
        None => (c, None),
    };
    match element {
        Some(el) if review_word(el).is_none() => {
            review_word(block).is_some() && !has_part(&el.to_ascii_lowercase())
        }
        _ => {
            let tail = element.unwrap_or(block);
            let Some(at) = review_word(tail) else {
                return false;
            };
            let rest = tail[at + "review".len()..].to_ascii_lowercase();
            !rest.starts_with('s') && !rest.starts_with("er") && !has_part(&rest)
        }
    }
}

/// The reviews the page shows as repeated structure, in page order: the
/// elements one token marks as a review, anywhere on the page (each may
/// be wrapped in an element of its own), the group with the most members
/// that read as reviews.
pub fn reviews(html: &Html, locale: &Locale) -> Vec<Review> {
    let mut groups: HashMap<(String, String), Vec<ElementRef<'_>>> = HashMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for e in html
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
        .take(MAX_ELEMENTS)
    {
        let Some(token) = review_token(&e) else {
            continue;
        };
        let key = (e.value().name().to_string(), token);
        let members = groups.entry(key.clone()).or_default();
        if members.is_empty() {
            if order.len() >= MAX_GROUPS {
                continue;
            }
            order.push(key);
        }
        // A member inside another member of its group is a part of it.
        let inside = |m: &ElementRef<'_>| e.ancestors().any(|a| a.id() == m.id());
        if members.len() < MAX_REVIEWS && !members.iter().rev().take(4).any(inside) {
            members.push(e);
        }
    }
    let mut budget = PAGE_TEXT;
    let mut best: Vec<Review> = Vec::new();
    for key in order {
        let members = &groups[&key];
        let read: Vec<Review> = (members.iter())
            .map(|m| read_one(*m, locale, &mut budget))
            .collect();
        let whole = read
            .iter()
            .filter(|r| r.body.is_some() && (r.rating.is_some() || r.author.is_some()))
            .count();
        // Most members read as reviews: the group is the list.
        if whole * 2 >= read.len() && whole > best.len() {
            best = read
                .into_iter()
                .filter(|r| r.body.is_some() || r.rating.is_some())
                .collect();
        }
    }
    best
}

/// What one part of a review is, by its class, `itemprop` and tag.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    Rating,
    Author,
    Date,
    Title,
    Body,
    Verified,
}

fn part_of(e: &ElementRef<'_>) -> Option<Part> {
    let v = e.value();
    if v.name() == "time" {
        return Some(Part::Date);
    }
    if ["data-rating", "data-score", "data-stars"]
        .iter()
        .any(|a| v.attr(a).is_some())
    {
        return Some(Part::Rating);
    }
    let names = format!(
        "{} {}",
        v.attr("class").unwrap_or_default(),
        v.attr("itemprop").unwrap_or_default()
    )
    .to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| names.contains(w));
    if has(&["verified"]) {
        Some(Part::Verified)
    } else if has(&["rating", "stars", "star-", "score"]) && !has(&["count", "total"]) {
        Some(Part::Rating)
    } else if has(&[
        "author",
        "reviewer",
        "username",
        "user-name",
        "nickname",
        "byline",
        "customer-name",
    ]) {
        Some(Part::Author)
    } else if has(&["date", "time"]) {
        Some(Part::Date)
    } else if has(&["title", "headline", "heading"]) {
        Some(Part::Title)
    } else if has(&[
        "body",
        "text",
        "content",
        "description",
        "comment",
        "message",
    ]) {
        Some(Part::Body)
    } else {
        match v.name() {
            "h2" | "h3" | "h4" | "h5" | "h6" => Some(Part::Title),
            _ => None,
        }
    }
}

static OUT_OF: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(\d+(?:[.,]\d+)?)\s*(?:/|out of|of|von|sur|de|di|van|z|из)\s*(\d+(?:[.,]\d+)?)",
    )
    .ok()
});
static ISO_DATE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(\d{4}-\d{2}-\d{2})\b").ok());

/// A rating as a widget writes it: `4 out of 5`, `4/5`, `Rated 4.5`, an
/// attribute (`data-rating`, `aria-label`, `title`, `content`) or the text.
fn rating(e: &ElementRef<'_>, text: &str, locale: &Locale) -> Option<Rating> {
    let v = e.value();
    let said = [
        "data-rating",
        "data-score",
        "data-stars",
        "aria-label",
        "title",
        "content",
    ]
    .iter()
    .filter_map(|a| v.attr(a))
    .chain(std::iter::once(text));
    for s in said {
        let n = |t: &str| values::number(&t.replace(',', "."));
        if let Some(c) = OUT_OF.as_ref().and_then(|r| r.captures(s))
            && let (Some(value), Some(best)) = (n(&c[1]), n(&c[2]))
            && let Some(r) = Rating::new(value, Some(best), None)
        {
            return Some(r);
        }
        if let Some(value) = locale.number(s).filter(|x| *x <= 5.0)
            && let Some(r) = Rating::new(value, None, None)
        {
            return Some(r);
        }
    }
    None
}

fn date(e: &ElementRef<'_>, text: &str, locale: &Locale) -> Option<String> {
    if let Some(d) = e
        .value()
        .attr("datetime")
        .and_then(|d| values::date(d, locale))
    {
        return Some(d);
    }
    ISO_DATE
        .as_ref()
        .and_then(|r| r.captures(text))
        .and_then(|c| values::date(&c[1], locale))
        .or_else(|| locale.date(text))
}

/// An author's name without the "By" a widget writes before it.
fn author(text: &str) -> Option<String> {
    let t = text.trim().trim_end_matches([':', '–', '-', '|']).trim();
    let t = [
        "By ", "by ", "Von ", "von ", "Par ", "par ", "Por ", "por ", "Door ", "door ",
    ]
    .iter()
    .find_map(|p| t.strip_prefix(p))
    .unwrap_or(t)
    .trim();
    (!t.is_empty() && t.len() <= 120).then(|| t.to_string())
}

/// The visible text of `e`, at most [`MAX_TEXT`] bytes and no more than
/// the page's `budget` has left.
fn text_of(e: ElementRef<'_>, budget: &mut usize) -> String {
    let text = SHOWN.text_upto(e, MAX_TEXT.min(*budget));
    *budget = budget.saturating_sub(text.len().max(1));
    text
}

/// Body candidates (and plain paragraphs) one review keeps, to read the
/// innermost.
const MAX_BODIES: usize = 64;

/// One review's parts: each part read once, nothing inside a read part
/// read again, within the page's text budget. A body is the innermost of
/// the elements named like one (a `comment_container` holds the rating and
/// the author too; its `description` is the text), else the longest plain
/// paragraph.
fn read_one(member: ElementRef<'_>, locale: &Locale, budget: &mut usize) -> Review {
    let mut r = Review::default();
    let mut bodies: Vec<ElementRef<'_>> = Vec::new();
    let mut paragraphs: Vec<ElementRef<'_>> = Vec::new();
    let mut stack: Vec<ElementRef<'_>> = member
        .children()
        .filter_map(ElementRef::wrap)
        .rev()
        .collect();
    let mut looked = 0;
    while let Some(e) = stack.pop() {
        looked += 1;
        if looked > MAX_PARTS || *budget == 0 {
            break;
        }
        if SHOWN.hides(e) {
            continue;
        }
        let read = match part_of(&e) {
            Some(Part::Rating) if r.rating.is_none() => {
                r.rating = rating(&e, &text_of(e, budget), locale);
                true
            }
            Some(Part::Author) if r.author.is_none() => {
                r.author = author(&text_of(e, budget));
                true
            }
            Some(Part::Date) if r.date.is_none() => {
                let t = text_of(e, budget);
                r.date = date(&e, &t, locale);
                if r.date.is_none() && !t.is_empty() {
                    r.date_text = Some(t);
                }
                true
            }
            Some(Part::Title) if r.title.is_none() => {
                r.title = Some(text_of(e, budget)).filter(|t| !t.is_empty());
                true
            }
            Some(Part::Verified) => {
                r.verified = Some(true);
                true
            }
            Some(Part::Body) => {
                if bodies.len() < MAX_BODIES {
                    bodies.push(e);
                }
                false
            }
            _ if e.value().name() == "p" => {
                if paragraphs.len() < MAX_BODIES {
                    paragraphs.push(e);
                }
                false
            }
            _ => false,
        };
        if !read {
            stack.extend(e.children().filter_map(ElementRef::wrap).rev());
        }
    }
    r.body = longest(&innermost(&bodies), budget).or_else(|| longest(&paragraphs, budget));
    if r.body.is_some() && r.body == r.title {
        r.title = None;
    }
    r
}

/// The elements of `found` (in document order) with none of the others
/// inside them.
fn innermost<'a>(found: &[ElementRef<'a>]) -> Vec<ElementRef<'a>> {
    (found.iter().enumerate())
        .filter(|(i, c)| {
            !found[i + 1..]
                .iter()
                .any(|later| later.ancestors().any(|a| a.id() == c.id()))
        })
        .map(|(_, c)| *c)
        .collect()
}

/// The longest text among `elements`, within the budget.
fn longest(elements: &[ElementRef<'_>], budget: &mut usize) -> Option<String> {
    (elements.iter())
        .map(|e| text_of(*e, budget))
        .filter(|t| !t.is_empty())
        .max_by_key(String::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_classes_and_parts() {
        for item in [
            "review",
            "review-item",
            "reviewcard",
            "yotpo-review",
            "r-reviewslist__item",
            "jdgm-rev",
            "review-container",
            "productReview",
            "R-ReviewsList__item",
        ] {
            assert!(is_item_class(item), "{item}");
        }
        for not in [
            "reviews",
            "review-author",
            "review-rating",
            "review-list",
            "reviews__header",
            "preview-image",
            "review-body",
            "write-review-button",
            "preview",
            "product-preview",
            "reviewer-name",
        ] {
            assert!(!is_item_class(not), "{not}");
        }
    }

    #[test]
    fn a_widgets_reviews_read_from_their_parts() {
        let page = r#"<html><body><h1>Kettle</h1>
          <div class="reviews">
            <article class="review-card even" id="review-11">
              <div class="stars" aria-label="4 out of 5 stars"></div>
              <span class="reviewer">By Ann</span> <time datetime="2025-03-02">2 March</time>
              <h3>Boils fast</h3><p class="review-text">Quick and quiet.</p>
              <span class="verified-buyer">Verified Buyer</span>
            </article>
            <article class="review-card odd" id="review-12">
              <div class="stars" data-rating="2"></div>
              <span class="reviewer">Ben</span> <span class="review-date">Posted 2025-01-20</span>
              <p>The lid rattles.</p>
            </article>
          </div>
          <div class="review-summary">4.1 out of 5</div>
        </body></html>"#;
        let html = Html::parse_document(page);
        let got = reviews(&html, &Locale::default());
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].author.as_deref(), Some("Ann"));
        assert_eq!(got[0].rating.map(|r| r.stars), Some(4.0));
        assert_eq!(got[0].date.as_deref(), Some("2025-03-02"));
        assert_eq!(got[0].title.as_deref(), Some("Boils fast"));
        assert_eq!(got[0].body.as_deref(), Some("Quick and quiet."));
        assert_eq!(got[0].verified, Some(true));
        assert_eq!(got[1].rating.map(|r| r.stars), Some(2.0));
        assert_eq!(got[1].date.as_deref(), Some("2025-01-20"));
        assert_eq!(got[1].body.as_deref(), Some("The lid rattles."));
        assert_eq!(got[1].verified, None);
    }

    #[test]
    fn a_page_without_repeated_reviews_gives_none() {
        let html = Html::parse_document(
            "<div class=\"reviews\"><p>No reviews yet.</p></div><div class=\"review-form\"><textarea></textarea></div>",
        );
        assert!(reviews(&html, &Locale::default()).is_empty());
    }

    #[test]
    fn reviews_wrapped_each_in_its_own_element_are_one_list() {
        let one = |n: u32| {
            format!(
                "<li class=\"slot\"><div class=\"review\"><span class=\"rating\">{n}/5</span>\
                 <span class=\"author\">R{n}</span><p class=\"text\">Text {n}.</p></div></li>"
            )
        };
        let html = Html::parse_document(&format!("<ul>{}{}{}</ul>", one(3), one(4), one(5)));
        let got = reviews(&html, &Locale::default());
        let authors: Vec<_> = got.iter().filter_map(|r| r.author.as_deref()).collect();
        assert_eq!(authors, ["R3", "R4", "R5"]);
    }

    #[test]
    fn a_hostile_page_is_read_within_the_text_budget() {
        // Parts nested in parts around a large text, in nested reviews.
        let big = "word ".repeat(200_000);
        let mut page = big.clone();
        for _ in 0..300 {
            page = format!("<div class=\"review-text\">{page}</div>");
        }
        for _ in 0..50 {
            page = format!("<div class=\"review\"><span class=\"stars\">4/5</span>{page}</div>");
        }
        let html = Html::parse_document(&page);
        let mut budget = PAGE_TEXT;
        let first = html
            .select(&scraper::Selector::parse(".review").expect("selector"))
            .next()
            .expect("a review");
        let r = read_one(first, &Locale::default(), &mut budget);
        assert!(
            r.body.as_ref().is_some_and(|b| b.len() <= MAX_TEXT),
            "{:?}",
            r.body.map(|b| b.len())
        );
        assert!(
            PAGE_TEXT - budget <= 2 * MAX_TEXT,
            "{} bytes read",
            PAGE_TEXT - budget
        );
        let got = reviews(&html, &Locale::default());
        assert_eq!(got.len(), 1, "nested reviews are one");
    }
}
