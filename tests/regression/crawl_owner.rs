//! Finding 10: crawl jobs belonged to nobody: a second operator key read
//! and cancelled another key's crawl by its id (ids appear in the audit
//! log). Now another key's crawl is `not found`, exactly like an unknown
//! id; admins see and cancel every crawl.

use serde_json::{Value, json};

use crate::common::daemon::{Daemon, add_key};

/// `POST /api/v1/tools/{tool}` as `key`: the status and the body.
async fn call(d: &Daemon, key: &str, tool: &str, args: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(d.url(&format!("/api/v1/tools/{tool}")))
        .bearer_auth(key)
        .json(&args)
        .send()
        .await
        .expect("POST /api/v1/tools");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Start a background crawl as `key`; its id.
async fn start(d: &Daemon, key: &str, url: &str) -> String {
    let (status, body) = call(
        d,
        key,
        "crawl",
        json!({"url": url, "async": true, "max_pages": 20, "max_depth": 2}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["id"].as_str().expect("a job id").to_string()
}

/// What `key` is told about `id`, with `id` itself written as `<id>` (so
/// the answers for two ids can be compared).
async fn status_of(d: &Daemon, key: &str, id: &str, cancel: bool) -> (u16, String) {
    let (status, body) = call(d, key, "crawl_status", json!({"id": id, "cancel": cancel})).await;
    (status, body.to_string().replace(id, "<id>"))
}

#[tokio::test]
async fn another_keys_crawl_is_not_found_and_admins_see_every_crawl() {
    let env = crate::common::shop(1).await;
    let alice = add_key(&env, "alice", "operator").await;
    let bob = add_key(&env, "bob", "operator").await;
    let root = add_key(&env, "root", "admin").await;
    // Slow pages: the crawls are still running while they are asked about.
    crate::common::slow(&env, "/site/", 1500);
    let d = Daemon::start(&env, 1, "").await;
    let site = env.url("/site/").to_string();

    let id = start(&d, &alice, &site).await;
    let (status, own) = status_of(&d, &alice, &id, false).await;
    assert_eq!(status, 200, "{own}");
    assert!(own.contains("\"status\":\"running\""), "{own}");

    // Bob: exactly what an id that never existed gets, to read or cancel.
    let unknown = uuid_like(&id);
    let never = status_of(&d, &bob, &unknown, false).await;
    assert_ne!(never.0, 200, "{never:?}");
    assert!(never.1.contains("no crawl `<id>`"), "{never:?}");
    assert_eq!(status_of(&d, &bob, &id, false).await, never);
    assert_eq!(status_of(&d, &bob, &id, true).await, never);
    // Bob's cancel did nothing.
    let (_, after) = status_of(&d, &alice, &id, false).await;
    assert!(after.contains("\"status\":\"running\""), "{after}");

    // An admin sees it and may cancel it.
    let (status, seen) = status_of(&d, &root, &id, false).await;
    assert_eq!(status, 200, "{seen}");
    assert!(seen.contains("\"status\":\"running\""), "{seen}");
    let (status, cancelled) = status_of(&d, &root, &id, true).await;
    assert_eq!(status, 200, "{cancelled}");
    assert!(
        cancelled.contains("\"status\":\"cancelled\""),
        "{cancelled}"
    );
    let (_, told) = status_of(&d, &alice, &id, false).await;
    assert!(told.contains("\"status\":\"cancelled\""), "{told}");

    // Bob's own crawl is his: he cancels it, Alice cannot see it.
    let his = start(&d, &bob, &site).await;
    assert_eq!(status_of(&d, &alice, &his, false).await, never);
    let (status, stopped) = status_of(&d, &bob, &his, true).await;
    assert_eq!(status, 200, "{stopped}");
    assert!(stopped.contains("\"status\":\"cancelled\""), "{stopped}");
    d.stop().await;
}

/// An id of the same shape as `id` that no job has.
fn uuid_like(id: &str) -> String {
    id.chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect()
}
