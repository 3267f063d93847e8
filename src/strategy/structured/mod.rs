//! Structured data in a page, read deterministically: schema.org's
//! `Product`, `Offer`/`AggregateOffer`, `AggregateRating`, `Review`,
//! `Brand`/`Organization` and `BreadcrumbList`, from JSON-LD ([`jsonld`]),
//! microdata and RDFa Lite ([`markup`]), into one typed model ([`model`]).
//!
//! A page may be hostile: every read is bounded ([`Bounds`]: a block's
//! size, the number of blocks, items, values and elements, the nesting),
//! and what a bound or a broken block left out is said in [`Found::notes`].
//! The page itself was parsed within `dom`'s bounds; callers run this off
//! the runtime threads, where they run every extraction.

mod item;
pub mod jsonld;
mod limits;
pub mod markup;
pub mod model;
pub mod values;

use serde::Serialize;

pub use item::{Item, Val};
pub use limits::{Bounds, Notes};
pub use model::{AggregateRating, Crumb, Offer, Product, Review, Source};
pub use values::Rating;

use crate::strategy::locale::Locale;

/// Everything the page's structured data says, by syntax.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Found {
    pub products: Vec<Product>,
    /// Reviews not inside a product (review sites list them on their own).
    pub reviews: Vec<(Source, Review)>,
    pub breadcrumbs: Vec<Crumb>,
    pub notes: Notes,
}

/// Read the structured data of a parsed page at `base` (relative URLs are
/// made absolute against it), whose dates are written in `locale`'s way.
pub fn read(html: &scraper::Html, base: Option<&url::Url>, locale: &Locale) -> Found {
    read_within(html, base, locale, &Bounds::default())
}

/// [`read`] within `bounds`.
pub fn read_within(
    html: &scraper::Html,
    base: Option<&url::Url>,
    locale: &Locale,
    bounds: &Bounds,
) -> Found {
    let mut found = Found::default();
    let reader = model::Reader {
        base,
        locale,
        bounds,
    };
    for (source, items) in &by_syntax(html, bounds, &mut found.notes) {
        let (products, reviews, crumbs) = reader.things(items, *source);
        found.products.extend(products);
        found
            .reviews
            .extend(reviews.into_iter().map(|r| (*source, r)));
        if found.breadcrumbs.is_empty() {
            found.breadcrumbs = crumbs;
        }
    }
    found
}

/// The page's items in every syntax, JSON-LD's first (what a strategy's
/// `ld` fields look in, with [`model::lookup`]); what was left out, noted.
pub fn items(html: &scraper::Html, bounds: &Bounds, notes: &mut Notes) -> Vec<Item> {
    by_syntax(html, bounds, notes)
        .into_iter()
        .flat_map(|(_, items)| items)
        .collect()
}

/// The page's items, syntax by syntax.
fn by_syntax(html: &scraper::Html, bounds: &Bounds, notes: &mut Notes) -> [(Source, Vec<Item>); 3] {
    [
        (Source::JsonLd, jsonld::read(html, bounds, notes)),
        (
            Source::Microdata,
            markup::read(html, markup::MICRODATA, bounds, notes),
        ),
        (
            Source::Rdfa,
            markup::read(html, markup::RDFA, bounds, notes),
        ),
    ]
}

/// Parse `text` within `dom`'s bounds and read it (the fuzz target's way in).
pub fn read_text(text: &str, base: Option<&url::Url>) -> Found {
    let parsed = crate::dom::document(text);
    let lang = values::page_locale(&parsed.html).unwrap_or_default();
    read(&parsed.html, base, &lang)
}

