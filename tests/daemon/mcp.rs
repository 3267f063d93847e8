//! The MCP server end to end: a real `idpool serve` (and `idpool mcp`), the
//! official TypeScript SDK as the client on all three transports, the official
//! conformance suite, keys / roles / audit, protocol and HTTP errors, and the
//! legacy SSE transport's pings and idle limit.

use crate::common;

use std::time::Duration;

use common::daemon::{Daemon, Mcp, add_key, idpool, messages_of, node_client};
use common::{chromium_browsers_under, masked_truth, shop, truth};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn operator_tools() -> Vec<&'static str> {
    common::tools_for(idpool::config::Role::Operator)
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|t| t.as_str().expect("name").to_string())
        .collect()
}

/// The last line of the audit log.
fn last_audit(env: &common::Env) -> Value {
    let text = std::fs::read_to_string(env.path("data/audit.log")).expect("audit log");
    serde_json::from_str(text.lines().last().expect("a line")).expect("json line")
}

fn check_reviews(out: &Value, item: &str, transport: &str) {
    assert!(truth(item).len() > 10, "pick an item with two pages");
    assert!(out.get("error").is_none(), "{transport}: {out}");
    assert_eq!(out["isError"], false, "{transport}: {out}");
    let sc = &out["structuredContent"];
    let count = sc["count"].as_u64().expect("count") as usize;
    assert_eq!(
        count,
        truth(item).len().min(20),
        "{transport}: two pages of ten"
    );
    assert_eq!(
        sc["reviews"].as_array().expect("reviews"),
        &masked_truth(item)[..count],
        "{transport}: ground truth"
    );
    // The same JSON as text for older clients.
    let text: Value = serde_json::from_str(out["text"].as_str().expect("text")).expect("json text");
    assert_eq!(&text, sc, "{transport}");
    let progress = out["progress"].as_array().expect("progress");
    assert!(
        progress.len() >= 4,
        "{transport}: a notification per tier attempt and per page: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|p| p["message"].as_str().unwrap_or("").starts_with("page 2:")),
        "{transport}: {progress:?}"
    );
    let tools = names(&out["tools"]);
    assert_eq!(tools, operator_tools(), "{transport}: an operator's tools");
    for t in out["toolsMeta"].as_array().expect("meta") {
        assert_eq!(t["hasOutputSchema"], true, "{t}");
        assert!(t["annotations"]["readOnlyHint"].is_boolean(), "{t}");
    }
}

#[tokio::test]
async fn the_typescript_sdk_gets_ground_truth_reviews_over_every_transport() {
    let env = shop(2).await;
    // With a keys file, every HTTP transport needs a key.
    let key = add_key(&env, "agent", "operator").await;
    let d = Daemon::start(&env, 2, "keys_file = \"keys.toml\"").await;
    let args = |item: &str| json!({"item": item, "strategy": "testshop", "pages": 2}).to_string();
    let common_args = |item: &str| {
        vec![
            "--tool".to_string(),
            "get_reviews".into(),
            "--tool-args".into(),
            args(item),
            "--progress".into(),
        ]
    };

    let mut http = vec![
        "--transport".to_string(),
        "http".into(),
        "--url".into(),
        d.url("/mcp"),
        "--key".into(),
        key.clone(),
    ];
    http.extend(common_args("B0MCPH1"));
    let out = node_client(&http.iter().map(String::as_str).collect::<Vec<_>>(), &[]).await;
    check_reviews(&out, "B0MCPH1", "streamable http");
    assert_eq!(out["protocolVersion"], "2025-11-25");
    // Issue 39, item 4: every schema compiles under Ajv 2020 strict, every
    // output property is typed, and the result validates.
    assert_eq!(
        out["schemaProblems"],
        json!([]),
        "{}",
        out["schemaProblems"]
    );

    let mut sse = vec![
        "--transport".to_string(),
        "sse".into(),
        "--url".into(),
        d.url("/sse"),
        "--key".into(),
        key.clone(),
    ];
    sse.extend(common_args("B0MCPS1"));
    let out = node_client(&sse.iter().map(String::as_str).collect::<Vec<_>>(), &[]).await;
    check_reviews(&out, "B0MCPS1", "legacy sse");

    // Issue 39, item 4: a client that cannot set headers puts the key on
    // `/sse?key=` only; the `/messages` POSTs of its session carry no key
    // and are the session's (the endpoint handed back names no key).
    let mut by_query = vec![
        "--transport".to_string(),
        "sse".into(),
        "--url".into(),
        d.url(&format!("/sse?key={key}")),
    ];
    by_query.extend(common_args("B0MCPQ1"));
    let out = node_client(
        &by_query.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
    )
    .await;
    check_reviews(&out, "B0MCPQ1", "legacy sse with ?key=");
    // Without the session a key-less POST is still refused.
    let r = reqwest::Client::new()
        .post(d.url("/messages?session_id=00000000-0000-4000-8000-000000000000"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 401);

    // stdio bridged to the daemon: the key comes from IDPOOL_KEY.
    let config = format!("--arg={}", env.path("idpool.toml").display());
    let mut bridge = vec![
        "--transport".to_string(),
        "stdio".into(),
        "--command".into(),
        env!("CARGO_BIN_EXE_idpool").into(),
        "--arg=--config".into(),
        config.clone(),
        "--arg=mcp".into(),
    ];
    bridge.extend(common_args("B0MCPB1"));
    let out = node_client(
        &bridge.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("IDPOOL_KEY", key.clone())],
    )
    .await;
    check_reviews(&out, "B0MCPB1", "stdio bridge");
    let audit = last_audit(&env);
    assert_eq!(
        audit["principal"], "agent",
        "bridged calls run as the key: {audit}"
    );
    assert_eq!(audit["tool"], "get_reviews");
    assert_eq!(audit["ok"], true);
    // Who served the call, from the tool's typed provenance.
    assert_eq!(audit["tier"], 1, "{audit}");
    assert!(
        audit["slot"].is_u64() && audit["attempts"].as_u64() >= Some(1),
        "{audit}"
    );
    d.stop().await;

    // stdio with its own pool (the daemon is gone): the role is IDPOOL_ROLE's.
    let mut embedded = vec![
        "--transport".to_string(),
        "stdio".into(),
        "--command".into(),
        env!("CARGO_BIN_EXE_idpool").into(),
        "--arg=--config".into(),
        config,
        "--arg=mcp".into(),
        "--arg=--embedded".into(),
    ];
    embedded.extend(common_args("B0MCPE1"));
    let out = node_client(
        &embedded.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
    )
    .await;
    check_reviews(&out, "B0MCPE1", "stdio embedded");
    let audit = last_audit(&env);
    assert_eq!(
        (audit["principal"].as_str(), audit["transport"].as_str()),
        (Some("stdio"), Some("stdio"))
    );
    let mut viewer = embedded.clone();
    viewer.truncate(embedded.len() - 5);
    viewer.extend([
        "--tool".to_string(),
        "pool_status".into(),
        "--tool-args".into(),
        "{}".into(),
    ]);
    let out = node_client(
        &viewer.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("IDPOOL_ROLE", "viewer".into())],
    )
    .await;
    assert_eq!(names(&out["tools"]), ["list_strategies", "pool_status"]);
    assert_eq!(
        out["structuredContent"]["slots"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
}

#[tokio::test]
async fn the_official_conformance_suite_passes() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "").await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-js/conformance.mjs");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .args(["--url", &d.url("/mcp")])
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let summary = stdout
        .lines()
        .filter(|l| l.starts_with("PASS") || l.starts_with("FAIL") || l.starts_with("conformance:"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "conformance failed:\n{summary}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "idpool-lifecycle-http",
        "idpool-protocol-version-header",
        "idpool-origin-validation",
        "idpool-session-handling",
    ] {
        assert!(
            summary.contains(&format!("PASS {scenario}:")),
            "{scenario} did not pass:\n{summary}"
        );
    }
    d.stop().await;
}

