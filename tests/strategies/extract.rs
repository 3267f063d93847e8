//! The bundled `testshop` strategy's extraction rules reproduce the testbed's
//! ground truth, field for field, from the real responses of tiers 1 and 2.

use idpool::strategy::{Strategy, TomlStrategy};
use idpool_testbed::{Testbed, TestbedConfig, data};
use serde_json::{Value, json};

fn truth(item: &str, page: usize) -> Vec<Value> {
    data::page(item, page)
        .0
        .into_iter()
        .map(|r| {
            json!({"id": r.id, "author": r.author, "rating": r.rating, "title": r.title, "body": r.body,
                   "date": r.date, "verified": r.verified, "helpful": r.helpful})
        })
        .collect()
}

#[tokio::test]
async fn testshop_reviews_match_ground_truth_on_tiers_1_and_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tb = Testbed::start(TestbedConfig::ephemeral(dir.path()))
        .await
        .expect("testbed");
    let strategy = TomlStrategy::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/testshop.toml"),
    )
    .expect("testshop loads");
    let op = &strategy.operations()["reviews"];
    assert_eq!(
        op.tiers.iter().map(|t| t.number).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let client = reqwest::Client::new();
    for item in ["B0TESTA1", "B0TESTB2", "EMPTY01"] {
        let pages = data::review_count(item).div_ceil(data::PER_PAGE).max(1);
        for page in 1..=pages {
            let expect = truth(item, page);
            let more = page < pages && data::review_count(item) > 0;
            // Tier 2: the HTML review page.
            let url = format!("{}/product-reviews/{item}?page={page}", tb.http_url());
            let body = client
                .get(&url)
                .send()
                .await
                .expect("get")
                .text()
                .await
                .expect("body");
            let got = op.tiers[1]
                .extractor
                .extract(&body, None, &url::Url::parse(&url).expect("url"))
                .expect("tier 2 extracts");
            assert_eq!(
                got.items
                    .iter()
                    .cloned()
                    .map(Value::Object)
                    .collect::<Vec<_>>(),
                expect,
                "{item} p{page} tier 2"
            );
            assert_eq!(got.has_more, more);
            assert_eq!(got.empty, expect.is_empty());
            // Tier 1: the AJAX endpoint.
            let url = format!("{}/ajax/reviews", tb.http_url());
            let body = client
                .post(&url)
                .form(&[("item", item), ("page", &page.to_string())])
                .send()
                .await
                .expect("post")
                .text()
                .await
                .expect("body");
            let got = op.tiers[0]
                .extractor
                .extract(&body, Some("/html"), &url::Url::parse(&url).expect("url"))
                .expect("tier 1 extracts");
            assert_eq!(
                got.items
                    .iter()
                    .cloned()
                    .map(Value::Object)
                    .collect::<Vec<_>>(),
                expect,
                "{item} p{page} tier 1"
            );
            assert_eq!(got.has_more, more);
        }
    }
    // A page that is neither items nor a proven-empty page is an error, not "no reviews".
    let err = op.tiers[1]
        .extractor
        .extract(
            "<html><body>Robot Check</body></html>",
            None,
            &url::Url::parse("https://x.test/").expect("url"),
        )
        .expect_err("suspicious");
    assert!(err.contains("no items"), "{err}");
}

#[test]
fn operation_parameters_become_json_schema_and_are_checked() {
    let strategy = TomlStrategy::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/testshop.toml"),
    )
    .expect("testshop loads");
    let op = &strategy.operations()["reviews"];
    let schema = op.json_schema();
    assert_eq!(schema["required"], json!(["item"]));
    assert_eq!(
        schema["properties"]["page"],
        json!({"type": "integer", "default": 1, "minimum": 1, "description": "Page number"})
    );
    let bound = op
        .bind(serde_json::from_value(json!({"item": "B0X", "page": "3"})).expect("map"))
        .expect("binds");
    assert_eq!(bound["page"], json!(3));
    let bound = op
        .bind(serde_json::from_value(json!({"item": "B0X"})).expect("map"))
        .expect("binds");
    assert_eq!(bound["page"], json!(1), "default applied");
    let e = op
        .bind(serde_json::from_value(json!({"page": 2})).expect("map"))
        .expect_err("item missing");
    assert!(e.to_string().contains("missing required parameter `item`"));
    let e = op
        .bind(serde_json::from_value(json!({"item": "B0X", "page": 0})).expect("map"))
        .expect_err("min");
    assert!(
        e.to_string()
            .contains("parameter `page` must be at least 1"),
        "{e}"
    );
    let e = op
        .bind(serde_json::from_value(json!({"item": "B0X", "sort": "x"})).expect("map"))
        .expect_err("unknown");
    assert!(e.to_string().contains("has no parameter `sort`"), "{e}");
    assert_eq!(
        op.item_id_from("https://127.0.0.1:8443/product/B0TESTA1?ref=x")
            .as_deref(),
        Some("B0TESTA1")
    );
}