impl Found {
    /// The page's main product, chosen as [`model::main_item`] chooses
    /// (JSON-LD first on a tie, as the list runs).
    pub fn main_product(&self) -> Option<&Product> {
        let weight = |p: &Product| {
            model::main_weight(
                model::product_type(&p.kind),
                p.reviews.len(),
                p.rating.is_some(),
                !p.offers.is_empty(),
                p.name.is_some(),
            )
        };
        let best = self.products.iter().map(weight).max()?;
        self.products.iter().find(|p| weight(p) == best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_without_a_scale_is_on_its_summarys() {
        let page = r#"<script type="application/ld+json">{"@type":"Movie","name":"Film",
            "aggregateRating":{"ratingValue":"7.8","bestRating":"10","worstRating":"1","ratingCount":"90"},
            "review":[{"@type":"Review","reviewBody":"Fine.","reviewRating":{"ratingValue":"4"}},
                      {"@type":"Review","reviewBody":"Great.","reviewRating":{"ratingValue":"9"}},
                      {"@type":"Review","reviewBody":"Own.","reviewRating":{"ratingValue":"4","bestRating":"5"}}]}</script>"#;
        let found = read_text(page, None);
        let p = found.main_product().expect("the film");
        let stars: Vec<Option<f64>> = p
            .reviews
            .iter()
            .map(|r| r.rating.map(|r| r.stars))
            .collect();
        assert_eq!(stars, [Some(2.0), Some(4.5), Some(4.0)]);
    }

    #[test]
    fn the_same_product_in_three_syntaxes_reads_the_same() {
        let ld = r#"<script type="application/ld+json">{"@context":"https://schema.org","@type":"Product",
            "name":"Desk lamp","brand":{"@type":"Brand","name":"Acme"},"sku":"L-1",
            "offers":{"@type":"Offer","price":"19.90","priceCurrency":"eur","availability":"https://schema.org/InStock"},
            "aggregateRating":{"@type":"AggregateRating","ratingValue":"4.5","reviewCount":"2"},
            "review":[{"@type":"Review","author":{"@type":"Person","name":"Ann"},"datePublished":"2024-03-12",
              "reviewRating":{"@type":"Rating","ratingValue":4},"reviewBody":"Bright &amp; small."}]}</script>"#;
        let md = r#"<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Desk lamp</span>
            <div itemprop="brand" itemscope itemtype="https://schema.org/Brand"><span itemprop="name">Acme</span></div>
            <span itemprop="sku">L-1</span>
            <div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><span itemprop="price" content="19.90">19,90 €</span>
              <meta itemprop="priceCurrency" content="EUR"><link itemprop="availability" href="https://schema.org/InStock"></div>
            <div itemprop="aggregateRating" itemscope itemtype="https://schema.org/AggregateRating"><span itemprop="ratingValue">4.5</span>
              <span itemprop="reviewCount">2</span></div>
            <div itemprop="review" itemscope itemtype="https://schema.org/Review"><span itemprop="author">Ann</span>
              <time itemprop="datePublished" datetime="2024-03-12">12 March</time>
              <div itemprop="reviewRating" itemscope itemtype="https://schema.org/Rating"><meta itemprop="ratingValue" content="4"></div>
              <p itemprop="reviewBody">Bright &amp; small.</p></div></div>"#;
        let rdfa = md
            .replace("itemscope itemtype=\"https://schema.org/", "typeof=\"")
            .replace("itemprop=", "property=");
        let mut seen = Vec::new();
        for (page, source) in [
            (ld, Source::JsonLd),
            (md, Source::Microdata),
            (rdfa.as_str(), Source::Rdfa),
        ] {
            let found = read_text(&format!("<html><body>{page}</body></html>"), None);
            let p = found.main_product().expect("a product").clone();
            assert_eq!(p.source, Some(source));
            assert_eq!(p.name.as_deref(), Some("Desk lamp"));
            assert_eq!(p.brand.as_deref(), Some("Acme"));
            assert_eq!(p.offers[0].price, Some(19.9));
            assert_eq!(p.offers[0].currency.as_deref(), Some("EUR"));
            assert_eq!(p.offers[0].availability.as_deref(), Some("InStock"));
            let r = p.rating.as_ref().expect("rating");
            assert_eq!(r.rating.map(|r| r.stars), Some(4.5));
            assert_eq!(r.reviews, Some(2));
            assert_eq!(p.reviews.len(), 1, "{source:?}: {:?}", p.reviews);
            assert_eq!(p.reviews[0].author.as_deref(), Some("Ann"));
            assert_eq!(p.reviews[0].date.as_deref(), Some("2024-03-12"));
            assert_eq!(p.reviews[0].body.as_deref(), Some("Bright & small."));
            seen.push(Product { source: None, ..p });
        }
        assert_eq!(seen[0], seen[1]);
        assert_eq!(seen[1], seen[2]);
    }
}
