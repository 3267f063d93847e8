//! Reviews from the page's repeated structure, for pages whose structured
//! data has none (or fewer than the page shows): sibling elements that one
//! class marks as a review (`review`, `review-item`, `reviewCard`,
//! `R-ReviewsList__item`, `data-review-id`, …), the group with the most
//! members that read as reviews; in each, the parts a review widget names
//! by class (`…rating…`/`…stars…`, `…author…`, `…date…`/`<time>`,
//! `…title…`, `…body…`/`…text…`, `…verified…`).

use std::collections::HashMap;
use std::sync::LazyLock;

use ego_tree::NodeId;
use regex::Regex;
use scraper::{ElementRef, Html};

use crate::strategy::locale::Locale;
use crate::strategy::structured::{Rating, Review, values};
use crate::strategy::text::Visibility;

/// Elements looked at on a page, and inside one review.
const MAX_ELEMENTS: usize = 100_000;
const MAX_PARTS: usize = 2_000;
/// Reviews read from one page.
pub const MAX_REVIEWS: usize = 200;
/// A part's text kept, in bytes.
const MAX_TEXT: usize = 8 * 1024;

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
    let from_class = v.classes().find_map(|c| {
        let lower = c.to_ascii_lowercase();
        is_item_class(&lower).then_some(lower)
    });
    if from_class.is_some() {
        return from_class;
    }
    // A numbered id (`review-1234`): its letters mark the group.
    let id = v.id()?.to_ascii_lowercase();
    let letters = id.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '_');
    (letters.len() < id.len() && is_item_class(letters)).then(|| format!("#{letters}"))
}

/// Whether a lower-case class names one review (not a part of it, not the
/// list of them).
fn is_item_class(c: &str) -> bool {
    if KNOWN_ITEMS.contains(&c) {
        return true;
    }
    // A BEM element (`block__element`): the element says what it is.
    let (block, element) = match c.rsplit_once("__") {
        Some((b, e)) => (b, Some(e)),
        None => (c, None),
    };
    let has_part = |s: &str| PARTS.iter().any(|p| s.contains(p));
    match element {
        Some(el) if !el.contains("review") => block.contains("review") && !has_part(el),
        _ => {
            let tail = element.unwrap_or(block);
            let Some(at) = tail.rfind("review") else {
                return false;
            };
            let rest = &tail[at + "review".len()..];
            !rest.starts_with('s') && !has_part(rest)
        }
    }
}

/// The reviews the page shows as repeated structure, in page order.
pub fn reviews(html: &Html, locale: &Locale) -> Vec<Review> {
    let mut groups: HashMap<(NodeId, String, String), Vec<ElementRef<'_>>> = HashMap::new();
    let mut order: Vec<(NodeId, String, String)> = Vec::new();
    for e in html
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
        .take(MAX_ELEMENTS)
    {
        let Some(token) = review_token(&e) else {
            continue;
        };
        let Some(parent) = e.parent() else {
            continue;
        };
        let key = (parent.id(), e.value().name().to_string(), token);
        let members = groups.entry(key.clone()).or_default();
        if members.is_empty() {
            order.push(key);
        }
        if members.len() < MAX_REVIEWS {
            members.push(e);
        }
    }
    let mut best: Vec<Review> = Vec::new();
    for key in order {
        let members = &groups[&key];
        let read: Vec<Review> = members.iter().map(|m| read_one(*m, locale)).collect();
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
        r"(?i)(\d+(?:[.,]\d+)?)\s*(?:/|out of|of|von|sur|de|di|van|z|из|из)\s*(\d+(?:[.,]\d+)?)",
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

fn read_one(member: ElementRef<'_>, locale: &Locale) -> Review {
    let shown = Visibility {
        skip: None,
        all: false,
    };
    let mut r = Review::default();
    let mut longest_p: Option<String> = None;
    for e in member
        .descendants()
        .filter_map(ElementRef::wrap)
        .skip(1)
        .take(MAX_PARTS)
    {
        if shown.hides(e) {
            continue;
        }
        let part = part_of(&e);
        let text = || {
            let mut t = shown.text(e);
            if t.len() > MAX_TEXT {
                let mut cut = MAX_TEXT;
                while !t.is_char_boundary(cut) {
                    cut -= 1;
                }
                t.truncate(cut);
            }
            t
        };
        match part {
            Some(Part::Rating) if r.rating.is_none() => r.rating = rating(&e, &text(), locale),
            Some(Part::Author) if r.author.is_none() => r.author = author(&text()),
            Some(Part::Date) if r.date.is_none() => {
                let t = text();
                r.date = date(&e, &t, locale);
                if r.date.is_none() && !t.is_empty() {
                    r.date_text = Some(t);
                }
            }
            Some(Part::Title) if r.title.is_none() => {
                r.title = Some(text()).filter(|t| !t.is_empty());
            }
            Some(Part::Body) => {
                let t = text();
                if r.body.as_ref().is_none_or(|b| t.len() > b.len()) && !t.is_empty() {
                    r.body = Some(t);
                }
            }
            Some(Part::Verified) => r.verified = Some(true),
            _ if e.value().name() == "p" => {
                let t = text();
                if longest_p.as_ref().is_none_or(|b| t.len() > b.len()) {
                    longest_p = Some(t);
                }
            }
            _ => {}
        }
    }
    if r.body.is_none() {
        r.body = longest_p.filter(|p| !p.is_empty());
    }
    if r.body.is_some() && r.body == r.title {
        r.title = None;
    }
    r
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
}
