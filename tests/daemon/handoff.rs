//! A person when a site wants one (issue 38, item 3): the testshop with
//! `[handoff]` behind the testbed's robot check. A call meets the check,
//! the daemon raises `handoff_needed` (the event, one webhook POST without
//! secrets, MCP progress naming the slot and site) and waits; the test,
//! as a person at the live view, clicks the field, types the characters
//! the screen shows and presses Enter over the live-view WebSocket; the
//! call goes on on the same identity with the cookie the person earned and
//! returns the reviews. Without a person it fails `needs_person` with
//! `retry_after` after the wait, while the status page's banner says a call
//! waits.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::chromium::{Chromium, eval, until};
use common::daemon::{Daemon, Mcp};
use common::proxies::{Seen, http_connect_proxy};
use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const WAIT_SECS: u64 = 15;
const PROXY_PASSWORD: &str = "pw-not-for-webhooks";

/// A webhook receiver on loopback: every POST body it got.
async fn webhook() -> (u16, Arc<Mutex<Vec<Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, got)
}

/// The recent events of `kind`.
async fn events(d: &Daemon, kind: &str) -> Vec<Value> {
    let v: Value = reqwest::get(d.url("/api/v1/events/recent"))
        .await
        .expect("events")
        .json()
        .await
        .expect("json");
    v["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

async fn wait_for_needed(d: &Daemon, n: usize) -> Value {
    for _ in 0..200 {
        let all = events(d, "handoff_needed").await;
        if all.len() >= n {
            return all[n - 1].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no handoff_needed event number {n}:\n{}", d.log_text());
}

type LiveView =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The live view of session `id`, once its first frame came (what the
/// person sees).
async fn live_view(d: &Daemon, id: &str) -> LiveView {
    let ws_url = d
        .url(&format!("/api/v1/live/{id}/ws"))
        .replace("http:", "ws:");
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
        .await
        .expect("the live view");
    let framed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m
                && serde_json::from_str::<Value>(&t).is_ok_and(|v| v["type"] == "frame")
            {
                return;
            }
        }
    })
    .await;
    assert!(
        framed.is_ok(),
        "no frame of the page the person is asked to clear"
    );
    ws
}

/// The person's inputs, one by one, as a hand would send them.
async fn act(ws: &mut LiveView, inputs: &[Value]) {
    for i in inputs {
        ws.send(Message::Text(i.to_string().into()))
            .await
            .expect("send");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

#[tokio::test]
async fn a_call_waits_for_a_person_and_goes_on_with_what_they_earned() {
    let env = common::shop(2).await;
    // The shop's strategy, with a person called for its robot check.
    let strategy = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("read");
    env.write(
        "strategies/testshop.toml",
        &format!("{strategy}\n[handoff]\non = [\"block\"]\nwait_secs = {WAIT_SECS}\n"),
    );
    let (hook, hooked) = webhook().await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let proxy = http_connect_proxy(seen.clone()).await;
    // Both slots go out through a proxy with a password: the webhook must
    // not carry it.
    env.write(
        "profiles/default.toml",
        &format!(
            "emulation = \"chrome_149\"\nproxy = \"http://dave:{PROXY_PASSWORD}@127.0.0.1:{proxy}\"\n"
        ),
    );
    let d = Daemon::start_with(
        &env,
        2,
        "anonymous_role = \"admin\"\n",
        &format!("[notify]\nurl = \"http://127.0.0.1:{hook}/hook\"\n"),
        &[],
    )
    .await;
    let port = d.port;
    env.testbed.set_modes(|m| m.robot_check = true);

    // The call, over MCP with a progress token: it waits.
    let mut c = Mcp::new(&d, None);
    assert!(c.initialize().await.status.is_success());
    let call = tokio::spawn(async move {
        c.post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "get_reviews",
            "arguments": {"item": "B0HAND1", "strategy": "testshop", "slot": 0},
            "_meta": {"progressToken": "h"}}}),
        )
        .await
    });
    let ev = wait_for_needed(&d, 1).await;
    assert_eq!(ev["slot"], 0, "{ev}");
    assert_eq!(ev["strategy"], "testshop");
    let id = ev["detail"]["session"]
        .as_str()
        .expect("session")
        .to_string();
    assert_eq!(ev["detail"]["live"], json!(format!("/live/{id}")), "{ev}");
    assert!(!call.is_finished(), "the call did not wait");

    // The person: the live view's frames show the robot check; they click
    // its field, type what it shows and press Enter.
    let mut ws = live_view(&d, &id).await;
    let (code, solved) = env.testbed.robot_check();
    assert_eq!(solved, 0);
    let code = code.expect("the characters on the screen");
    act(
        &mut ws,
        &[
            json!({"type": "click", "x": 200, "y": 220}),
            json!({"type": "text", "text": code}),
            json!({"type": "key", "key": "Enter"}),
        ],
    )
    .await;
    let answer = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call ends once the person cleared the check")
        .expect("join");
    let r = answer.response(1);
    assert_eq!(r["result"]["isError"], false, "{r}\n{}", d.log_text());
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["reviews"].as_array().map(Vec::len), Some(10), "{out}");
    assert!(
        out["pages"]
            .as_array()
            .expect("pages")
            .iter()
            .all(|p| p["slot"] == 0),
        "the call went on on the same identity: {out}"
    );
    assert_eq!(env.testbed.robot_check().1, 1, "one check passed");
    // The same identity's HTTP requests carry the cookie the person earned.
    let earned = env
        .testbed
        .log()
        .into_iter()
        .rev()
        .find(|e| e.path.contains("B0HAND1"));
    assert!(
        earned
            .as_ref()
            .and_then(|e| e.cookie.as_deref())
            .is_some_and(|c| c.contains("tb_human=")),
        "the retried request did not carry the earned cookie: {earned:?}"
    );
    let progress: Vec<String> = answer
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        progress
            .iter()
            .any(|m| m.starts_with("waiting for a person on slot 0, 127.0.0.1")),
        "{progress:?}"
    );
    // One webhook, with the live view's link and nothing secret.
    for _ in 0..50 {
        if !hooked.lock().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hooks = hooked.lock().clone();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    let h = &hooks[0];
    assert_eq!(h["event"], "handoff_needed");
    assert_eq!(
        (h["slot"].clone(), h["site"].clone()),
        (json!(0), json!("127.0.0.1"))
    );
    assert_eq!(
        h["live_url"],
        json!(format!("http://127.0.0.1:{port}/live/{id}")),
        "{h}"
    );
    let text = h.to_string();
    for secret in [PROXY_PASSWORD, "tb_sid", "tb_human", "dave:"] {
        assert!(!text.contains(secret), "`{secret}` in the webhook: {text}");
    }

    // Nobody comes for slot 1: after the wait, `needs_person` with
    // retry_after; meanwhile the status page's banner says a call waits.
    let d2 = d.url("");
    let nobody = tokio::spawn(async move {
        let r = reqwest::Client::new()
            .post(format!("{d2}/api/v1/tools/get_reviews"))
            .json(&json!({"item": "B0HAND2", "strategy": "testshop", "slot": 1}))
            .send()
            .await
            .expect("post");
        let retry = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        (
            r.status().as_u16(),
            retry,
            r.json::<Value>().await.unwrap_or(Value::Null),
        )
    });
    wait_for_needed(&d, 2).await;
    let chromium = Chromium::start(env.path("").as_path()).await;
    let page = chromium.page(1280, 900, false, &d.url("/")).await;
    until(
        &page,
        "!document.getElementById('handoff').hidden && document.querySelector('#handoff a[href^=\"/live/\"]') !== null",
        20,
        "the hand-off banner",
    )
    .await;
    let banner = eval(&page, "document.getElementById('handoff').textContent").await;
    assert!(
        banner
            .as_str()
            .is_some_and(|t| t.contains("slot 1") && t.contains("127.0.0.1")),
        "{banner}"
    );
    chromium.stop().await;
    let (status, retry, body) = tokio::time::timeout(Duration::from_secs(WAIT_SECS + 45), nobody)
        .await
        .expect("the call ends after the wait")
        .expect("join");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["kind"], "needs_person", "{body}");
    assert_eq!(body["retry_after"], json!(WAIT_SECS as f64), "{body}");
    assert_eq!(retry.as_deref(), Some(WAIT_SECS.to_string().as_str()));
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("slot 1") && e.contains("nobody cleared it")),
        "{body}"
    );
    let done = events(&d, "handoff_done").await;
    let states: Vec<&str> = done
        .iter()
        .filter_map(|e| e["detail"]["state"].as_str())
        .collect();
    assert_eq!(states, ["cleared", "timed_out"], "{done:?}");
    assert_eq!(hooked.lock().len(), 2, "one webhook per hand-off");

    // A caller that hangs up while it waits ends its hand-off: the live
    // session ends `cancelled`, and the slot can ask a person again.
    let gone = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client")
        .post(d.url("/api/v1/tools/get_reviews"))
        .json(&json!({"item": "B0HAND3", "strategy": "testshop", "slot": 1}))
        .send()
        .await;
    assert!(gone.is_err(), "the call did not wait: {gone:?}");
    let third = wait_for_needed(&d, 3).await;
    let id3 = third["detail"]["session"]
        .as_str()
        .expect("session")
        .to_string();
    let mut ended = Value::Null;
    for _ in 0..100 {
        let v: Value = reqwest::get(d.url(&format!("/api/v1/live/{id3}")))
            .await
            .expect("live session")
            .json()
            .await
            .expect("json");
        if v["status"]["done"] == true {
            ended = v;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ended["status"]["state"], "cancelled", "{ended}");
    let again = tokio::spawn({
        let u = d.url("/api/v1/tools/get_reviews");
        async move {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .expect("client")
                .post(u)
                .json(&json!({"item": "B0HAND4", "strategy": "testshop", "slot": 1}))
                .send()
                .await
                .map(|r| r.status())
        }
    });
    let fourth = wait_for_needed(&d, 4).await;
    assert_eq!(fourth["slot"], 1, "{fourth}");
    let again = again.await.expect("join");
    assert!(
        again.is_err(),
        "the fourth call did not wait: {again:?}\n{}",
        d.log_text()
    );
    d.stop().await;
}

