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