/// A `json` tier reads only where its pointers lead (the rest of the
/// response is skipped, not built into a tree) and gets what a reading of
/// the whole tree would: items at a nested pointer, fields moved out whole
/// or read by several fields, flags for `empty` and `next`, a list that is
/// not a list named, and a body that is not JSON named.
#[test]
fn a_json_tier_reads_what_its_pointers_lead_to() {
    let text = r#"name = "feed"
hosts = ["feed.test"]
base_url = "https://feed.test"
[operations.items]
description = "a JSON feed"
[operations.items.tier1]
url = "{base_url}/feed.json"
format = "json"
[operations.items.tier1.extract]
items = "/data/list"
empty = "/data/count"
next = "/data/next"
[operations.items.tier1.extract.fields]
id = { pointer = "/id" }
who = { pointer = "/user/name" }
user = { pointer = "/user" }
stars = { pointer = "/stars", number = true }
pic = { pointer = "/pic", exists = true }
"#;
    let s = TomlStrategy::parse(std::path::Path::new("feed.toml"), text).expect("parses");
    let tier = &s.operations()["items"].tiers[0];
    let url = url::Url::parse("https://feed.test/feed.json").expect("url");
    // Unrelated parts of every kind, before and after the list.
    let noise = json!({"ads": [{"deep": [[[{"x": "y\"z"}]]]}], "html": "<p class=\"a\">x</p>"});
    let body = json!({
        "meta": noise,
        "data": {
            "list": [
                {"id": "r1", "user": {"name": "Ann", "since": 2019}, "stars": "4.5", "pic": "a.png"},
                {"id": "r2", "user": {"name": "Bo\u{e9}"}, "stars": 3, "pic": null},
                {"id": "r\"3", "stars": null},
            ],
            "count": 3,
            "next": "/feed.json?page=2",
        },
        "tail": noise,
    })
    .to_string();
    let got = tier.extractor.extract(&body, None, &url).expect("extracts");
    let items: Vec<Value> = got.items.into_iter().map(Value::Object).collect();
    assert_eq!(
        items,
        vec![
            json!({"id": "r1", "who": "Ann", "user": {"name": "Ann", "since": 2019}, "stars": 4.5, "pic": true}),
            json!({"id": "r2", "who": "Bo\u{e9}", "user": {"name": "Bo\u{e9}"}, "stars": 3, "pic": false}),
            json!({"id": "r\"3", "who": null, "user": null, "stars": null, "pic": false}),
        ]
    );
    assert!(got.has_more && !got.empty);
    assert_eq!(
        got.next_url.as_deref(),
        Some("https://feed.test/feed.json?page=2")
    );
    // A page that proves itself empty.
    let empty = json!({"data": {"list": [], "count": 0, "next": false}}).to_string();
    let got = tier
        .extractor
        .extract(&empty, None, &url)
        .expect("empty page");
    assert!(got.empty && got.items.is_empty() && !got.has_more);
    // Not a list where the items should be; not JSON at all.
    let e = tier
        .extractor
        .extract(r#"{"data": {"list": {"id": 1}}}"#, None, &url)
        .expect_err("not a list");
    assert!(
        e.contains("`/data/list`") && e.contains("not a list"),
        "{e}"
    );
    let e = tier
        .extractor
        .extract(r#"{"data": {"list": [1, }"#, None, &url)
        .expect_err("broken");
    assert!(e.contains("not JSON"), "{e}");
}

/// A strategy whose `product` fields read the page's structured data first
/// (`ld`), then the page (`css`).
fn ld_strategy(dir: &std::path::Path, fields: &str) -> Result<TomlStrategy, String> {
    let path = dir.join("ldshop.toml");
    let text = format!(
        "name = \"ldshop\"\nhosts = [\"shop.test\"]\nlocale = \"de-DE\"\n\
         [operations.product]\n[operations.product.params.item]\ntype = \"string\"\nrequired = true\n\
         [operations.product.tier2]\nurl = \"https://shop.test/p/{{item}}\"\n\
         [operations.product.tier2.extract]\nitems = \":root\"\n\
         [operations.product.tier2.extract.fields]\n{fields}\n"
    );
    std::fs::write(&path, text).expect("write");
    TomlStrategy::load(&path).map_err(|e| format!("{e}"))
}

#[test]
fn ld_fields_read_structured_data_first_and_the_page_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let strategy = ld_strategy(
        dir.path(),
        "rating = { ld = \"aggregateRating.ratingValue\", css = \".stars\", number = true }\n\
         price = { ld = [\"offers.price\", \"offers.lowPrice\"], css = \".price\", number = true }\n\
         brand = { ld = \"brand.name\" }\n\
         reviews = { ld = \"aggregateRating.reviewCount\", number = \"integer\" }",
    )
    .expect("ld fields compile");
    let op = &strategy.operations()["product"];
    let url = url::Url::parse("https://shop.test/p/1").expect("url");
    let read = |html: &str| {
        let got = op.tiers[0]
            .extractor
            .extract(html, None, &url)
            .expect("extracts");
        Value::Object(got.items[0].clone())
    };
    // JSON-LD: machine numbers, whatever the page's locale (de-DE reads
    // "4.5" as 45 on the page, not here).
    let ld = r#"<html lang="de"><script type="application/ld+json">{"@type":"Product",
        "brand":{"@type":"Brand","name":"M&amp;M"},"aggregateRating":{"ratingValue":"4.5","reviewCount":"1.204"},
        "offers":{"@type":"AggregateOffer","lowPrice":"1299.00"}}</script>
        <span class="stars">3,0</span><span class="price">9,99 €</span></html>"#;
    assert_eq!(
        read(ld),
        json!({"rating": 4.5, "price": 1299, "brand": "M&M", "reviews": 1204})
    );
    // Microdata, nested items.
    let md = r#"<html lang="de"><div itemscope itemtype="https://schema.org/Product">
        <div itemprop="aggregateRating" itemscope><meta itemprop="ratingValue" content="4"></div>
        <div itemprop="offers" itemscope><meta itemprop="price" content="12.50"></div></div></html>"#;
    assert_eq!(
        read(md),
        json!({"rating": 4, "price": 12.5, "brand": null, "reviews": null})
    );
    // No structured data: the page, in its locale.
    let page =
        r#"<html lang="de"><span class="stars">3,5</span><span class="price">9,99 €</span></html>"#;
    assert_eq!(
        read(page),
        json!({"rating": 3.5, "price": 9.99, "brand": null, "reviews": null})
    );
}

