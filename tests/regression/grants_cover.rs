//! Issue 54, findings 3 and 5: grants cover what an identity leaves behind.
//! An admin key granted only slot 1 listed slot 0's recordings and read
//! their metadata and frames; a `tools=get_reviews` key was shown every
//! tool; a key naming another key's browser session learnt its slot from
//! the refusal. Each failed on 125f00e.

use serde_json::{Value, json};

use crate::common::daemon::{Daemon, Mcp, add_key, add_key_granted};

/// `method` on `path` with `key`: the status and the body.
async fn call(
    d: &Daemon,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut b = reqwest::Client::new()
        .request(method, d.url(path))
        .bearer_auth(key);
    if let Some(v) = body {
        b = b.json(&v);
    }
    let r = b.send().await.expect("request");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

async fn tool(d: &Daemon, key: &str, name: &str, args: Value) -> (u16, Value) {
    let (status, text) = call(
        d,
        key,
        reqwest::Method::POST,
        &format!("/api/v1/tools/{name}"),
        Some(args),
    )
    .await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn grants_cover_recordings_events_tools_and_sessions() {
    let env = crate::common::shop(2).await;
    let root = add_key(&env, "root", "admin").await;
    let one = add_key_granted(&env, "one", "admin", &["slots=1"]).await;
    let reviews = add_key_granted(&env, "reviews", "operator", &["tools=get_reviews"]).await;
    let alice = add_key(&env, "alice", "operator").await;
    let d = Daemon::start_with(&env, 2, "", "[recording]\nwhen = \"always\"\n", &[]).await;

    // Slot 0's browser work leaves a recording.
    let (status, r) = tool(
        &d,
        &root,
        "scrape",
        json!({"url": env.url("/site/about").as_str(), "mode": "browser", "slot": 0}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let id = r["recordings"][0]
        .as_str()
        .unwrap_or_else(|| panic!("a recording: {r}"))
        .to_string();

    // The unrestricted admin sees it; the slot-1 admin does not.
    let (_, all) = call(&d, &root, reqwest::Method::GET, "/api/v1/recordings", None).await;
    assert!(all.contains(&id), "{all}");
    let (status, mine) = call(&d, &one, reqwest::Method::GET, "/api/v1/recordings", None).await;
    assert_eq!(status, 200, "{mine}");
    assert!(
        !mine.contains(&id),
        "slot 0's recording listed to a slot-1 key: {mine}"
    );
    for path in [
        format!("/api/v1/recordings/{id}"),
        format!("/api/v1/recordings/{id}/frames/1"),
    ] {
        let (status, body) = call(&d, &one, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(!body.contains("site/about"), "{path}: {body}");
        let (status, _) = call(&d, &root, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{path} for the unrestricted admin");
    }
    // Slot 0's events are not the slot-1 key's to read.
    let (_, events) = call(
        &d,
        &one,
        reqwest::Method::GET,
        "/api/v1/events/recent",
        None,
    )
    .await;
    let events: Value = serde_json::from_str(&events).expect("events");
    let of_slot0 = |v: &Value| {
        (v["events"].as_array().into_iter().flatten())
            .filter(|e| e["slot"] == 0)
            .count()
    };
    assert_eq!(of_slot0(&events), 0, "{events}");
    let (_, events) = call(
        &d,
        &root,
        reqwest::Method::GET,
        "/api/v1/events/recent",
        None,
    )
    .await;
    assert!(
        of_slot0(&serde_json::from_str(&events).expect("events")) > 0,
        "{events}"
    );

    // A key granted one tool is shown that tool, over REST and MCP.
    let (_, listed) = call(&d, &reviews, reqwest::Method::GET, "/api/v1/tools", None).await;
    let listed: Value = serde_json::from_str(&listed).expect("tools");
    let names = |v: &Value, at: &str| -> Vec<String> {
        (v.pointer(at)
            .and_then(Value::as_array)
            .into_iter()
            .flatten())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
    };
    assert_eq!(names(&listed, "/tools"), ["get_reviews"], "{listed}");
    let mut mcp = Mcp::new(&d, Some(&reviews));
    mcp.initialize().await;
    let over_mcp = mcp.call(2, "tools/list", json!({})).await;
    assert_eq!(
        names(&over_mcp, "/result/tools"),
        ["get_reviews"],
        "{over_mcp}"
    );

    // Another key's browser session is no session at all to this one: the
    // refusal names neither its slot nor its site.
    let (status, opened) = tool(
        &d,
        &alice,
        "browser_open",
        json!({"url": env.url("/site/about").as_str(), "slot": 0}),
    )
    .await;
    assert_eq!(status, 200, "{opened}");
    let session = opened["session"].as_str().expect("session").to_string();
    let (status, refused) = tool(&d, &one, "browser_snapshot", json!({"session": session})).await;
    assert!(status >= 400, "{refused}");
    let said = refused.to_string();
    assert!(said.contains("no browser session"), "{said}");
    assert!(
        !said.contains("slot 0") && !said.contains("testshop"),
        "{said}"
    );
    // A session lives no longer than its key.
    let sessions = |v: &Value| v["slots"][0]["browser_sessions"].as_u64();
    assert_eq!(
        sessions(&tool(&d, &root, "pool_status", json!({})).await.1),
        Some(1)
    );
    let out = crate::common::daemon::idpool(&env)
        .args(["keys", "revoke", "alice"])
        .output()
        .await
        .expect("keys revoke");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.reload().await;
    assert_eq!(
        sessions(&tool(&d, &root, "pool_status", json!({})).await.1),
        Some(0)
    );
    d.stop().await;
}
