//! The REST face (issue 17, item 6): `POST /api/v1/tools/{name}` runs the
//! MCP dispatcher for callers that do not speak MCP: the same structured
//! result, the same keys and roles, the same audit log.

use crate::common;

use common::daemon::{Daemon, Mcp, add_key};
use common::shop;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn tools_over_plain_http_match_mcp_and_keep_the_roles() {
    let env = shop(1).await;
    let operator = add_key(&env, "script", "operator").await;
    let viewer = add_key(&env, "dashboard", "viewer").await;
    let d = Daemon::start(&env, 1, "").await;
    let http = reqwest::Client::new();
    let args = json!({"item": "B0REST1", "strategy": "testshop", "pages": 2});
    let r = http
        .post(d.url("/api/v1/tools/get_reviews"))
        .bearer_auth(&operator)
        .json(&args)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let rest: Value = r.json().await.expect("json");
    let mut c = Mcp::new(&d, Some(&operator));
    assert!(c.initialize().await.status.is_success());
    let mcp = c.tool(1, "get_reviews", args.clone()).await;
    let mcp = &mcp["result"]["structuredContent"];
    for field in ["strategy", "item", "count", "reviews", "has_more"] {
        assert_eq!(rest[field], mcp[field], "{field}");
    }
    assert_eq!(
        rest["reviews"],
        json!(common::masked_truth("B0REST1")[..20].to_vec())
    );

    let denied = http
        .post(d.url("/api/v1/tools/get_reviews"))
        .bearer_auth(&viewer)
        .json(&args)
        .send()
        .await
        .expect("post");
    assert_eq!(denied.status(), StatusCode::FORBIDDEN);
    let anonymous = http
        .post(d.url("/api/v1/tools/get_reviews"))
        .json(&args)
        .send()
        .await
        .expect("post");
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let unknown = http
        .post(d.url("/api/v1/tools/nope"))
        .bearer_auth(&operator)
        .send()
        .await
        .expect("post");
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let bad = http
        .post(d.url("/api/v1/tools/get_reviews"))
        .bearer_auth(&operator)
        .body("{not json")
        .send()
        .await
        .expect("post");
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let invalid = http
        .post(d.url("/api/v1/tools/get_reviews"))
        .bearer_auth(&operator)
        .json(&json!({"item": 12}))
        .send()
        .await
        .expect("post");
    assert_eq!(invalid.status(), StatusCode::BAD_REQUEST);

    // Refusals are audited; the role gate comes before the body is read.
    let reset = |key: Option<&str>, body: &'static str| {
        let mut b = http.post(d.url("/api/v1/slots/0/reset")).body(body);
        if let Some(k) = key {
            b = b.bearer_auth(k);
        }
        b.send()
    };
    assert_eq!(
        reset(Some(&viewer), "{}").await.expect("post").status(),
        StatusCode::FORBIDDEN
    );
    let r = reset(None, "{broken").await.expect("post");
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "the gate before the parse"
    );
    let guessed = "idp_not_a_real_key_0123456789";
    let r = http
        .post(d.url("/mcp"))
        .bearer_auth(guessed)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let slots = http
        .get(d.url("/api/v1/slots"))
        .bearer_auth(&viewer)
        .send()
        .await
        .expect("get");
    assert_eq!(slots.status(), StatusCode::OK);

    let listed = |key: &str| {
        let (http, url, key) = (http.clone(), d.url("/api/v1/tools"), key.to_string());
        async move {
            let v: Value = http
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .expect("get")
                .json()
                .await
                .expect("json");
            v["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .map(|t| {
                    assert!(t["inputSchema"]["type"] == "object", "{t}");
                    t["name"].as_str().unwrap_or_default().to_string()
                })
                .collect::<Vec<String>>()
        }
    };
    let mine = listed(&operator).await;
    assert!(
        mine.contains(&"get_reviews".to_string()) && !mine.contains(&"retire_slot".to_string()),
        "{mine:?}"
    );
    let theirs = listed(&viewer).await;
    assert!(
        theirs.contains(&"pool_status".to_string()) && !theirs.contains(&"get_reviews".to_string()),
        "{theirs:?}"
    );
    d.stop().await;

    let audit = std::fs::read_to_string(env.path("data/audit.log")).expect("audit");
    let lines: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["tool"] == "get_reviews" && l["transport"] == "api")
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["principal"] == "script" && l["ok"] == true),
        "{audit}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["principal"] == "dashboard" && l["ok"] == false),
        "{audit}"
    );
    let all: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("every audit line is JSON"))
        .collect();
    let has = |f: &dyn Fn(&Value) -> bool| all.iter().any(f);
    assert!(
        has(&|l| l["principal"] == "dashboard"
            && l["method"] == "reset_slot"
            && l["ok"] == false
            && l["error"].as_str().unwrap_or("").starts_with("403")),
        "a viewer's refused reset: {audit}"
    );
    assert!(
        has(&|l| l["principal"] == "unknown"
            && l["method"] == "reset_slot"
            && l["error"].as_str().unwrap_or("").starts_with("401")),
        "{audit}"
    );
    assert!(
        has(&|l| l["principal"] == "unknown"
            && l["transport"] == "http"
            && l["method"] == "POST /mcp"),
        "a guessed key: {audit}"
    );
    assert!(
        !audit.contains("idp_not_a_real_key"),
        "the key itself is never written"
    );
    assert!(
        has(&|l| l["principal"] == "dashboard"
            && l["method"] == "GET /api/v1/slots"
            && l["ok"] == true),
        "{audit}"
    );
}

#[tokio::test]
async fn without_a_keys_file_callers_are_viewers_by_default() {
    let env = shop(1).await;
    // Naming anonymous_role in a comment keeps the test helper from setting it.
    let d = Daemon::start(&env, 1, "# anonymous_role: left at its default").await;
    let http = reqwest::Client::new();
    let listed: Value = http
        .get(d.url("/api/v1/tools"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let names: Vec<&str> = (listed["tools"].as_array().expect("tools").iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, common::tools_for(idpool::config::Role::Viewer));
    let r = http
        .post(d.url("/api/v1/tools/scrape"))
        .json(&json!({"url": env.url("/").as_str()}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    d.stop().await;
}