#[tokio::test]
async fn keys_roles_sessions_and_the_audit_log() {
    let env = shop(1).await;
    let viewer = add_key(&env, "ops-viewer", "viewer").await;
    let operator = add_key(&env, "agent", "operator").await;
    let admin = add_key(&env, "root", "admin").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;

    // No key, a wrong key, a key in the query of /mcp: 401.
    let mut anon = Mcp::new(&d, None);
    let a = anon.initialize().await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.headers.get("www-authenticate").is_some());
    let mut wrong = Mcp::new(&d, Some("idp_not_a_key"));
    assert_eq!(wrong.initialize().await.status, StatusCode::UNAUTHORIZED);
    let mut query = Mcp::new(&d, None);
    query.url = d.url(&format!("/mcp?key={admin}"));
    assert_eq!(query.initialize().await.status, StatusCode::UNAUTHORIZED);

    // A viewer sees two tools and may not scrape: -32001, audited as ok: false.
    let mut v = Mcp::new(&d, Some(&viewer));
    assert_eq!(v.initialize().await.status, StatusCode::OK);
    let list = v.call(1, "tools/list", json!({})).await;
    let tools: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(tools, ["list_strategies", "pool_status"]);
    let r = v
        .tool(
            2,
            "scrape",
            json!({"url": env.url("/product/B0V").as_str()}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(msg.contains("viewer") && msg.contains("scrape"), "{msg}");
    let audit = last_audit(&env);
    assert_eq!(audit["principal"], "ops-viewer");
    assert_eq!(audit["role"], "viewer");
    assert_eq!(audit["tool"], "scrape");
    assert_eq!(audit["ok"], false);
    assert_eq!(audit["transport"], "http");
    assert!(audit["session"].is_string(), "{audit}");
    for field in ["ts", "args", "error", "duration_ms", "method"] {
        assert!(audit.get(field).is_some(), "audit field {field}: {audit}");
    }
    let r = v.tool(3, "pool_status", json!({})).await;
    assert_eq!(r["result"]["isError"], false, "{r}");

    // An operator may not refresh cookies; an admin may (real Chromium).
    let mut o = Mcp::new(&d, Some(&operator));
    o.initialize().await;

    // Answers that fit: an answer over the caller's `max_chars` comes in
    // pieces that, followed by their cursors, hold it whole; a cursor is
    // its key's own.
    let whole = o
        .tool(
            40,
            "get_reviews",
            json!({"item": "B0BUDGET", "strategy": "testshop", "pages": 3}),
        )
        .await;
    let whole = &whole["result"]["structuredContent"];
    let all = whole["reviews"].as_array().expect("reviews").clone();
    assert!(all.len() > 10, "{whole}");
    assert!(whole.get("truncated").is_none(), "{whole}");
    let mut got: Vec<Value> = Vec::new();
    let mut r = o
        .tool(
            41,
            "get_reviews",
            json!({"item": "B0BUDGET", "strategy": "testshop", "pages": 3, "max_chars": 1500}),
        )
        .await;
    let mut cursors = Vec::new();
    loop {
        let sc = r["result"]["structuredContent"].clone();
        assert_eq!(r["result"]["isError"], false, "{r}");
        let text = r["result"]["content"][0]["text"].as_str().expect("text");
        assert!(
            text.chars().count() <= 1500,
            "a piece of {} chars",
            text.chars().count()
        );
        assert_eq!(sc["strategy"], "testshop");
        assert_eq!(sc["piece"]["field"], "reviews");
        got.extend(sc["reviews"].as_array().expect("reviews").iter().cloned());
        let Some(c) = sc["next_cursor"].as_str() else {
            assert_eq!(sc["truncated"], false);
            break;
        };
        assert_eq!(sc["truncated"], true);
        cursors.push(c.to_string());
        r = o
            .tool(42, "get_reviews", json!({"cursor": c, "max_chars": 1500}))
            .await;
    }
    assert!(cursors.len() >= 3, "{} pieces", cursors.len() + 1);
    assert_eq!(
        got, all,
        "the pieces hold the answer whole, each review once"
    );
    let mut other = Mcp::new(&d, Some(&admin));
    other.initialize().await;
    let r = other
        .tool(43, "get_reviews", json!({"cursor": cursors[0]}))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let msg = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(msg.contains("unknown or expired cursor"), "{msg}");
    let r = o.tool(44, "extract", json!({"strategy": "testshop", "operation": "reviews", "params": {"item": "B0X"}, "max_chars": 0})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let msg = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        msg.contains("`max_chars` must be an integer from 1 to 2000000"),
        "{msg}"
    );
    let r = o
        .tool(
            1,
            "refresh_cookies",
            json!({"strategy": "testshop", "slot": 0}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    // x-api-key works as well as Bearer.
    let x = Mcp::new(&d, None);
    let a = x
        .send(
            x.request(reqwest::Method::POST)
                .header("x-api-key", &admin)
                .body(
                    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}})
                    .to_string(),
                ),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let mut adm = Mcp::new(&d, Some(&admin));
    adm.initialize().await;
    let a = adm
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "refresh_cookies", "arguments": {"strategy": "testshop", "slot": 0},
            "_meta": {"progressToken": "rc"}}}),
        )
        .await;
    let r = a.response(1);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["slots"][0]["ok"], true,
        "{r}"
    );
    assert!(
        a.messages
            .iter()
            .any(|p| p["method"] == "notifications/progress"
                && p["params"]["progressToken"] == "rc"
                && p["params"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("slot 0:")),
        "refresh_cookies reports progress per slot: {:?}",
        a.messages
    );
    let r = adm
        .tool(2, "reset_slot", json!({"slot": 0, "browser": true}))
        .await;
    assert_eq!(
        r["result"]["structuredContent"]["browser_closed"], true,
        "{r}"
    );
    assert!(chromium_browsers_under(env.data_dir()).is_empty());
    // The role cap header lowers an admin key to viewer.
    let mut capped = Mcp::new(&d, Some(&admin));
    capped.initialize().await;
    let list = capped
        .send(
            capped
                .request(reqwest::Method::POST)
                .header("x-idpool-role", "viewer")
                .body(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string()),
        )
        .await;
    assert_eq!(
        list.response(5)["result"]["tools"].as_array().map(Vec::len),
        Some(2)
    );

    // A session opened with key A and used with key B is refused.
    let mut stolen = Mcp::new(&d, Some(&admin));
    stolen.session = o.session.clone();
    stolen.protocol = o.protocol.clone();
    let a = stolen
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    // ... while its owner goes on using it.
    let r = o.call(10, "tools/list", json!({})).await;
    assert_eq!(
        r["result"]["tools"].as_array().map(Vec::len),
        Some(operator_tools().len())
    );

    // Legacy SSE: the key may come as ?key= on the GET; the session is bound to it.
    let http = reqwest::Client::new();
    let mut stream = http
        .get(d.url(&format!("/sse?key={operator}")))
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(stream.status(), StatusCode::OK);
    let mut buf = String::new();
    let ev = next_event(&mut stream, &mut buf, |e| e.starts_with("event: endpoint")).await;
    let endpoint = ev
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("endpoint")
        .to_string();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let post = |key: Option<&str>| {
        let mut b = http.post(d.url(&endpoint)).body(init.clone());
        if let Some(k) = key {
            b = b.bearer_auth(k);
        }
        b.send()
    };
    // Another key may not speak in the session.
    assert_eq!(
        post(Some(&admin)).await.expect("post").status(),
        StatusCode::FORBIDDEN
    );
    // The session is the ?key='s: its messages need no key of their own
    // (the endpoint names none; issue 39 found them all refused 401).
    assert!(!endpoint.contains("key="), "{endpoint}");
    assert_eq!(
        post(None).await.expect("post").status(),
        StatusCode::ACCEPTED
    );
    let ev = next_event(&mut stream, &mut buf, |e| e.starts_with("event: message")).await;
    assert!(ev.contains("\"protocolVersion\":\"2024-11-05\""), "{ev}");
    let r = http
        .get(d.url(&format!("/sse?key={}", "idp_nope")))
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    drop(stream);

    // A key re-made under the same name with another role cannot use the
    // sessions of the old one.
    let out = idpool(&env)
        .args(["keys", "revoke", "root"])
        .output()
        .await
        .expect("revoke");
    assert!(out.status.success());
    let root_viewer = add_key(&env, "root", "viewer").await;
    d.reload().await;
    let mut reused = Mcp::new(&d, Some(&root_viewer));
    reused.session = adm.session.clone();
    reused.protocol = adm.protocol.clone();
    let status = reused
        .post(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/list"}))
        .await
        .status;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "the admin session stays the admin key's"
    );

    // Revoked + SIGHUP: the key stops working; the audit log is re-opened.
    let out = idpool(&env)
        .args(["keys", "revoke", "ops-viewer"])
        .output()
        .await
        .expect("revoke");
    assert!(out.status.success());
    std::fs::rename(env.path("data/audit.log"), env.path("data/audit.log.1")).expect("rotate");
    d.reload().await;
    let mut gone = Mcp::new(&d, Some(&viewer));
    let status = gone.initialize().await.status;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "revoked key still accepted"
    );
    o.tool(11, "list_strategies", json!({})).await;
    assert_eq!(
        last_audit(&env)["tool"],
        "list_strategies",
        "audit re-opened"
    );
    let keys_text = std::fs::read_to_string(env.path("keys.toml")).expect("keys file");
    for k in [&operator, &admin] {
        assert!(!keys_text.contains(k.as_str()), "keys are stored hashed");
    }
    let log = d.log.clone();
    d.stop().await;
    let left = chromium_browsers_under(env.data_dir());
    assert!(
        left.is_empty(),
        "Chromium outlived the daemon: {left:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[tokio::test]
async fn bad_requests_get_the_right_errors_and_the_server_keeps_serving() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "max_body_bytes = 65536").await;
    let mut c = Mcp::new(&d, None);
    assert_eq!(c.initialize().await.status, StatusCode::OK);

    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .body("{\"jsonrpc\": \"2.0\", \"id\": 1,"),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.messages[0]["error"]["code"], -32700);

    let r = c.call(2, "no/such/method", json!({})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");

    let r = c.tool(3, "no_such_tool", json!({})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("no_such_tool")
    );

    let r = c
        .tool(
            4,
            "get_reviews",
            json!({"item": "B0X", "strategy": "testshop", "page": "two"}),
        )
        .await;
    // A bad argument is a tool error the model can read and correct
    // (MCP 2025-11-25), naming the argument; an unknown tool stays -32602.
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("page"),
        "{r}"
    );
    assert_eq!(
        r["result"]["_meta"]["idpool/error"]["kind"], "invalid_argument",
        "{r}"
    );
    let r = c.tool(5, "scrape", json!({"url": 12345})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("url"), "{r}");

    // scrape reports its fetches as progress.
    let a = c
        .post(json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {
            "name": "scrape", "arguments": {"url": env.url("/product/B0SCRAPE").as_str(), "max_chars": 200},
            "_meta": {"progressToken": 50}}}))
        .await;
    assert_eq!(a.response(50)["result"]["structuredContent"]["tier"], 2);
    assert!(
        a.messages
            .iter()
            .any(|m| m["method"] == "notifications/progress"
                && m["params"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("via http: ok")),
        "{:?}",
        a.messages
    );

    // An execution failure is a result with isError, not a protocol error.
    let r = c
        .tool(6, "scrape", json!({"url": "https://not-covered.test/x"}))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("not-covered.test")
    );

    let big = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "scrape", "arguments": {"url": "x".repeat(100_000)}}});
    let a = c.post(big).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);

    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("origin", "http://evil.test")
                .body(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}).to_string()),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("host", "evil.test")
                .body(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string()),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);

    let mut lost = Mcp::new(&d, None);
    lost.session = Some("no-such-session".into());
    lost.protocol = Some("2025-11-25".into());
    let a = lost
        .post(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    // Still serving, same session.
    let r = c.call(11, "tools/list", json!({})).await;
    assert_eq!(
        r["result"]["tools"].as_array().map(Vec::len),
        Some(operator_tools().len())
    );
    let r = c
        .tool(
            12,
            "get_reviews",
            json!({"item": "B0AFTER", "strategy": "testshop"}),
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"]["reviews"]
            .as_array()
            .map(Vec::len),
        Some(10),
        "{r}"
    );

    // Resources and the prompt.
    let r = c.call(13, "resources/list", json!({})).await;
    let uris: Vec<&str> = r["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|x| x["uri"].as_str().expect("uri"))
        .collect();
    assert!(
        uris.contains(&"idpool://slots") && uris.contains(&"idpool://strategies/testshop"),
        "{uris:?}"
    );
    let r = c
        .call(
            14,
            "resources/read",
            json!({"uri": "idpool://strategies/testshop"}),
        )
        .await;
    let text = r["result"]["contents"][0]["text"].as_str().expect("text");
    let s: Value = serde_json::from_str(text).expect("json");
    assert_eq!(s["name"], "testshop");
    assert!(
        s["source"]
            .as_str()
            .unwrap_or("")
            .contains("[operations.reviews")
    );
    let r = c
        .call(15, "resources/read", json!({"uri": "idpool://nope"}))
        .await;
    assert!(r["error"]["code"].is_i64(), "{r}");
    let r = c
        .call(
            16,
            "prompts/get",
            json!({"name": "review_digest", "arguments": {"item": "B0P", "strategy": "testshop"}}),
        )
        .await;
    let text = r["result"]["messages"][0]["content"]["text"]
        .as_str()
        .expect("prompt");
    assert!(
        text.contains("get_reviews") && text.contains("B0P"),
        "{text}"
    );

    // Ending the session: 200 (the SDKs expect 200 or 204), then it is gone.
    let a = c.send(c.request(reqwest::Method::DELETE)).await;
    assert_eq!(a.status, StatusCode::OK);
    let a = c
        .post(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/list"}))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    d.stop().await;
}

#[tokio::test]
async fn stateless_2026_07_28_discover_and_call() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "").await;
    let c = Mcp::new(&d, None);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "server/discover")
                .body(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}).to_string()),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.headers.get("mcp-session-id").is_none(), "stateless");
    let versions = &a.response(1)["result"]["supportedVersions"];
    for v in [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
    ] {
        assert!(
            versions.as_array().expect("versions").contains(&json!(v)),
            "{v}"
        );
    }
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "get_reviews")
                .body(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "get_reviews", "arguments": {"item": "B0STATELESS", "strategy": "testshop"},
                    "_meta": meta}}).to_string()),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.response(2)["result"]["structuredContent"]["reviews"],
        json!(masked_truth("B0STATELESS")[..10])
    );
    d.stop().await;
}

