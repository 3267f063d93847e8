//! The schema.org things a shop or a review site describes, typed:
//! products (and whatever else carries ratings and reviews: a recipe, a
//! film, a business), their offers, rating summaries and reviews, and the
//! breadcrumb trail. Read from [`Item`]s of any syntax.

use serde::Serialize;

use super::item::{Item, Val};
use super::limits::Bounds;
use super::values::{self, Rating};
use crate::strategy::locale::Locale;

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    #[serde(rename = "json-ld")]
    JsonLd,
    #[serde(rename = "microdata")]
    Microdata,
    #[serde(rename = "rdfa")]
    Rdfa,
    /// The page's visible, repeated structure.
    #[serde(rename = "page")]
    Page,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::JsonLd => "json-ld",
            Source::Microdata => "microdata",
            Source::Rdfa => "rdfa",
            Source::Page => "page",
        }
    }
}

/// A product, or another reviewed thing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Product {
    /// Its schema.org type (`Product`, `Recipe`, `Movie`, …).
    pub kind: String,
    pub name: Option<String>,
    pub brand: Option<String>,
    pub sku: Option<String>,
    pub gtin: Option<String>,
    pub mpn: Option<String>,
    pub description: Option<String>,
    pub url: Option<String>,
    pub images: Vec<String>,
    pub offers: Vec<Offer>,
    pub rating: Option<AggregateRating>,
    pub reviews: Vec<Review>,
    #[serde(skip)]
    pub source: Option<Source>,
}

/// One offer, or a range of them (`AggregateOffer`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Offer {
    pub price: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub currency: Option<String>,
    pub availability: Option<String>,
    pub seller: Option<String>,
    pub url: Option<String>,
}

/// The rating summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AggregateRating {
    pub rating: Option<Rating>,
    /// How many ratings (`ratingCount`).
    pub ratings: Option<u64>,
    /// How many reviews (`reviewCount`).
    pub reviews: Option<u64>,
    /// Where the reviews it sums up are listed, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// One review.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Review {
    pub author: Option<String>,
    /// `YYYY-MM-DD`.
    pub date: Option<String>,
    /// The date as written, when it could not be read as one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date_text: Option<String>,
    pub rating: Option<Rating>,
    pub title: Option<String>,
    pub body: Option<String>,
    /// Where the page says so.
    pub verified: Option<bool>,
}

/// One step of a breadcrumb trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crumb {
    pub name: String,
    pub url: Option<String>,
}

/// Types read as products: what schema.org lets carry offers, and the
/// reviewed things review sites describe. Any other type with a rating
/// summary or reviews counts too.
const PRODUCT_TYPES: &[&str] = &[
    "Product",
    "ProductGroup",
    "ProductModel",
    "IndividualProduct",
    "SomeProducts",
    "Vehicle",
    "Car",
    "Book",
];

/// Properties never followed when looking for products and reviews: what
/// they hold is another thing than the page's.
const ELSEWHERE: &[&str] = &[
    "itemReviewed",
    "isRelatedTo",
    "isSimilarTo",
    "isAccessoryOrSparePartFor",
    "isConsumableFor",
    "publisher",
    "author",
    "creator",
    "potentialAction",
];

/// How values are read: the page's address and language, the bounds.
pub struct Reader<'a> {
    pub base: Option<&'a url::Url>,
    pub locale: &'a Locale,
    pub bounds: &'a Bounds,
}