#[test]
fn a_bad_ld_path_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = ld_strategy(
        dir.path(),
        "rating = { ld = \"aggregateRating..ratingValue\" }",
    )
    .expect_err("an empty step");
    assert!(
        e.contains("fields.rating.ld `aggregateRating..ratingValue` is not a path"),
        "{e}"
    );
    // A keyword is no property: `@type` and `@id` are not values a path reads.
    let e = ld_strategy(dir.path(), "kind = { ld = \"brand.@type\" }").expect_err("a keyword");
    assert!(
        e.contains("fields.kind.ld `brand.@type` is not a path"),
        "{e}"
    );
    let e = ld_strategy(dir.path(), "rating = { ld = 4 }").expect_err("not a string");
    assert!(e.contains("fields.rating.ld must be a path"), "{e}");
}

/// Every `ld` field of a page reads one item, the page's main product (a
/// site-wide rating widget before it is not it); a count that is not whole
/// is no count.
#[test]
fn ld_fields_read_one_main_product() {
    let dir = tempfile::tempdir().expect("tempdir");
    let strategy = ld_strategy(
        dir.path(),
        "name = { ld = \"name\" }\n\
         rating = { ld = \"aggregateRating.ratingValue\", number = true }\n\
         reviews = { ld = \"aggregateRating.reviewCount\", number = \"integer\" }",
    )
    .expect("ld fields compile");
    let op = &strategy.operations()["product"];
    let url = url::Url::parse("https://shop.test/p/1").expect("url");
    let html = r#"<html><script type="application/ld+json">[
        {"@type":"Organization","name":"The shop","aggregateRating":{"ratingValue":"4.9","reviewCount":"20000"}},
        {"@type":"Product","name":"Kettle","aggregateRating":{"ratingValue":"3.5","reviewCount":"4.5"}}]</script></html>"#;
    let got = op.tiers[0]
        .extractor
        .extract(html, None, &url)
        .expect("extracts");
    assert_eq!(
        Value::Object(got.items[0].clone()),
        json!({"name": "Kettle", "rating": 3.5, "reviews": null})
    );
}