/// Read SSE events from a streaming response until `pred` matches one.
async fn next_event(
    resp: &mut reqwest::Response,
    buf: &mut String,
    pred: impl Fn(&str) -> bool,
) -> String {
    loop {
        if let Some(pos) = buf.find("\n\n") {
            let ev = buf[..pos].to_string();
            buf.drain(..pos + 2);
            if pred(&ev) {
                return ev;
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk())
            .await
            .expect("an event within 10 s")
            .expect("stream")
            .expect("stream open");
        buf.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
    }
}

#[tokio::test]
async fn legacy_sse_endpoint_messages_pings_and_idle_drop() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "sse_ping_secs = 1\nsse_idle_secs = 2").await;
    let http = reqwest::Client::new();
    let mut stream = http
        .get(d.url("/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(stream.status(), StatusCode::OK);
    let mut buf = String::new();
    let ev = next_event(&mut stream, &mut buf, |_| true).await;
    assert!(ev.starts_with("event: endpoint"), "{ev}");
    let endpoint = ev
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("data")
        .to_string();
    assert!(
        endpoint.starts_with("/messages?session_id="),
        "relative: {endpoint}"
    );
    let post = |body: Value| {
        http.post(d.url(&endpoint))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let r = post(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    .await
    .expect("post");
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let ev = next_event(&mut stream, &mut buf, |e| e.starts_with("event: message")).await;
    let msg = &messages_of("text/event-stream", &ev)[0];
    assert_eq!(msg["result"]["protocolVersion"], "2024-11-05", "{msg}");
    post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
        .expect("post");
    // A live stream gets `:` pings, and the session outlives the idle limit.
    let ping = next_event(&mut stream, &mut buf, |e| e.starts_with(':')).await;
    assert!(ping.starts_with(":"), "{ping}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let ev = next_event(&mut stream, &mut buf, |e| e.contains("\"id\":2")).await;
    assert_eq!(
        messages_of("text/event-stream", &ev)[0]["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(operator_tools().len())
    );
    // Malformed JSON: 400 with a parse error; the session lives on.
    let r = http
        .post(d.url(&endpoint))
        .body("{nope")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"]["code"], -32700);
    // Unknown session: 404.
    let r = http
        .post(d.url("/messages?session_id=nope"))
        .body("{}")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Close the stream and stay quiet past the idle limit: the session is gone.
    drop(stream);
    // (Any POST would count as traffic, so wait past the limit and the reaper's tick.)
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let status = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
        .expect("post")
        .status();
    assert_eq!(status, StatusCode::NOT_FOUND, "idle session dropped");
    assert!(d.log_text().contains("idle"), "the drop is logged");
    d.stop().await;
}

/// One request at a time on the only slot (a leaked lease would block the
/// next call), and the next review page answers after a minute.
fn one_slow_review_page(env: &common::Env) {
    use idpool_testbed::{Fault, FaultKind};
    let toml = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("toml");
    let toml = regex::Regex::new(r"(?m)^max_in_flight = \d+")
        .expect("re")
        .replace(&toml, "max_in_flight = 1")
        .into_owned();
    env.write("strategies/testshop.toml", &toml);
    env.testbed.set_modes(|m| {
        m.fault = Some(Fault {
            kind: FaultKind::Slow,
            path_prefix: Some("/ajax/reviews".into()),
            remaining: Some(1),
            delay_ms: 60_000,
            status: 200,
            size_mb: 0,
        })
    });
}

/// A call on the thin path (no progress token) whose client closes its
/// connection: the call ends, its slot is free for the next call, and its
/// audit line says it was cancelled.
#[tokio::test]
async fn a_thin_call_whose_client_goes_away_is_audited_and_frees_its_slot() {
    let env = shop(1).await;
    one_slow_review_page(&env);
    let d = Daemon::start(&env, 1, "").await;
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let gave_up = c
        .request(reqwest::Method::POST)
        .timeout(Duration::from_millis(1500))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "get_reviews", "arguments": {"item": "B0GONE", "strategy": "testshop", "slot": 0}}})
            .to_string(),
        )
        .send()
        .await;
    assert!(gave_up.is_err(), "the slow call answered: {gave_up:?}");
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        c.tool(
            2,
            "get_reviews",
            json!({"item": "B0AFTER", "strategy": "testshop", "slot": 0}),
        ),
    )
    .await
    .expect("the slot was freed when the client went away");
    assert_eq!(
        r["result"]["structuredContent"]["reviews"],
        json!(masked_truth("B0AFTER")[..10]),
        "{r}"
    );
    let text = std::fs::read_to_string(env.path("data/audit.log")).expect("audit");
    assert!(
        text.lines()
            .any(|l| l.contains("B0GONE") && l.contains("cancelled by the client")),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains("B0GONE")).count(),
        1,
        "one line for the call: {text}"
    );
    d.stop().await;
}

