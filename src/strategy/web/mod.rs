//! The built-in generic strategy, `web`: products and reviews of any shop
//! no strategy covers, read from the page itself.
//!
//! - [`answer`]: schema.org structured data first (JSON-LD, microdata,
//!   RDFa, through [`super::structured`]), the page's repeated structure
//!   ([`repeated`]) where that is missing or thinner than the page; every
//!   answer says its `source`, and a product where structured data and the
//!   visible page disagree (a price, a review count) says so.
//! - [`next`]: where a review list continues (`rel=next`, a `page=` link,
//!   the rating summary's own URL).
//! - [`walls`]: the open web's bot walls and sign-in pages, for every
//!   request to a host no strategy covers.
//!
//! A `Web` is made per call for the host of the URL it reads, under that
//! host's routing key (its breakers, politeness and robots are the open
//! web's, shared with `scrape`), or under the strategy that covers the
//! host when one does: one road to each site.

pub mod answer;
pub mod next;
mod repeated;
pub mod walls;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use super::extract::Extracted;
use super::operation::{Operation, Tier};
use super::{Body, Markers, Outcome, Politeness, Strategy};

/// The generic strategy's name, as callers give it (`strategy: "web"`).
pub const NAME: &str = "web";

/// Its operations' parameter holding the page's URL.
pub const URL_PARAM: &str = "url";

/// `reviews` and `product`, each its description and its parameters
/// besides `url`; both read one page at `{url}` ([`TIERS`]).
const OPERATIONS: &[(&str, &str, &str)] = &[
    (
        "reviews",
        "Reviews on any shop's product or review page: schema.org structured data (JSON-LD, \
         microdata, RDFa), else the page's repeated review markup; each review says its \
         source. get_reviews follows the page's next link.",
        "",
    ),
    (
        "product",
        "A product on any shop's page: name, brand, SKU/GTIN, price and currency, \
         availability, rating, rating and review counts, images, breadcrumbs; from structured \
         data, else the visible page; says its source and where structured data and the \
         visible page disagree.",
        r#"[params.trust]
type = "enum"
values = ["structured", "page"]
default = "structured"
description = "Where structured data and the visible page disagree (a price, a review count), whose value the answer takes"
"#,
    ),
];

/// The page at `{url}` over HTTP, then in the slot's browser when the page
/// shows less than its structured data says (reviews drawn by a script).
/// The whole page is the one item its tiers see; [`Web::extract`] reads it.
const TIERS: &str = r#"[params.url]
type = "string"
required = true
description = "The page's URL (a product's, or its reviews')"
[extract]
items = ":root"
[tier2]
url = "{url}"
[tier3]
url = "{url}"
"#;

fn operation_text(description: &str, params: &str) -> String {
    format!("description = {description:?}\n{params}{TIERS}")
}

/// The operations, compiled once.
static OPS: LazyLock<Arc<BTreeMap<String, Operation>>> = LazyLock::new(|| {
    let ops = OPERATIONS.iter().filter_map(|(name, description, params)| {
        // Checked by `the_operations_compile`.
        Operation::parse(name, &operation_text(description, params))
            .ok()
            .map(|op| (name.to_string(), op))
    });
    Arc::new(ops.collect())
});

/// The operations `web` offers, for `list_strategies` and the tools.
pub fn operations() -> &'static BTreeMap<String, Operation> {
    &OPS
}

/// The generic strategy on one site.
#[derive(Debug)]
pub struct Web {
    /// The site's routing key: its host's (`web:<host>`), or the name of
    /// the strategy that covers the host.
    key: String,
    hosts: Vec<String>,
    politeness: Politeness,
    ops: Arc<BTreeMap<String, Operation>>,
    /// Whose value a product takes where structured data and the page
    /// disagree (the `product` operation's `trust`).
    trust: answer::Trust,
}

impl Web {
    /// The generic strategy for `host`, routed under `key` with the open
    /// web's `politeness`.
    pub fn new(key: String, host: &str, politeness: Politeness) -> Web {
        Web {
            key,
            hosts: vec![host.trim_end_matches('.').to_ascii_lowercase()],
            politeness,
            ops: OPS.clone(),
            trust: answer::Trust::default(),
        }
    }

    /// The same, trusting `trust` where structured data and the page disagree.
    pub fn trusting(self, trust: answer::Trust) -> Web {
        Web { trust, ..self }
    }
}

impl Strategy for Web {
    fn name(&self) -> &str {
        &self.key
    }
    fn family(&self) -> &str {
        NAME
    }
    fn hosts(&self) -> &[String] {
        &self.hosts
    }
    fn warmup_url(&self) -> Option<&url::Url> {
        None
    }
    fn cookie_domain(&self) -> &str {
        &self.hosts[0]
    }
    fn base_url(&self) -> Option<&str> {
        None
    }
    fn politeness(&self) -> &Politeness {
        &self.politeness
    }
    fn markers(&self) -> &Markers {
        &walls::OPEN_WEB
    }
    fn operations(&self) -> &BTreeMap<String, Operation> {
        &self.ops
    }
    fn obeys_robots(&self) -> bool {
        true
    }
    fn classify(&self, status: u16, final_url: &str, body: &Body<'_>) -> Outcome {
        walls::classify(status, final_url, body)
    }
    fn explain(
        &self,
        outcome: Outcome,
        status: u16,
        final_url: &str,
        body: &Body<'_>,
    ) -> Option<String> {
        walls::explain(outcome, status, final_url, body)
    }
    fn pii_fields(&self, op: &Operation) -> Vec<String> {
        match op.name.as_str() {
            "reviews" => vec!["author".into()],
            _ => Vec::new(),
        }
    }

    fn extract(
        &self,
        op: &Operation,
        tier: &Tier,
        body: &Body<'_>,
        page_url: &url::Url,
    ) -> Result<Extracted, String> {
        if !body.is_html() {
            return Err(format!(
                "tier {}: the page is not HTML (the generic strategy reads pages)",
                tier.number
            ));
        }
        let page = answer::Page::read(body.html(), page_url);
        match op.name.as_str() {
            "reviews" => page.reviews(),
            "product" => page.product(self.trust),
            other => Err(format!("the generic strategy has no operation `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operations_compile() {
        for (name, description, params) in OPERATIONS {
            if let Err(e) = Operation::parse(name, &operation_text(description, params)) {
                panic!("operation `{name}`: {e}");
            }
        }
        assert_eq!(operations().len(), OPERATIONS.len());
    }
}