impl Reader<'_> {
    /// The products and the reviews standing on their own (about something
    /// the page describes elsewhere, or nowhere) among `items`, and the
    /// first breadcrumb trail.
    pub fn things(
        &self,
        items: &[Item],
        source: Source,
    ) -> (Vec<Product>, Vec<Review>, Vec<Crumb>) {
        let mut products = Vec::new();
        let mut reviews = Vec::new();
        let mut crumbs = Vec::new();
        walk(items, self.bounds, |item| {
            if is_product(item) {
                let mut p = self.product(item);
                p.source = Some(source);
                products.push(p);
            } else if item.is("Review") || item.is("UserReview") || item.is("CriticReview") {
                reviews.push(self.review(item));
            } else if item.is("BreadcrumbList") && crumbs.is_empty() {
                crumbs = self.crumbs(item);
            } else {
                return true;
            }
            false
        });
        (products, reviews, crumbs)
    }

    fn text(&self, item: &Item, keys: &[&str]) -> Option<String> {
        item.text(keys)
            .map(|t| values::plain(&t, self.bounds.text_bytes))
            .filter(|t| !t.is_empty())
    }

    fn product(&self, item: &Item) -> Product {
        let kind = (item.types.iter())
            .find(|t| product_type(t))
            .or(item.types.first())
            .cloned()
            .unwrap_or_else(|| "Thing".into());
        let mut images: Vec<String> = Vec::new();
        for v in item.all("image").take(self.bounds.values) {
            let raw = match v {
                Val::Text(t) => Some(t.clone()),
                Val::Item(i) => i.text(&["contentUrl", "url"]).or_else(|| i.id.clone()),
            };
            if let Some(u) = raw.and_then(|r| values::url(&r, self.base))
                && !images.contains(&u)
            {
                images.push(u);
            }
        }
        let mut offers = Vec::new();
        for v in item.all("offers").take(self.bounds.values) {
            match v {
                Val::Item(o) => self.offers(o, 0, &mut offers),
                // `"offers": "19.99"` is seen too.
                Val::Text(t) => offers.push(Offer {
                    price: values::number(t),
                    ..Offer::default()
                }),
            }
        }
        let mut reviews: Vec<Review> = (item.items("review").chain(item.items("reviews")))
            .take(self.bounds.values)
            .map(|r| self.review(r))
            .collect();
        reviews.retain(|r| r.body.is_some() || r.rating.is_some() || r.title.is_some());
        let rating = item.item(&["aggregateRating"]).map(|a| self.aggregate(a));
        // A review that names no scale is on its summary's (a 10-point
        // site's 4 is 2 stars, not 4).
        if let Some(scale) = rating.as_ref().and_then(|a| a.rating).filter(|r| r.said) {
            for r in &mut reviews {
                if let Some(own) = r.rating.filter(|o| !o.said && o.best != scale.best) {
                    r.rating =
                        Rating::new(own.value, Some(scale.best), Some(scale.worst)).or(r.rating);
                }
            }
        }
        Product {
            kind,
            name: self.text(item, &["name", "headline"]),
            brand: self.text(item, &["brand", "manufacturer"]),
            sku: self.text(item, &["sku", "productID"]),
            gtin: self.text(
                item,
                &["gtin13", "gtin", "gtin12", "gtin14", "gtin8", "isbn"],
            ),
            mpn: self.text(item, &["mpn"]),
            description: self.text(item, &["description"]),
            url: item
                .text(&["url"])
                .or_else(|| item.id.clone().filter(|i| i.starts_with("http")))
                .and_then(|u| values::url(&u, self.base)),
            images,
            offers,
            rating,
            reviews,
            source: None,
        }
    }

    fn offers(&self, o: &Item, depth: usize, out: &mut Vec<Offer>) {
        if depth > 2 || out.len() >= self.bounds.values {
            return;
        }
        let spec = o.item(&["priceSpecification"]);
        let pick = |keys: &[&str]| o.text(keys).or_else(|| spec.and_then(|s| s.text(keys)));
        let offer = Offer {
            price: pick(&["price"]).and_then(|p| values::number(&p)),
            low: pick(&["lowPrice", "minPrice"]).and_then(|p| values::number(&p)),
            high: pick(&["highPrice", "maxPrice"]).and_then(|p| values::number(&p)),
            currency: pick(&["priceCurrency"]).map(|c| c.trim().to_ascii_uppercase()),
            availability: o
                .text(&["availability"])
                .and_then(|a| values::availability(&a)),
            seller: self.text(o, &["seller", "offeredBy"]),
            url: o.text(&["url"]).and_then(|u| values::url(&u, self.base)),
        };
        let nested: Vec<&Item> = o.items("offers").collect();
        let has_own = offer.price.is_some() || offer.low.is_some() || offer.high.is_some();
        if has_own || nested.is_empty() {
            out.push(offer);
        }
        for n in nested {
            self.offers(n, depth + 1, out);
        }
    }

    fn rating(&self, r: &Item) -> Option<Rating> {
        let n = |keys: &[&str]| r.text(keys).and_then(|t| values::number(&t));
        Rating::new(
            n(&["ratingValue"])?,
            n(&["bestRating"]),
            n(&["worstRating"]),
        )
    }

    fn aggregate(&self, a: &Item) -> AggregateRating {
        AggregateRating {
            rating: self.rating(a),
            ratings: a.text(&["ratingCount"]).and_then(|t| values::count(&t)),
            reviews: a.text(&["reviewCount"]).and_then(|t| values::count(&t)),
            url: a.text(&["url"]).and_then(|u| values::url(&u, self.base)),
        }
    }

    fn review(&self, r: &Item) -> Review {
        let rating = match r.get(&["reviewRating", "rating"]) {
            Some(Val::Item(i)) => self.rating(i),
            Some(Val::Text(t)) => values::number(t).and_then(|v| Rating::new(v, None, None)),
            None => None,
        };
        let raw_date = r.text(&["datePublished", "dateCreated", "date"]);
        let date = raw_date
            .as_deref()
            .and_then(|d| values::date(d, self.locale));
        let verified = r
            .text(&["verified", "isVerified", "verifiedBuyer"])
            .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "1"));
        Review {
            author: self.text(r, &["author", "creator"]),
            date_text: if date.is_none() { raw_date } else { None },
            date,
            rating,
            title: self.text(r, &["name", "headline"]),
            body: self.text(r, &["reviewBody", "description", "text"]),
            verified,
        }
    }

    fn crumbs(&self, list: &Item) -> Vec<Crumb> {
        let mut steps: Vec<(f64, Crumb)> = Vec::new();
        for (i, el) in list
            .items("itemListElement")
            .take(self.bounds.values)
            .enumerate()
        {
            let position = el
                .text(&["position"])
                .and_then(|p| values::number(&p))
                .unwrap_or(i as f64);
            let (name, url) = match el.get(&["item"]) {
                Some(Val::Item(thing)) => (
                    self.text(el, &["name"])
                        .or_else(|| self.text(thing, &["name"])),
                    thing.text(&["url"]).or_else(|| thing.id.clone()),
                ),
                Some(Val::Text(u)) => (self.text(el, &["name"]), Some(u.clone())),
                None => (self.text(el, &["name"]), el.text(&["url"])),
            };
            if let Some(name) = name {
                let url = url.and_then(|u| values::url(&u, self.base));
                steps.push((position, Crumb { name, url }));
            }
        }
        steps.sort_by(|a, b| a.0.total_cmp(&b.0));
        steps.into_iter().map(|(_, c)| c).collect()
    }
}