#[tokio::test]
async fn cancellation_stops_the_call_and_frees_the_slot() {
    let env = shop(1).await;
    one_slow_review_page(&env);
    let d = Daemon::start(&env, 1, "").await;
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let slow = {
        let req = c.request(reqwest::Method::POST).body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "get_reviews", "arguments": {"item": "B0SLOW", "strategy": "testshop", "slot": 0},
                "_meta": {"progressToken": 1}}})
            .to_string(),
        );
        tokio::spawn(async move { req.send().await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let a = c
        .post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 1, "reason": "test"}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    // The slot is free again: the next call on it completes (the fault was used up).
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        c.tool(
            2,
            "get_reviews",
            json!({"item": "B0NEXT", "strategy": "testshop", "slot": 0}),
        ),
    )
    .await
    .expect("the slot was freed by the cancellation");
    assert_eq!(
        r["result"]["structuredContent"]["reviews"],
        json!(masked_truth("B0NEXT")[..10]),
        "{r}"
    );
    slow.abort();
    let text = std::fs::read_to_string(env.path("data/audit.log")).expect("audit");
    assert!(
        text.lines()
            .any(|l| l.contains("B0SLOW") && l.contains("cancelled")),
        "{text}"
    );
    d.stop().await;
}

#[tokio::test]
async fn a_daemon_refuses_a_public_address_without_keys_and_call_reaches_it() {
    let env = shop(1).await;
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        "[server]\nlisten = \"0.0.0.0:0\"\n",
    );
    let out = idpool(&env).arg("serve").output().await.expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a keys file"), "{err}");

    let key = add_key(&env, "cli", "operator").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    let out = idpool(&env)
        .args([
            "call",
            "get_reviews",
            "--args",
            r#"{"item": "B0CALL", "strategy": "testshop"}"#,
        ])
        .args(["--url", &d.url("/mcp"), "--key", &key])
        .output()
        .await
        .expect("call runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["reviews"], json!(masked_truth("B0CALL")[..10]));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("page 1: 10 reviews"),
        "progress on stderr"
    );
    assert_eq!(last_audit(&env)["principal"], "cli");
    // Without the key: refused, exit 1, and a clear message.
    let out = idpool(&env)
        .args(["call", "pool_status", "--url", &d.url("/mcp")])
        .env_remove("IDPOOL_KEY")
        .output()
        .await
        .expect("call runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("API key"), "{err}");
    // One process per data dir: an in-process run next to the daemon is refused
    // (it would take the daemon's browsers for stale ones).
    let out = idpool(&env)
        .args(["call", "pool_status", "--embedded"])
        .output()
        .await
        .expect("call runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("another idpool process") && err.contains("is using the data dir"),
        "{err}"
    );
    let out = idpool(&env)
        .args(["keys", "list"])
        .output()
        .await
        .expect("list");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("cli") && listed.contains("operator") && !listed.contains(&key),
        "{listed}"
    );
    d.stop().await;
}

