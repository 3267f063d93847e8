//! The generic strategy's answers from one page: its reviews, its product,
//! each saying where it came from (`source`), and where the structured
//! data and what a person sees disagree (`disagreements`).

use std::sync::LazyLock;

use regex::Regex;
use scraper::{ElementRef, Html, Selector};
use serde_json::{Map, Value, json};

use super::{next, repeated};
use crate::strategy::extract::Extracted;
use crate::strategy::locale::Locale;
use crate::strategy::structured::{self, Found, Product, Rating, Review, Source};
use crate::strategy::text::SHOWN;

/// Whose value a product's answer takes where structured data and the
/// visible page disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trust {
    #[default]
    Structured,
    Page,
}

impl Trust {
    /// `trust` as a caller writes it.
    pub fn parse(s: &str) -> Option<Trust> {
        match s {
            "structured" => Some(Trust::Structured),
            "page" => Some(Trust::Page),
            _ => None,
        }
    }
}

/// One page, read once: its structured data and its language.
pub struct Page<'a> {
    html: &'a Html,
    url: &'a url::Url,
    locale: Locale,
    found: Found,
}

impl<'a> Page<'a> {
    pub fn read(html: &'a Html, url: &'a url::Url) -> Page<'a> {
        let locale = structured::values::page_locale(html).unwrap_or_default();
        let found = structured::read(html, Some(url), &locale);
        Page {
            html,
            url,
            locale,
            found,
        }
    }

    /// The reviews the page carries: the structured data's (its main
    /// product's, else those standing alone), or the page's repeated
    /// structure where that shows more; and where the list continues.
    pub fn reviews(&self) -> Result<Extracted, String> {
        let main = self.found.main_product();
        let mut list: Vec<(Source, &Review)> = match main {
            Some(p) if !p.reviews.is_empty() => {
                let source = p.source.unwrap_or(Source::JsonLd);
                p.reviews.iter().map(|r| (source, r)).collect()
            }
            _ => self.found.reviews.iter().map(|(s, r)| (*s, r)).collect(),
        };
        let shown = repeated::reviews(self.html, &self.locale);
        if shown.len() > list.len() {
            list = shown.iter().map(|r| (Source::Page, r)).collect();
        }
        let counted = main.and_then(|p| p.rating.as_ref()).and_then(|r| r.reviews);
        if list.is_empty() {
            return match (counted, main) {
                (Some(n), _) if n > 0 => Err(format!(
                    "the page's structured data counts {n} reviews but the page shows none \
                     (loaded by script?)"
                )),
                (_, Some(_)) => Ok(Extracted {
                    empty: true,
                    ..Extracted::default()
                }),
                (_, None) => Err("no reviews and no product on the page".into()),
            };
        }
        let summary_url = main
            .and_then(|p| p.rating.as_ref())
            .and_then(|r| r.url.as_deref());
        let next_url = next::find(self.html, self.url, summary_url).map(String::from);
        let items = list
            .into_iter()
            .take(repeated::MAX_REVIEWS)
            .map(|(source, r)| review_item(source, r))
            .collect();
        Ok(Extracted {
            items,
            has_more: next_url.is_some(),
            next_url,
            ..Extracted::default()
        })
    }

    /// The page's product: its structured data's main product, else what
    /// the visible page and its Open Graph tags say; with what the visible
    /// page disagrees on.
    pub fn product(&self, trust: Trust) -> Result<Extracted, String> {
        let main = self.found.main_product();
        let mut item = match main {
            Some(p) => product_item(p),
            None => self.product_shown()?,
        };
        if item.get("source").and_then(Value::as_str) != Some(Source::Page.name()) {
            let disagreements = self.disagreements(main, &item);
            if !disagreements.is_empty() {
                if trust == Trust::Page {
                    for d in &disagreements {
                        if let (Some(field), Some(v)) = (d["field"].as_str(), d.get("page")) {
                            item.insert(field.into(), v.clone());
                        }
                    }
                    item.insert("trusted".into(), json!("page"));
                }
                item.insert("disagreements".into(), Value::Array(disagreements));
            }
        }
        if !self.found.breadcrumbs.is_empty() {
            let names: Vec<&str> = (self.found.breadcrumbs.iter())
                .map(|c| c.name.as_str())
                .collect();
            item.insert("breadcrumbs".into(), json!(names));
        }
        Ok(Extracted {
            items: vec![item],
            ..Extracted::default()
        })
    }

    /// A product from the visible page alone (no structured data).
    fn product_shown(&self) -> Result<Map<String, Value>, String> {
        let meta = |prop: &str| meta_content(self.html, prop);
        let name = meta("og:title").or_else(|| first_text(self.html, &H1));
        let Some(name) = name else {
            return Err("no product on the page (no structured data, no title)".into());
        };
        let mut item = Map::new();
        item.insert("name".into(), json!(name));
        let price = meta("product:price:amount")
            .or_else(|| meta("og:price:amount"))
            .and_then(|p| structured::values::number(&p))
            .or_else(|| self.prices_shown().first().copied());
        put(&mut item, "price", price.map(|p| json!(p)));
        let currency = meta("product:price:currency").or_else(|| meta("og:price:currency"));
        put(
            &mut item,
            "currency",
            currency.map(|c| json!(c.to_ascii_uppercase())),
        );
        if let Some(img) =
            meta("og:image").and_then(|u| structured::values::url(&u, Some(self.url)))
        {
            item.insert("images".into(), json!([img]));
        }
        item.insert("source".into(), json!(Source::Page.name()));
        Ok(item)
    }

    /// Where the visible page says otherwise than the structured data:
    /// a price no price shown matches (nor lies in an offered range), a
    /// review count no count shown does.
    fn disagreements(&self, p: Option<&Product>, item: &Map<String, Value>) -> Vec<Value> {
        let mut out = Vec::new();
        if let Some(price) = item.get("price").and_then(Value::as_f64) {
            let offers = p.map(|p| p.offers.as_slice()).unwrap_or_default();
            let offered = |s: f64| {
                let near = |v: Option<f64>| v.is_some_and(|v| (s - v).abs() < 0.005);
                near(Some(price))
                    || offers.iter().any(|o| {
                        near(o.price)
                            || near(o.low)
                            || near(o.high)
                            || (o.low.zip(o.high)).is_some_and(|(l, h)| l <= s && s <= h)
                    })
            };
            let shown = self.prices_shown();
            if !shown.is_empty() && !shown.iter().any(|s| offered(*s)) {
                out.push(json!({"field": "price", "structured": price, "page": shown[0]}));
            }
        }
        let counts: Vec<u64> = ["review_count", "ratings"]
            .iter()
            .filter_map(|k| item.get(*k).and_then(Value::as_u64))
            .collect();
        if let Some(first) = counts.first() {
            let shown = self.counts_shown();
            if !shown.is_empty() && !shown.iter().any(|s| counts.contains(s)) {
                let field = if item.contains_key("review_count") {
                    "review_count"
                } else {
                    "ratings"
                };
                out.push(json!({"field": field, "structured": first, "page": shown[0]}));
            }
        }
        out
    }

    /// Prices a person sees: the text of the outermost elements a shop's
    /// markup calls a price and that read as one short price (a split
    /// `24`/`.99` or a currency symbol inside is part of it), not inside a
    /// crossed-out price, nor named as an old, unit or list price; read in
    /// the page's language where machine form is ambiguous.
    fn prices_shown(&self) -> Vec<f64> {
        let Some(sel) = PRICE.as_ref() else {
            return Vec::new();
        };
        let mut taken: Vec<ElementRef<'_>> = Vec::new();
        let mut out = Vec::new();
        for e in self.html.select(sel).take(MAX_LOOKS) {
            let within = |t: &ElementRef<'_>| e.ancestors().any(|a| a.id() == t.id());
            if taken.iter().rev().take(8).any(within) || not_the_price(e) {
                continue;
            }
            let text = SHOWN.text_upto(e, 41);
            if text.len() > 40 || !text.chars().any(|c| c.is_ascii_digit()) {
                continue;
            }
            taken.push(e);
            if let Some(n) = structured::values::shown_number(&text, &self.locale) {
                out.push(n);
            }
        }
        out
    }

    /// Review and rating counts a person sees ("1,204 reviews", "87 ratings").
    fn counts_shown(&self) -> Vec<u64> {
        let (Some(re), Some(body)) = (COUNT.as_ref(), BODY.as_ref()) else {
            return Vec::new();
        };
        let Some(body) = self.html.select(body).next() else {
            return Vec::new();
        };
        let text = SHOWN.text_upto(body, COUNT_TEXT);
        re.captures_iter(&text)
            .take(MAX_LOOKS)
            .filter_map(|c| c.get(1).or_else(|| c.get(2)))
            .filter_map(|m| self.locale.whole_number(m.as_str()))
            .filter(|n| *n >= 0.0 && n.fract() == 0.0)
            .map(|n| n as u64)
            .collect()
    }
}