/// Every item of `items` in page order, nested ones too as long as
/// `descend` says so of their parent, but never what another thing is
/// about (`itemReviewed`, `isRelatedTo`, …); within the bounds' nesting.
fn walk<'a>(items: &'a [Item], bounds: &Bounds, mut descend: impl FnMut(&'a Item) -> bool) {
    let mut stack: Vec<(&Item, usize)> = items.iter().rev().map(|i| (i, 0)).collect();
    while let Some((item, depth)) = stack.pop() {
        if depth > bounds.depth || !descend(item) {
            continue;
        }
        for (k, v) in item.props.iter().rev() {
            if let Val::Item(i) = v
                && !ELSEWHERE.iter().any(|e| e.eq_ignore_ascii_case(k))
            {
                stack.push((i, depth + 1));
            }
        }
    }
}

/// How much a thing looks like the page's main product: a real product
/// type first, then the most reviews (a few count), a rating summary,
/// offers, a name. [`main_item`] and [`super::Found::main_product`] both
/// choose by it.
pub(super) fn main_weight(
    typed: bool,
    reviews: usize,
    rated: bool,
    offers: bool,
    named: bool,
) -> usize {
    usize::from(typed) * 64
        + reviews.min(8) * 4
        + usize::from(rated) * 3
        + usize::from(offers) * 2
        + usize::from(named)
}

/// Whether `kind` is a real product type.
pub(super) fn product_type(kind: &str) -> bool {
    PRODUCT_TYPES.iter().any(|p| p.eq_ignore_ascii_case(kind))
}

/// The page's main product-like item among `items` ([`main_weight`]; the
/// first in page order on a tie): what a strategy's `ld` fields read, all
/// from this one item.
pub fn main_item<'a>(items: &'a [Item], bounds: &Bounds) -> Option<&'a Item> {
    let mut best: Option<(&Item, usize)> = None;
    walk(items, bounds, |item| {
        if !is_product(item) {
            return true;
        }
        let w = main_weight(
            item.types.iter().any(|t| product_type(t)),
            item.all("review").count(),
            item.get(&["aggregateRating"]).is_some(),
            item.get(&["offers"]).is_some(),
            item.get(&["name"]).is_some(),
        );
        if best.is_none_or(|(_, b)| w > b) {
            best = Some((item, w));
        }
        false
    });
    best.map(|(i, _)| i)
}

/// The first text at `path` (property names, each a step into a nested
/// item, trying every entry of a list: `aggregateRating.ratingValue`,
/// `offers.price`) in `item`.
pub fn lookup(item: &Item, path: &[String]) -> Option<String> {
    let (first, rest) = path.split_first()?;
    item.all(first).find_map(|v| match (v, rest.is_empty()) {
        (v, true) => v.as_text().filter(|t| !t.trim().is_empty()),
        (Val::Item(i), false) => lookup(i, rest),
        (Val::Text(_), false) => None,
    })
}

fn is_product(item: &Item) -> bool {
    item.types.iter().any(|t| product_type(t))
        || item.get(&["aggregateRating"]).is_some()
        || (item.get(&["review"]).is_some() && !item.is("Review"))
        || (item.get(&["offers"]).is_some() && !item.is("Offer"))
}