#[tokio::test]
async fn the_stdio_bridge_resumes_when_the_daemon_forgot_its_session() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let env = shop(1).await;
    let port = common::daemon::free_port();
    let d = Daemon::start_at(&env, port, 1, "", "", &[]).await;
    let mut bridge = idpool(&env)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("idpool mcp starts");
    let mut stdin = bridge.stdin.take().expect("stdin");
    let mut out = BufReader::new(bridge.stdout.take().expect("stdout")).lines();
    async fn send(stdin: &mut tokio::process::ChildStdin, v: Value) {
        stdin
            .write_all(format!("{v}\n").as_bytes())
            .await
            .expect("write");
    }
    async fn read(
        out: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
        id: u64,
    ) -> Value {
        tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(l)) = out.next_line().await {
                let v: Value = serde_json::from_str(&l).expect("JSON on stdout");
                if v["id"] == id {
                    return v;
                }
            }
            Value::Null
        })
        .await
        .expect("an answer")
    }
    send(&mut stdin, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    .await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(
        read(&mut out, 1).await["result"]["serverInfo"]["name"],
        "idpool"
    );
    assert_eq!(
        read(&mut out, 2).await["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(operator_tools().len())
    );
    // A restarted daemon knows no sessions: the bridge opens a new one itself.
    d.stop().await;
    let d = Daemon::start_at(&env, port, 1, "", "", &[]).await;
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "list_strategies", "arguments": {}}}),
    )
    .await;
    let r = read(&mut out, 3).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), bridge.wait()).await;
    d.stop().await;
}