/// Elements looked at for visible prices and counts, and the page's text
/// searched for counts.
const MAX_LOOKS: usize = 500;
const COUNT_TEXT: usize = 512 * 1024;

static PRICE: LazyLock<Option<Selector>> =
    LazyLock::new(|| Selector::parse("[class*=price i], [id*=price i], [itemprop=price]").ok());
/// Words that start a name of a price that is not the one to pay.
const NOT_THE_PRICE: &[&str] = &[
    "old", "was", "strike", "compare", "regular", "original", "list", "save", "unit", "per",
    "before", "rrp", "msrp", "uvp",
];

/// Whether `e` is a price not to pay: crossed out (inside `<del>`, `<s>`,
/// `<strike>`), in the page's header, navigation or footer, hidden, or
/// named so (`old-price`, `oldPrice`, `price--was`).
fn not_the_price(e: ElementRef<'_>) -> bool {
    let named = |v: &scraper::node::Element| {
        let names = format!(
            "{} {}",
            v.attr("class").unwrap_or_default(),
            v.attr("id").unwrap_or_default()
        );
        // Words by separator and by case (`oldPrice` is `old`, `Price`).
        let mut words: Vec<String> = Vec::new();
        for token in names.split(|c: char| !c.is_ascii_alphanumeric()) {
            let mut word = String::new();
            for c in token.chars() {
                if c.is_ascii_uppercase() && !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                word.push(c.to_ascii_lowercase());
            }
            words.push(word);
        }
        words.iter().any(|w| {
            NOT_THE_PRICE
                .iter()
                .any(|n| w.starts_with(n) && w.len() <= n.len() + 1)
        })
    };
    named(e.value())
        || std::iter::successors(Some(e), |n| n.parent().and_then(ElementRef::wrap))
            // Crossed out, hidden, or the page's furniture (a header's
            // cart total, a footer's free-shipping threshold).
            .any(|a| {
                matches!(
                    a.value().name(),
                    "del" | "s" | "strike" | "header" | "nav" | "footer"
                ) || SHOWN.hides(a)
            })
}
static H1: LazyLock<Option<Selector>> = LazyLock::new(|| Selector::parse("h1").ok());
static BODY: LazyLock<Option<Selector>> = LazyLock::new(|| Selector::parse("body").ok());
static COUNT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(\d{1,3}(?:[.,\u{a0}\u{202f}]\d{3})+|\d+)\s*(?:customer\s+|global\s+)?(?:reviews?|ratings?|bewertungen|rezensionen|avis|évaluations|reseñas|valoraciones|opiniones|recensioni|beoordelingen|recenzj[ie]|omdömen)\b|(?:reviews?|ratings?|bewertungen|avis|reseñas|recensioni)\s*\((\d{1,3}(?:[.,\u{a0}\u{202f}]\d{3})+|\d+)\)",
    )
    .ok()
});

