//! The bundled `amazon` strategy against HTML fixtures written to follow Amazon's
//! public page structure (strategies/fixtures/amazon/). Not the live site.

use std::path::Path;

use idpool::strategy::{Body, Outcome, Strategy, TomlStrategy, classify};
use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("strategies/fixtures/amazon").join(name)).expect("fixture")
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
    // A plain product page: the details it lacks come back null (A+: false).
    let mut item = got.items[0].clone();
    item.retain(|_, v| !v.is_null());
    assert_eq!(
        Value::Object(item),
        json!({"title": "Acme Electric Kettle, 1.7 L, Stainless Steel", "brand": "Visit the Acme Store", "price": "39.99",
               "rating": 4.3, "ratings": 12345, "availability": "In Stock", "aplus": false})
    );
    // Its details: bullets, description, A+ content, fulfilment, seller, ranks.
    let got = op.tiers[0]
        .extractor
        .extract(&fixture("product-details.html"), None, &page_url())
        .expect("extracts");
    let d = &got.items[0];
    assert_eq!(d["aplus"], true);
    assert_eq!(d["fulfilled_by"], "Amazon");
    assert_eq!(
        (&d["seller"], &d["seller_id"]),
        (&json!("Acme Home Goods"), &json!("A1B2C3D4E5F6G7"))
    );
    assert_eq!(
        (&d["best_sellers_rank"], &d["best_sellers_category"]),
        (&json!(1234), &json!("Home & Kitchen"))
    );
    assert_eq!(
        (&d["sub_category_rank"], &d["sub_category"]),
        (&json!(3), &json!("Electric Kettles"))
    );
    assert!(
        d["bullets"]
            .as_str()
            .is_some_and(|b| b.starts_with("FAST BOIL") && b.contains("BPA-FREE"))
    );
}

#[test]
fn captcha_is_a_hard_block_sign_in_a_login_wall_and_urls_give_the_asin() {
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
    // The sign-in wall is no ban: the slot is signed out, its breaker untouched.
    assert_eq!(
        classify(
            s.markers(),
            200,
            "https://www.amazon.com/ap/signin?openid=x",
            &Body::new("<html></html>", None)
        ),
        Outcome::LoginRequired
    );
    assert_eq!(
        classify(
            s.markers(),
            200,
            "https://www.amazon.com/product-reviews/B0ACMEKTL1/",
            &Body::new(&fixture("signin.html"), Some("text/html"))
        ),
        Outcome::LoginRequired
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

fn extract(s: &TomlStrategy, op: &str, file: &str) -> Vec<Value> {
    let operation = &s.operations()[op];
    let tier2 = operation
        .tiers
        .iter()
        .find(|t| t.number == 2)
        .expect("tier 2");
    let body = fixture(file);
    s.extract(
        operation,
        tier2,
        &Body::new(&body, Some("text/html")),
        &page_url(),
    )
    .unwrap_or_else(|e| panic!("{op} on {file}: {e}"))
    .items
    .into_iter()
    .map(Value::Object)
    .collect()
}

/// Amazon marks a review up as `div[data-hook=review]` on some pages and
/// `li[data-hook=review]` on others: both extract.
#[test]
fn reviews_in_li_and_div_markup() {
    let s = amazon();
    let li = extract(&s, "reviews", "reviews-page-li.html");
    assert_eq!(
        li,
        vec![
            json!({"id": "R7LIST1A2B3C4D", "author": "Ana G.", "rating": 4, "title": "Solid kettle",
                   "body": "Heats fast. The cord is short.", "date": "May 1, 2024",
                   "country": "the United States", "verified": true, "helpful": null}),
            json!({"id": "R7LIST2B3C4D5E", "author": "Ben K.", "rating": 1, "title": "Leaks",
                   "body": "Started leaking at the base after two weeks.", "date": "April 20, 2024",
                   "country": "Canada", "verified": false, "helpful": null}),
        ]
    );
    assert_eq!(
        extract(&s, "reviews", "reviews-page1.html").len(),
        3,
        "div markup"
    );
    let op = &s.operations()["reviews"];
    assert!(op.requires_login);
    assert_eq!(op.fallback.as_deref(), Some("top_reviews"));
}

/// The product page's own review section, signed in (div markup) or not
/// (li markup): what a signed-out slot can still read.
#[test]
fn top_reviews_from_the_product_page() {
    let s = amazon();
    let want = vec![
        json!({"id": "R9TOPA1B2C3D4E", "author": "Priya S.", "rating": 5, "title": "Quiet and quick",
               "body": "Boils a full jug in four minutes and barely makes a sound.", "date": "April 2, 2024",
               "country": "the United States", "verified": true}),
        json!({"id": "R9TOPB2C3D4E5F", "author": "Tom W.", "rating": 3, "title": "Fine, but the lid sticks",
               "body": "Works well; the lid needs a firm push to open.", "date": "March 28, 2024",
               "country": "the United States", "verified": false}),
    ];
    assert_eq!(extract(&s, "top_reviews", "product-signed-out.html"), want);
    assert_eq!(extract(&s, "top_reviews", "product-signed-in.html"), want);
    assert!(!s.operations()["top_reviews"].requires_login);
}

/// Global ratings, written reviews and their ratio, from the review page's
/// header (the predecessor's `get_review_count`).
#[test]
fn review_counts_and_their_ratio() {
    let s = amazon();
    assert_eq!(
        extract(&s, "review_counts", "reviews-page-li.html"),
        vec![json!({"global_ratings": 12345, "written_reviews": 1234, "ratio": 0.1})]
    );
    assert_eq!(
        extract(&s, "review_counts", "reviews-page1.html"),
        vec![json!({"global_ratings": 4, "written_reviews": 4, "ratio": 1.0})]
    );
    assert!(s.operations()["review_counts"].requires_login);
}

/// The `[session]` markers tell a signed-in page from a signed-out one and
/// from the sign-in page.
#[test]
fn session_markers_classify_signed_in_and_out() {
    use idpool::strategy::LoginState;
    let s = amazon();
    let state = |file: &str, url: &str| {
        s.login_state(200, url, &Body::new(&fixture(file), Some("text/html")))
            .map(|(state, _)| state)
    };
    let dp = "https://www.amazon.com/dp/B0ACMEKTL1";
    assert_eq!(
        state("product-signed-in.html", dp),
        Some(LoginState::LoggedIn)
    );
    assert_eq!(
        state("product-signed-out.html", dp),
        Some(LoginState::LoggedOut)
    );
    assert_eq!(
        state("reviews-page-li.html", dp),
        Some(LoginState::LoggedIn)
    );
    assert_eq!(
        state(
            "signin.html",
            "https://www.amazon.com/ap/signin?openid.mode=checkid_setup"
        ),
        Some(LoginState::LoggedOut)
    );
    let rules = s.login().expect("[session]");
    assert!(
        rules
            .login_url
            .as_ref()
            .is_some_and(|u| u.path() == "/ap/signin")
    );
    assert!(rules.probe_url.is_some());
}