/// The official Python SDK (`mcp` on PyPI, in the venv `scripts/test.sh`
/// makes): the round trip on Streamable HTTP and legacy SSE, a bad argument
/// as a tool error naming it, and the session ended without complaint.
#[tokio::test]
async fn the_python_sdk_round_trips_on_streamable_http_and_legacy_sse() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".idpool/mcp-py-venv/bin/python");
    assert!(
        python.is_file(),
        "the Python SDK is not installed: run scripts/test.sh (it makes .idpool/mcp-py-venv)"
    );
    let env = shop(1).await;
    let key = add_key(&env, "py", "operator").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    for (transport, path, item) in [
        ("http", "/mcp", "B0PYH1"),
        ("sse", "/sse", "B0PYS1"),
        ("modern", "/mcp", "B0PYM1"),
    ] {
        let args = json!({"item": item, "strategy": "testshop", "pages": 1}).to_string();
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            tokio::process::Command::new(&python)
                .arg(root.join("tests/mcp-py/client.py"))
                .args([
                    "--transport",
                    transport,
                    "--url",
                    &d.url(path),
                    "--key",
                    &key,
                ])
                .args(["--tool", "get_reviews", "--args", &args])
                .output(),
        )
        .await
        .expect("client.py finishes")
        .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let r: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{transport}: {e}: {stdout}\n{stderr}"));
        assert!(r.get("error").is_none(), "{transport}: {r}\n{stderr}");
        assert_eq!(r["serverName"], "idpool", "{transport}");
        if transport == "modern" {
            assert_eq!(r["protocolVersion"], "2026-07-28", "{r}");
        }
        assert_eq!(names(&r["tools"]), operator_tools(), "{transport}");
        let sc = &r["result"]["structuredContent"];
        assert_eq!(r["result"]["isError"], false, "{transport}: {r}");
        assert_eq!(
            sc["reviews"],
            json!(masked_truth(item).into_iter().take(10).collect::<Vec<_>>()),
            "{transport}: ground truth"
        );
        assert_eq!(r["bad"]["isError"], true, "{transport}: {r}");
        assert!(
            r["bad"]["text"].as_str().unwrap_or("").contains("url"),
            "{transport}: {r}"
        );
        assert!(
            !stderr.contains("Session termination failed"),
            "{transport}: {stderr}"
        );
    }
    d.stop().await;
}