fn meta_content(html: &Html, property: &str) -> Option<String> {
    let sel = Selector::parse(&format!(
        "meta[property=\"{property}\"], meta[name=\"{property}\"]"
    ))
    .ok()?;
    let v = html.select(&sel).next()?.value().attr("content")?;
    let v = structured::values::plain(v, 1024);
    (!v.is_empty()).then_some(v)
}

fn first_text(html: &Html, sel: &LazyLock<Option<Selector>>) -> Option<String> {
    let t = SHOWN.text_upto(html.select(sel.as_ref()?).next()?, 1024);
    (!t.is_empty()).then_some(t)
}

fn put(item: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        item.insert(key.into(), v);
    }
}

/// A rating on 0–5, and its own scale when that is not 1–5.
fn put_rating(item: &mut Map<String, Value>, key: &str, r: Option<&Rating>) {
    let Some(r) = r else {
        return;
    };
    item.insert(key.into(), json!(r.stars));
    if r.best != 5.0 {
        item.insert(
            format!("{key}_scale"),
            json!({"value": r.value, "best": r.best, "worst": r.worst}),
        );
    }
}

fn review_item(source: Source, r: &Review) -> Map<String, Value> {
    let mut item = Map::new();
    put(&mut item, "author", r.author.as_ref().map(|a| json!(a)));
    put_rating(&mut item, "rating", r.rating.as_ref());
    put(&mut item, "date", r.date.as_ref().map(|d| json!(d)));
    put(
        &mut item,
        "date_text",
        r.date_text.as_ref().map(|d| json!(d)),
    );
    put(&mut item, "title", r.title.as_ref().map(|t| json!(t)));
    put(&mut item, "body", r.body.as_ref().map(|b| json!(b)));
    put(&mut item, "verified", r.verified.map(|v| json!(v)));
    item.insert("source".into(), json!(source.name()));
    item
}

