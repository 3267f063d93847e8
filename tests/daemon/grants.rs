//! Grants (issue 38, item 1): a key limited to some identities never acts
//! as another one, over MCP, REST and the stdio bridge, even when its own
//! identity rests; a key whose grants leave out a tool on an identity is
//! refused with -32001 and audited.

use crate::common;

use std::time::Duration;

use common::daemon::{Daemon, Mcp, add_key_granted, idpool};
use common::shop;
use idpool_testbed::{Fault, FaultKind};
use serde_json::{Value, json};

/// One tool call over the stdio bridge (`idpool mcp`, the key in
/// `IDPOOL_KEY`): the JSON-RPC answer.
async fn over_stdio(env: &common::Env, key: &str, tool: &str, args: Value) -> Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut bridge = idpool(env)
        .arg("mcp")
        .env("IDPOOL_KEY", key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("idpool mcp starts");
    let mut stdin = bridge.stdin.take().expect("stdin");
    let mut out = BufReader::new(bridge.stdout.take().expect("stdout")).lines();
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": tool, "arguments": args}}),
    ] {
        stdin
            .write_all(format!("{m}\n").as_bytes())
            .await
            .expect("write");
    }
    let answer = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(l)) = out.next_line().await {
            let v: Value = serde_json::from_str(&l).expect("JSON on stdout");
            if v["id"] == 2 {
                return v;
            }
        }
        Value::Null
    })
    .await
    .expect("an answer");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), bridge.wait()).await;
    answer
}

/// A tool result's `slot`, or its error's kind.
fn served(v: &Value) -> Result<u64, String> {
    let r = &v["result"];
    if r["isError"] == true {
        return Err(format!(
            "{}: {}",
            r["_meta"]["idpool/error"]["kind"].as_str().unwrap_or("?"),
            r["content"][0]["text"].as_str().unwrap_or("")
        ));
    }
    r["structuredContent"]["slot"]
        .as_u64()
        .ok_or_else(|| format!("no slot in {v}"))
}

#[tokio::test]
async fn a_key_granted_one_identity_never_acts_as_another() {
    let env = shop(2).await;
    let one = add_key_granted(&env, "only-one", "operator", &["slots=1"]).await;
    // The CLI: grants listed by number, one more and back, never the last
    // one taken (that would widen the key), a bad grant named.
    let keys = |args: &'static [&'static str]| {
        let mut c = idpool(&env);
        c.arg("keys").args(args);
        async move {
            let o = c.output().await.expect("idpool keys");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            (o.status.success(), text)
        }
    };
    let (ok, text) = keys(&["grant", "only-one", "tools=get_reviews;until=2099-01-01"]).await;
    assert!(ok, "{text}");
    let (_, listed) = keys(&["list"]).await;
    assert!(
        listed.contains("grant 1: slots=1") && listed.contains("grant 2: tools=get_reviews;until="),
        "{listed}"
    );
    assert!(keys(&["revoke-grant", "only-one", "2"]).await.0);
    let (ok, text) = keys(&["revoke-grant", "only-one", "1"]).await;
    assert!(!ok && text.contains("last grant"), "{text}");
    let (ok, text) = keys(&["add", "bad", "--role", "operator", "--grant", "colour=red"]).await;
    assert!(!ok && text.contains("`colour`"), "{text}");
    let d = Daemon::start_with(
        &env,
        2,
        "",
        "[breaker]\nthreshold = 1\ncooldown_secs = 600\n",
        &[],
    )
    .await;
    let http = reqwest::Client::new();
    let args = |item: &str| json!({"item": item, "strategy": "testshop"});
    // MCP, the REST face and the stdio bridge: slot 1 every time, though
    // the round robin would take slot 0 every other call.
    let mut c = Mcp::new(&d, Some(&one));
    assert!(c.initialize().await.status.is_success());
    for (i, item) in ["B0GRA1", "B0GRA2", "B0GRA3"].iter().enumerate() {
        let r = c.tool(10 + i as u64, "get_reviews", args(item)).await;
        assert_eq!(served(&r), Ok(1), "MCP call {i}: {r}");
    }
    for item in ["B0GRR1", "B0GRR2"] {
        let r: Value = http
            .post(d.url("/api/v1/tools/get_reviews"))
            .bearer_auth(&one)
            .json(&args(item))
            .send()
            .await
            .expect("post")
            .json()
            .await
            .expect("json");
        assert_eq!(r["slot"], 1, "REST: {r}");
    }
    let r = over_stdio(&env, &one, "get_reviews", args("B0GRS1")).await;
    assert_eq!(served(&r), Ok(1), "stdio bridge: {r}");
    // Pinning the other identity is refused, by name, before any request.
    let before = env.testbed.log().len();
    let r = c
        .tool(
            20,
            "get_reviews",
            json!({"item": "B0GRP1", "strategy": "testshop", "slot": 0}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("may not use slot 0")),
        "{r}"
    );
    assert_eq!(env.testbed.log().len(), before, "a request was sent");

    // Slot 1 is blocked and rests: the call fails `not_granted` with the
    // wait, and is not moved to slot 0, which would serve it.
    env.testbed
        .set_modes(|m| m.fault = Some(Fault::of(FaultKind::Error, Some("/"), 401)));
    let r = c.tool(30, "get_reviews", args("B0GRB1")).await;
    assert_eq!(r["result"]["isError"], true, "the block: {r}");
    env.testbed.set_modes(|m| m.fault = None);
    let r = c.tool(31, "get_reviews", args("B0GRB2")).await;
    let text = served(&r).expect_err("slot 1 rests");
    assert!(
        text.contains("not_granted") && text.contains("not granted to it"),
        "{text}"
    );
    let rest: Value = http
        .post(d.url("/api/v1/tools/get_reviews"))
        .bearer_auth(&one)
        .json(&args("B0GRB3"))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    assert_eq!(rest["kind"], "not_granted", "REST: {rest}");
    assert!(
        rest["retry_after"].as_f64().is_some_and(|s| s > 1.0),
        "{rest}"
    );
    // Slot 0 never sent a request for this key.
    let status: Value = http
        .get(d.url("/api/v1/slots"))
        .bearer_auth(&one)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(status["slots"][0]["requests"], 0, "slot 0 was used");
    let lines = common::audit_lines(&env);
    let used: Vec<&Value> = lines
        .iter()
        .filter(|l| l["principal"] == "only-one" && l["slot"].is_u64())
        .map(|l| &l["slot"])
        .collect();
    assert!(used.len() >= 6, "{lines:?}");
    assert!(used.iter().all(|s| **s == 1), "{used:?}");
    d.stop().await;
}