/// The thin path (a single call, list or ping without progress, answered
/// without rmcp's session task) answers as rmcp does: the same result for
/// the same call as rmcp's stream gives, in a 2025 session and stateless,
/// with a text copy that is the structured copy's JSON.
#[tokio::test]
async fn the_thin_path_answers_what_rmcp_answers() {
    let env = shop(1).await;
    let d = Daemon::start(&env, 1, "").await;
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let args = json!({"item": "B0THIN", "strategy": "testshop"});
    let thin = c.tool(1, "get_reviews", args.clone()).await;
    // The same call with a progress token goes through rmcp (a stream).
    let a = c
        .post(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "get_reviews", "arguments": args, "_meta": {"progressToken": "p"}}}),
        )
        .await;
    assert_eq!(
        a.headers["content-type"].to_str().unwrap_or(""),
        "text/event-stream",
        "progress keeps rmcp's stream"
    );
    let streamed = a.response(2).clone();
    assert_eq!(
        untimed(&thin["result"]),
        untimed(&streamed["result"]),
        "thin and rmcp differ"
    );
    let result = &thin["result"];
    assert_eq!(result["isError"], json!(false));
    assert!(
        result.get("resultType").is_none(),
        "a 2025 session: {result}"
    );
    let text = result["content"][0]["text"].as_str().expect("a text copy");
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("the text copy is JSON"),
        result["structuredContent"]
    );
    assert_eq!(
        result["structuredContent"]["reviews"],
        json!(masked_truth("B0THIN")[..10])
    );
    // A failure and an unknown tool answer as rmcp's do.
    let bad = json!({"item": "B0THIN", "strategy": "nope"});
    let thin_bad = c.tool(3, "get_reviews", bad.clone()).await;
    let a = c
        .post(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "get_reviews", "arguments": bad, "_meta": {"progressToken": "q"}}}),
        )
        .await;
    assert_eq!(thin_bad, a.response(3).clone());
    assert_eq!(thin_bad["result"]["isError"], json!(true), "{thin_bad}");
    let unknown = c.tool(4, "no_such_tool", json!({})).await;
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
    // tools/list and ping.
    let list = c.call(5, "tools/list", json!({})).await;
    let a = c
        .post(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {"progressToken": "r"}}}))
        .await;
    assert_eq!(list, a.response(5).clone());
    assert!(
        list["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 5)
    );
    assert_eq!(c.call(6, "ping", json!({})).await["result"], json!({}));

    // 2026-07-28 stateless: `resultType`, and the same result.
    let stateless = Mcp::new(&d, None);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let a = stateless
        .send(
            stateless
                .request(reqwest::Method::POST)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "get_reviews")
                .body(
                    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                    "name": "get_reviews", "arguments": {"item": "B0THIN", "strategy": "testshop"},
                    "_meta": meta}})
                    .to_string(),
                ),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let r = &a.response(7)["result"];
    assert_eq!(r["resultType"], json!("complete"), "{r}");
    let (r, result) = (untimed(r), untimed(result));
    assert_eq!(r["structuredContent"], result["structuredContent"]);
    assert_eq!(r["content"], result["content"]);

    // Each went the thin way: three calls, a list and a ping in the session,
    // one call stateless.
    let metrics = reqwest::get(d.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    for line in [
        "idpool_mcp_thin_total{lane=\"session\",method=\"tools/call\"} 3",
        "idpool_mcp_thin_total{lane=\"session\",method=\"tools/list\"} 1",
        "idpool_mcp_thin_total{lane=\"session\",method=\"ping\"} 1",
        "idpool_mcp_thin_total{lane=\"stateless\",method=\"tools/call\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in /metrics");
    }
    d.stop().await;
}

/// A tool result without its timings (each attempt's `ms`), the text copy
/// read as JSON: two runs of one call compare equal.
fn untimed(result: &Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("ms");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut r = result.clone();
    if let Some(blocks) = r["content"].as_array_mut() {
        for b in blocks {
            if let Some(text) = b["text"].as_str()
                && let Ok(parsed) = serde_json::from_str::<Value>(text)
            {
                b["text"] = parsed;
            }
        }
    }
    strip(&mut r);
    r
}

/// `@modelcontextprotocol/inspector --cli ARGS` (in tests/mcp-js): whether
/// it succeeded, its stdout parsed as JSON (`--format json`), its stderr.
async fn inspector(env: &common::Env, args: &[&str]) -> (bool, Value, String) {
    let cli = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-js/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    );
    let mut c = tokio::process::Command::new("node");
    c.arg(cli).args(["--cli", "--format", "json"]).args(args);
    // Its catalog of servers (it writes one), inside the test's folder.
    c.env("MCP_CATALOG_PATH", env.path("inspector-catalog.json"));
    let out = tokio::time::timeout(Duration::from_secs(120), c.kill_on_drop(true).output())
        .await
        .expect("the inspector finishes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::String(stdout));
    (out.status.success(), json, stderr)
}