/// `[handoff] on = ["login"]`: a members-only call on a slot that turns out
/// signed out waits while a person signs the identity in through the live
/// view (the strategy's sign-in page), then reads the members' items on
/// that slot.
#[tokio::test]
async fn a_person_signs_the_identity_in_and_the_call_goes_on() {
    let env = common::shop(1).await;
    let strategy = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("read");
    env.write(
        "strategies/testshop.toml",
        &format!("{strategy}\n[handoff]\non = [\"login\"]\nwait_secs = 60\n"),
    );
    let d = Daemon::start_with(&env, 1, "anonymous_role = \"admin\"\n", "", &[]).await;
    let d2 = d.url("");
    let call = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{d2}/api/v1/tools/extract"))
            .json(
                &json!({"strategy": "testshop", "operation": "account_reviews",
                          "params": {"item": "ACCT7"}, "slot": 0}),
            )
            .send()
            .await
            .expect("post")
            .json::<Value>()
            .await
            .unwrap_or(Value::Null)
    });
    let ev = wait_for_needed(&d, 1).await;
    assert_eq!(ev["detail"]["reason"], "login_required", "{ev}");
    let id = ev["detail"]["session"]
        .as_str()
        .expect("session")
        .to_string();
    let mut ws = live_view(&d, &id).await;
    // The person signs in as in their own browser (the page's blank, then
    // Tab past the account line's link to the email field).
    act(
        &mut ws,
        &[
            json!({"type": "click", "x": 700, "y": 600}),
            json!({"type": "key", "key": "Tab"}),
            json!({"type": "key", "key": "Tab"}),
            json!({"type": "text", "text": idpool_testbed::accounts::EMAIL}),
            json!({"type": "key", "key": "Tab"}),
            json!({"type": "text", "text": idpool_testbed::accounts::PASSWORD}),
            json!({"type": "key", "key": "Enter"}),
        ],
    )
    .await;
    let r = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call ends once the person signed in")
        .expect("join");
    assert!(
        r["items"].as_array().is_some_and(|i| !i.is_empty()) && r["fallback"].is_null(),
        "{r}\n{}",
        d.log_text()
    );
    assert_eq!(r["slot"], 0, "{r}");
    assert_eq!(env.testbed.shared.accounts.signins(), 1);
    let status: Value = reqwest::get(d.url("/api/v1/slots"))
        .await
        .expect("slots")
        .json()
        .await
        .expect("json");
    assert_eq!(
        status["slots"][0]["login"]["testshop"]["state"], "logged_in",
        "{status}"
    );
    d.stop().await;
}