fn product_item(p: &Product) -> Map<String, Value> {
    let mut item = Map::new();
    item.insert("kind".into(), json!(p.kind));
    let text = |v: &Option<String>| v.as_ref().map(|t| json!(t));
    put(&mut item, "name", text(&p.name));
    put(&mut item, "brand", text(&p.brand));
    put(&mut item, "sku", text(&p.sku));
    put(&mut item, "gtin", text(&p.gtin));
    put(&mut item, "mpn", text(&p.mpn));
    put(&mut item, "url", text(&p.url));
    // The first offer with a price is the one to pay; a range stays a range.
    let offer = (p.offers.iter())
        .find(|o| o.price.is_some())
        .or(p.offers.first());
    if let Some(o) = offer {
        put(&mut item, "price", o.price.or(o.low).map(|v| json!(v)));
        put(&mut item, "low_price", o.low.map(|v| json!(v)));
        put(&mut item, "high_price", o.high.map(|v| json!(v)));
        put(&mut item, "currency", text(&o.currency));
        put(&mut item, "availability", text(&o.availability));
        put(&mut item, "seller", text(&o.seller));
    }
    if let Some(r) = &p.rating {
        put_rating(&mut item, "rating", r.rating.as_ref());
        put(&mut item, "ratings", r.ratings.map(|n| json!(n)));
        put(&mut item, "review_count", r.reviews.map(|n| json!(n)));
    }
    if !p.images.is_empty() {
        item.insert("images".into(), json!(p.images));
    }
    let source = p.source.unwrap_or(Source::JsonLd);
    item.insert("source".into(), json!(source.name()));
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(html: &str) -> (Html, url::Url) {
        (
            Html::parse_document(html),
            url::Url::parse("https://shop.test/p/kettle").expect("url"),
        )
    }

    const LD: &str = r#"<script type="application/ld+json">{"@context":"https://schema.org","@type":"Product",
      "name":"Kettle","sku":"K1","offers":{"@type":"Offer","price":"24.00","priceCurrency":"USD"},
      "aggregateRating":{"@type":"AggregateRating","ratingValue":"4.2","reviewCount":"12"}}</script>"#;

    #[test]
    fn a_price_and_a_count_the_page_shows_otherwise_are_disagreements() {
        let (html, url) = page(&format!(
            "<html><body>{LD}<h1>Kettle</h1><div><span class=\"price\">$19.00</span>\
             <s class=\"old-price\">$24.00</s></div><p><a>15 reviews</a></p></body></html>"
        ));
        let p = Page::read(&html, &url);
        let item = &p.product(Trust::Structured).expect("product").items[0];
        assert_eq!(item["price"], json!(24.0));
        assert_eq!(item["source"], json!("json-ld"));
        let d = item["disagreements"].as_array().expect("disagreements");
        assert_eq!(
            d[0],
            json!({"field": "price", "structured": 24.0, "page": 19.0})
        );
        assert_eq!(
            d[1],
            json!({"field": "review_count", "structured": 12, "page": 15})
        );
        let trusted = &p.product(Trust::Page).expect("product").items[0];
        assert_eq!(trusted["price"], json!(19.0));
        assert_eq!(trusted["review_count"], json!(15));
        assert_eq!(trusted["trusted"], json!("page"));
    }

    #[test]
    fn agreeing_pages_say_nothing() {
        let (html, url) = page(&format!(
            "<html lang=\"de\"><body>{LD}<span class=\"price\">24,00 €</span><a>12 Bewertungen</a></body></html>"
        ));
        let item = &Page::read(&html, &url)
            .product(Trust::Structured)
            .expect("product")
            .items[0];
        assert!(item.get("disagreements").is_none(), "{item:?}");
    }

    #[test]
    fn reviews_the_structured_data_promises_and_the_page_lacks_go_on_to_the_browser() {
        let (html, url) = page(&format!(
            "<html><body>{LD}<div id=\"reviews\"></div></body></html>"
        ));
        let err = Page::read(&html, &url).reviews().expect_err("none shown");
        assert!(err.contains("counts 12 reviews"), "{err}");
        // A product with no reviews is an empty page, not a failure.
        let none = LD.replace(",\"reviewCount\":\"12\"", "");
        let (html, url) = page(&format!("<html><body>{none}</body></html>"));
        assert!(Page::read(&html, &url).reviews().expect("empty").empty);
    }

    #[test]
    fn a_page_without_structured_data_still_gives_its_product() {
        let (html, url) = page(
            "<html><head><meta property=\"og:title\" content=\"Blue kettle\">\
             <meta property=\"product:price:amount\" content=\"31.50\">\
             <meta property=\"product:price:currency\" content=\"eur\"></head><body><h1>x</h1></body></html>",
        );
        let item = &Page::read(&html, &url)
            .product(Trust::Structured)
            .expect("product")
            .items[0];
        assert_eq!(item["name"], json!("Blue kettle"));
        assert_eq!(item["price"], json!(31.5));
        assert_eq!(item["currency"], json!("EUR"));
        assert_eq!(item["source"], json!("page"));
    }
}