/// The tool names in an inspector `tools/list` answer.
fn inspector_tools(v: &Value) -> Vec<String> {
    v["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_inspector_cli_lists_and_calls_tools_on_every_transport() {
    let env = shop(1).await;
    let key = add_key(&env, "inspector", "operator").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    let bearer = format!("Authorization: Bearer {key}");
    let call = r#"{"item": "B0INSPECT", "strategy": "testshop"}"#;
    let reviews = |v: &Value, how: &str| {
        let sc = &v["result"]["structuredContent"];
        assert_eq!(v["result"]["isError"], false, "{how}: {v}");
        assert_eq!(sc["count"], 10, "{how}: {v}");
        assert_eq!(
            sc["reviews"].as_array().map(Vec::as_slice),
            Some(&masked_truth("B0INSPECT")[..10]),
            "{how}: ground truth"
        );
    };

    // Streamable HTTP (the 2025 handshake): every schema passes the
    // Inspector's strict portability check with no error and no warning.
    let (ok, v, err) = inspector(
        &env,
        &[
            &d.url("/mcp"),
            "--transport",
            "http",
            "--header",
            &bearer,
            "--method",
            "tools/list",
            "--strict",
        ],
    )
    .await;
    assert!(ok, "{v}\n{err}");
    let tools = inspector_tools(&v["result"]);
    assert_eq!(tools, operator_tools(), "{v}");
    // (It names each problem as `Warning: tool "x"` / `Error: tool "x"`, and
    // a count; with none, it says nothing.)
    assert!(
        !err.contains("tool \"") && !err.contains("across"),
        "schema portability: {err}"
    );
    // `get_reviews` through each transport: Streamable HTTP (the 2025
    // handshake, then the 2026-07-28 era: server/discover, stateless) and
    // legacy SSE with the key in the URL only (no header at all).
    let get = [
        "--method",
        "tools/call",
        "--tool-name",
        "get_reviews",
        "--tool-args-json",
        call,
    ];
    let http = d.url("/mcp");
    let sse = d.url(&format!("/sse?key={key}"));
    let transports: [(&str, Vec<&str>); 3] = [
        (
            "Streamable HTTP",
            vec![&http, "--transport", "http", "--header", &bearer],
        ),
        (
            "2026-07-28",
            vec![
                &http,
                "--transport",
                "http",
                "--header",
                &bearer,
                "--protocol-era",
                "modern",
            ],
        ),
        ("legacy SSE with ?key=", vec![&sse, "--transport", "sse"]),
    ];
    for (how, target) in transports {
        let args: Vec<&str> = target.into_iter().chain(get).collect();
        let (ok, v, err) = inspector(&env, &args).await;
        assert!(ok, "{how}: {err}");
        reviews(&v, how);
    }

    // The stdio bridge (`idpool mcp`), its key in its environment.
    let cfg = env.path("idpool.toml");
    let cfg = cfg.to_str().unwrap_or_default();
    let key_env = format!("IDPOOL_KEY={key}");
    let bridge = [env!("CARGO_BIN_EXE_idpool"), "--config", cfg, "mcp"];
    let args: Vec<&str> = ["--transport", "stdio", "-e", &key_env]
        .into_iter()
        .chain(get)
        .chain(["--"])
        .chain(bridge)
        .collect();
    let (ok, v, err) = inspector(&env, &args).await;
    assert!(ok, "{err}");
    reviews(&v, "the stdio bridge");
    d.stop().await;
}

/// Every tool but `keyword_rank` (whose strategy needs Amazon's fixture pages:
/// `tests/strategies/keyword_rank.rs` runs it the same way) called once
/// over MCP by an admin, each real result validated against its own
/// `outputSchema` by Ajv 2020 in strict mode (`tests/mcp-js/every_tool.mjs`).
#[tokio::test]
async fn every_tools_real_result_keeps_to_its_output_schema() {
    let env = shop(1).await;
    let port = env.testbed.https_addr.port();
    for (name, host) in [("duckduckgo", "ddg.web.test"), ("bing", "bing.web.test")] {
        let base = format!("https://{host}:{port}");
        env.write(
            &format!("strategies/{name}.toml"),
            &common::bundled_strategy_at(name, host, &base, |_| None),
        );
    }
    let admin = add_key(&env, "root", "admin").await;
    let d = Daemon::start_with(
        &env,
        1,
        "keys_file = \"keys.toml\"",
        "[security.resolve]\n\"news.web.test\" = \"127.0.0.1\"\n\"ddg.web.test\" = \"127.0.0.1\"\n\"bing.web.test\" = \"127.0.0.1\"\n\n[web]\nmin_interval_ms = 0\n",
        &[],
    )
    .await;
    let news = |p: &str| format!("https://news.web.test:{port}{p}");
    let item = env.url("/product/B0EVERY").to_string();
    let secret = "correct horse battery staple";
    let plan = json!([
        {"tool": "pool_status"},
        {"tool": "list_strategies"},
        {"tool": "get_reviews", "args": {"item": "B0EVERY", "strategy": "testshop", "pages": 2}},
        {"tool": "extract", "args": {"strategy": "testshop", "operation": "product", "params": {"item": "B0EVERY"}}},
        {"tool": "scrape", "args": {"url": item, "format": ["markdown", "links"]}},
        {"tool": "search", "args": {"query": "kettle", "scrape_results": 1}},
        {"tool": "map", "args": {"url": news("/site/")}},
        {"tool": "crawl", "args": {"url": news("/site/"), "max_pages": 3}, "keep": {"crawl": "/id"}},
        {"tool": "crawl_status", "args": {"id": "$crawl"}},
        {"tool": "browser_open", "args": {"url": news("/site/more")}, "keep": {"session": "/session", "snapshot": "/snapshot"}},
        {"tool": "browser_snapshot", "args": {"session": "$session", "interactive_only": true}, "keep": {"snapshot": "/snapshot"}},
        {"tool": "browser_click", "args": {"session": "$session", "ref": "$ref:Load more"}},
        {"tool": "browser_wait_for", "args": {"session": "$session", "text": "Item 6"}},
        {"tool": "browser_navigate", "args": {"session": "$session", "url": news("/site/search")}, "keep": {"snapshot": "/snapshot"}},
        {"tool": "browser_type", "args": {"session": "$session", "ref": "$ref:Search the catalog", "text": "kettle", "submit": true}, "keep": {"snapshot": "/snapshot"}},
        {"tool": "browser_select", "args": {"session": "$session", "ref": "$ref:Sort by", "values": ["Price"]}},
        {"tool": "browser_press", "args": {"session": "$session", "key": "Tab"}},
        {"tool": "browser_screenshot", "args": {"session": "$session"}},
        {"tool": "browser_close", "args": {"session": "$session"}},
        {"tool": "refresh_cookies", "args": {"strategy": "testshop", "slot": 0}},
        {"tool": "reset_slot", "args": {"slot": 0}},
        {"tool": "calibrate", "args": {"slot": 0}},
        {"tool": "export_session", "args": {"slot": 0, "max_chars": 2_000_000}, "keep": {"session": "/session", "format": "/format"}},
        {"tool": "import_session", "args": {"slot": 0, "session": "$session", "format": "$format"}},
        {"tool": "export_identity", "args": {"slot": 0, "passphrase": secret, "max_chars": 2_000_000}, "keep": {"bundle": "/bundle"}},
        {"tool": "import_identity", "args": {"slot": 0, "bundle": "$bundle", "passphrase": secret}},
        {"tool": "retire_slot", "args": {"slot": 0}},
    ]);
    let r = common::daemon::every_tool(&d, &admin, &plan).await;
    let results = r["results"].as_array().expect("results");
    let called: Vec<&str> = results.iter().filter_map(|x| x["tool"].as_str()).collect();
    let mut listed: Vec<&str> = r["listed"]
        .as_array()
        .expect("listed")
        .iter()
        .filter_map(Value::as_str)
        .filter(|t| *t != "keyword_rank")
        .collect();
    listed.sort_unstable();
    let mut sorted = called.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, listed, "every tool but keyword_rank is called once");
    for x in results {
        assert_eq!(x["ok"], true, "{x}");
    }
    d.stop().await;
}
