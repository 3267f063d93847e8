//! The bundled `amazon` strategy against HTML fixtures written to follow Amazon's
//! public page structure (tests/fixtures/amazon/). Not the live site.

use std::path::Path;

use idpool::strategy::{Body, Outcome, Strategy, TomlStrategy, classify};
use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/fixtures/amazon").join(name)).expect("fixture")
}

fn amazon() -> TomlStrategy {
    TomlStrategy::load(&root().join("strategies/amazon.toml")).expect("amazon strategy loads")
}

fn page_url() -> url::Url {
    url::Url::parse("https://www.amazon.com/product-reviews/B0ACMEKTL1/?pageNumber=1").expect("url")
}

#[test]
fn reviews_fields_from_the_review_list() {
    let s = amazon();
    let op = &s.operations()["reviews"];
    let tier2 = op.tiers.iter().find(|t| t.number == 2).expect("tier 2");
    let got = tier2
        .extractor
        .extract(&fixture("reviews-page1.html"), None, &page_url())
        .expect("extracts");
    let items: Vec<Value> = got.items.into_iter().map(Value::Object).collect();
    assert_eq!(
        items,
        vec![
            json!({"id": "R1A2B3C4D5E6F7", "author": "Jane D.", "rating": 5, "title": "Boils fast, looks great",
                   "body": "Water boils in under three minutes. The handle stays cool.", "date": "March 3, 2024",
                   "country": "the United States", "verified": true, "helpful": "12"}),
            json!({"id": "R2B3C4D5E6F7G8", "author": "Marco", "rating": 2, "title": "Lid broke after a month",
                   "body": "The hinge of the lid snapped. Customer service was slow.", "date": "February 14, 2024",
                   "country": "the United Kingdom", "verified": false, "helpful": "One"}),
            json!({"id": "R3C4D5E6F7G8H9", "author": "K. Tanaka", "rating": 4, "title": "Good value",
                   "body": "Does the job. A bit loud.", "date": "January 5, 2024", "country": "Japan", "verified": true, "helpful": null}),
        ]
    );
    assert!(got.has_more);
    assert_eq!(
        got.next_url.as_deref(),
        Some(
            "https://www.amazon.com/product-reviews/B0ACMEKTL1/ref=cm_cr_arp_d_paging_btm_next_2?pageNumber=2"
        )
    );

    let last = tier2
        .extractor
        .extract(&fixture("reviews-page2.html"), None, &page_url())
        .expect("last page");
    assert_eq!((last.items.len(), last.has_more), (1, false));
    let empty = tier2
        .extractor
        .extract(&fixture("reviews-empty.html"), None, &page_url())
        .expect("empty page");
    assert!(empty.items.is_empty() && empty.empty);
    assert_eq!(
        classify(
            s.markers(),
            200,
            page_url().as_str(),
            &Body::new(&fixture("reviews-empty.html"), Some("text/html"))
        ),
        Outcome::Empty
    );
}

#[test]
fn product_fields() {
    let s = amazon();
    let op = &s.operations()["product"];
    let got = op.tiers[0]
        .extractor
        .extract(&fixture("product.html"), None, &page_url())
        .expect("extracts");
    assert_eq!(
        Value::Object(got.items[0].clone()),
        json!({"title": "Acme Electric Kettle, 1.7 L, Stainless Steel", "brand": "Visit the Acme Store", "price": "39.99",
               "rating": 4.3, "ratings": 12345, "availability": "In Stock"})
    );
}

#[test]
fn captcha_and_sign_in_are_hard_blocks_and_urls_give_the_asin() {
    let s = amazon();
    assert_eq!(
        classify(
            s.markers(),
            200,
            "https://www.amazon.com/errors/validateCaptcha",
            &Body::new(&fixture("captcha.html"), Some("text/html"))
        ),
        Outcome::HardBlock
    );
    assert_eq!(
        classify(
            s.markers(),
            200,
            "https://www.amazon.com/ap/signin?openid=x",
            &Body::new("<html></html>", None)
        ),
        Outcome::HardBlock
    );
    // A captcha page is not mistaken for an empty review list.
    let tier2 = s.operations()["reviews"]
        .tiers
        .iter()
        .find(|t| t.number == 2)
        .expect("tier 2");
    assert!(
        tier2
            .extractor
            .extract(&fixture("captcha.html"), None, &page_url())
            .is_err()
    );
    let op = &s.operations()["reviews"];
    assert_eq!(
        op.item_id_from(
            "https://www.amazon.com/Acme-Kettle/dp/B0ACMEKTL1/ref=sr_1_1?keywords=kettle"
        )
        .as_deref(),
        Some("B0ACMEKTL1")
    );
    assert_eq!(
        op.item_id_from("https://www.amazon.de/product-reviews/B0ACMEKTL1/")
            .as_deref(),
        Some("B0ACMEKTL1")
    );
    assert!(s.covers("www.amazon.co.uk") && !s.covers("amazon.evil.test"));
}
