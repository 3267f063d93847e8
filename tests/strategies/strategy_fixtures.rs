//! Fixture tests for strategy authors: `idpool strategy record` against the
//! testbed writes a fixture (the answer and what it extracts), `idpool
//! strategy test` passes on it offline, and fails with a readable diff once
//! one selector is changed in a copy of the strategy.

use crate::common;

use std::process::Output;

use common::daemon::idpool;

async fn run(env: &common::Env, args: &[&str]) -> (Output, String) {
    let out = idpool(env).args(args).output().await.expect("idpool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("$ idpool {}\n{text}", args.join(" "));
    (out, text)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

#[tokio::test]
async fn a_recorded_fixture_passes_offline_and_a_changed_selector_fails_with_a_diff() {
    let env = common::shop(1).await;
    let (out, text) = run(
        &env,
        &[
            "strategy",
            "record",
            "--strategy",
            "testshop",
            "--operation",
            "reviews",
            "--params",
            r#"{"item": "B0TESTA1"}"#,
            "--tier",
            "2",
        ],
    )
    .await;
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("recorded testshop/reviews-B0TESTA1: tier 2, status 200, ok, 10 items"),
        "{text}"
    );
    let dir = env.path("strategies/fixtures/testshop");
    let meta = std::fs::read_to_string(dir.join("reviews-B0TESTA1.toml")).expect("fixture");
    let body = std::fs::read_to_string(dir.join("reviews-B0TESTA1.html")).expect("body");
    assert!(body.contains("review"), "the page's HTML is kept");
    assert!(
        !meta.to_lowercase().contains("set-cookie"),
        "no cookies in a fixture"
    );
    // What it expects is the testbed's ground truth (first page).
    let fixture =
        idpool::strategy::fixture::load(&dir.join("reviews-B0TESTA1.toml")).expect("loads");
    let items = fixture.fixture.expect.items.expect("exact items");
    let truth = common::truth("B0TESTA1");
    let got: Vec<serde_json::Value> = items.into_iter().map(serde_json::Value::Object).collect();
    assert_eq!(got, truth[..10].to_vec());

    // A blocked answer is a fixture too: the shop's captcha (it bans
    // whoever asks for a BAN item), recorded and expected as a hard block.
    let (out, text) = run(
        &env,
        &[
            "strategy",
            "record",
            "--strategy",
            "testshop",
            "--operation",
            "reviews",
            "--params",
            r#"{"item": "BAN1"}"#,
            "--tier",
            "2",
            "--name",
            "reviews-captcha",
        ],
    )
    .await;
    assert!(out.status.success(), "{text}");
    assert!(text.contains("hard_block, 0 items"), "{text}");

    let (out, text) = run(&env, &["strategy", "test", "testshop"]).await;
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("ok    testshop/reviews-B0TESTA1 (reviews tier 2)"),
        "{text}"
    );
    assert!(
        text.contains("ok    testshop/reviews-captcha (reviews tier 2)"),
        "{text}"
    );
    assert!(text.contains("2 passed, 0 failed"), "{text}");

    // One selector changed in a copy: the test fails and says where.
    let copy = env.path("copy");
    copy_dir(&env.path("strategies"), &copy);
    let shop = std::fs::read_to_string(copy.join("testshop.toml")).expect("testshop");
    let edited = shop.replace(
        r#"rating = { css = ".review-rating", number = true }"#,
        r#"rating = { css = ".review-stars", number = true }"#,
    );
    assert_ne!(shop, edited, "the selector is in the bundled strategy");
    std::fs::write(copy.join("testshop.toml"), edited).expect("write");
    let (out, text) = run(
        &env,
        &[
            "strategy",
            "test",
            "testshop",
            "--dir",
            copy.to_str().expect("utf8"),
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL  testshop/reviews-B0TESTA1 (reviews tier 2)"),
        "{text}"
    );
    let rating = truth[0]["rating"].clone();
    assert!(
        text.contains(&format!("item 0 `rating`: expected {rating}, got null")),
        "{text}"
    );
    assert!(text.contains("1 passed, 1 failed"), "{text}");
}