/// A key that may read through a signed-in identity but not type in its
/// browser: `browser_type` on a session on that identity is -32001, and
/// the refusal is in the audit log; the same key types on the identity its
/// other grant covers.
#[tokio::test]
async fn a_tool_left_out_on_a_signed_in_identity_is_refused_and_audited() {
    let env = shop(2).await;
    let admin = common::daemon::add_key(&env, "root", "admin").await;
    let reader = add_key_granted(
        &env,
        "reader",
        "operator",
        &[
            "signed_in=testshop;tools=get_reviews,browser_open,browser_snapshot,browser_close",
            "slots=1",
        ],
    )
    .await;
    let warden = add_key_granted(&env, "warden", "admin", &["slots=1"]).await;
    let searcher = add_key_granted(&env, "searcher", "operator", &["tools=search"]).await;
    let d = Daemon::start(&env, 2, "").await;
    let http = reqwest::Client::new();
    // An admin limited to slot 1 opens no sign-in session (live view) on
    // slot 0; on slot 1 it does.
    let login = |slot: usize| {
        http.post(d.url(&format!("/api/v1/slots/{slot}/login")))
            .bearer_auth(&warden)
            .json(&json!({"strategy": "testshop"}))
            .send()
    };
    let r = login(0).await.expect("post");
    assert_eq!(r.status(), 403);
    let said = r.text().await.unwrap_or_default();
    assert!(said.contains("may not use slot 0 for `login`"), "{said}");
    let r = login(1).await.expect("post");
    assert_eq!(r.status(), 200);
    let live: Value = r.json().await.expect("json");
    let id = live["id"].as_str().expect("id").to_string();
    let ended = http
        .delete(d.url(&format!("/api/v1/live/{id}")))
        .bearer_auth(&warden)
        .send()
        .await
        .expect("delete");
    assert_eq!(ended.status(), 200);
    // Slot 0 signs in (the user's own account, imported).
    let token = common::sign_in(&env).await;
    let c = idpool_testbed::accounts::COOKIE;
    let file = format!(
        "# Netscape HTTP Cookie File\n#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\t{c}\t{token}\n"
    );
    let r: Value = http
        .post(d.url("/api/v1/slots/0/session-import"))
        .bearer_auth(&admin)
        .json(&json!({"session": file}))
        .send()
        .await
        .expect("import")
        .json()
        .await
        .expect("json");
    assert_eq!(r["login"]["testshop"], "logged_in", "{r}");
    // Who may use which identity, as the status page shows it (admin).
    let get = |path: &'static str, key: &str| {
        let (http, url, key) = (http.clone(), d.url(path), key.to_string());
        async move {
            let r = http.get(url).bearer_auth(key).send().await.expect("get");
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (code, who) = get("/api/v1/grants", &admin).await;
    assert_eq!(code, 200, "{who}");
    let keys_of = |slot: usize| -> Vec<String> {
        who["slots"][slot]["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| format!("{}: {}", k["key"].as_str().unwrap_or(""), k["by"]))
            .collect()
    };
    let on0 = keys_of(0);
    assert!(
        on0.iter()
            .any(|k| k.starts_with("root: ") && k.contains("every identity")),
        "{on0:?}"
    );
    assert!(
        on0.iter()
            .any(|k| k.starts_with("reader: ") && k.contains("signed_in=testshop")),
        "{on0:?}"
    );
    let on1 = keys_of(1);
    assert!(
        on1.iter()
            .any(|k| k.starts_with("reader: ") && k.contains("slots=1")),
        "{on1:?}"
    );
    assert!(!on1.iter().any(|k| k.contains("signed_in")), "{on1:?}");
    assert_eq!(
        get("/api/v1/grants", &reader).await.0,
        403,
        "an operator may not list every key"
    );
    let (_, me) = get("/api/v1/whoami", &reader).await;
    assert_eq!(me["grants"].as_array().map(Vec::len), Some(2), "{me}");
    let mut m = Mcp::new(&d, Some(&reader));
    assert!(m.initialize().await.status.is_success());
    let open = m
        .tool(
            1,
            "browser_open",
            json!({"strategy": "testshop", "slot": 0,
            "url": env.url("/account").as_str()}),
        )
        .await;
    let session = open["result"]["structuredContent"]["session"]
        .as_str()
        .unwrap_or_else(|| panic!("browser_open on the signed-in slot: {open}"))
        .to_string();
    let typed = m
        .tool(
            2,
            "browser_type",
            json!({"session": session, "ref": "e1", "text": "hello"}),
        )
        .await;
    assert_eq!(typed["error"]["code"], -32001, "{typed}");
    let msg = typed["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("may not use slot 0 for `browser_type`"),
        "{msg}"
    );
    let refused = common::audit_lines(&env)
        .into_iter()
        .rev()
        .find(|l| l["tool"] == "browser_type")
        .expect("the refusal is audited");
    assert_eq!(refused["principal"], "reader");
    assert_eq!(refused["ok"], false);
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("slot 0")),
        "{refused}"
    );
    assert!(
        !refused.to_string().contains("hello"),
        "typed text in the audit: {refused}"
    );
    let closed = m
        .tool(3, "browser_close", json!({"session": session}))
        .await;
    assert_eq!(closed["result"]["isError"], false, "{closed}");
    // The signed-out slot 1 is the key's for every tool: a session there,
    // and `browser_type` on it passes the gate (the ref is the page's to
    // refuse).
    let open = m
        .tool(
            4,
            "browser_open",
            json!({"strategy": "testshop", "slot": 1,
            "url": env.url("/").as_str()}),
        )
        .await;
    assert_eq!(open["result"]["structuredContent"]["slot"], 1, "{open}");
    let on_one = open["result"]["structuredContent"]["session"]
        .as_str()
        .expect("session")
        .to_string();
    let typed = m
        .tool(
            6,
            "browser_type",
            json!({"session": on_one, "ref": "e999", "text": "x"}),
        )
        .await;
    assert!(typed.get("error").is_none(), "refused at the gate: {typed}");
    assert_eq!(typed["result"]["isError"], true, "{typed}");
    // Another tool on the signed-in identity: refused as well.
    let r = m
        .tool(
            5,
            "scrape",
            json!({"url": env.url("/").as_str(), "slot": 0}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    // `search` with `scrape_results` fetches pages as `scrape` does: a key
    // whose grants leave `scrape` out may search, not fetch.
    let search = |args: Value| {
        http.post(d.url("/api/v1/tools/search"))
            .bearer_auth(&searcher)
            .json(&args)
            .send()
    };
    let r = search(json!({"query": "kettle", "scrape_results": 1}))
        .await
        .expect("post");
    assert_eq!(r.status(), 403);
    let said = r.text().await.unwrap_or_default();
    assert!(said.contains("scrape"), "{said}");
    let r = search(json!({"query": "kettle"})).await.expect("post");
    assert_ne!(r.status(), 403, "searching alone is granted");
    d.stop().await;
}
