//! Logging in by hand through the live view (issue 16, item 4): `idpool
//! login --slot 1 --strategy testshop` through the daemon prints the live
//! view's URL; the test then signs the slot in through the live view's
//! WebSocket only (screencast frames arrive; clicks and keys sent there fill
//! the testbed's sign-in form), the slot becomes `logged_in`, its cookies are
//! saved, the audit log has the session without what was typed, and viewer
//! and operator keys are refused.

use crate::common;

use std::time::Duration;

use base64::Engine;
use common::daemon::{Daemon, add_key, idpool};
use common::shop;
use futures_util::{SinkExt, StreamExt};
use idpool_testbed::accounts;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn a_person_signs_a_slot_in_through_the_live_view() {
    let env = shop(2).await;
    // Issue 33: the main-world probe in every page the person sees.
    env.testbed.set_modes(|m| m.probe = true);
    let admin = add_key(&env, "root", "admin").await;
    let operator = add_key(&env, "agent", "operator").await;
    let viewer = add_key(&env, "phone", "viewer").await;
    let d = Daemon::start(&env, 2, "").await;
    let http = reqwest::Client::new();
    // GET `path` as the admin: its JSON.
    let admin_get = |path: String| {
        let b = http.get(d.url(&path)).bearer_auth(&admin);
        async move {
            b.send()
                .await
                .expect("GET")
                .json::<Value>()
                .await
                .expect("json")
        }
    };
    for key in [&viewer, &operator] {
        let r = http
            .post(d.url("/api/v1/slots/1/login"))
            .bearer_auth(key)
            .json(&json!({"strategy": "testshop"}))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), reqwest::StatusCode::FORBIDDEN);
    }
    // A slot the pool lacks is a path that names nothing: 404.
    let r = http
        .post(d.url("/api/v1/slots/7/login"))
        .bearer_auth(&admin)
        .json(&json!({"strategy": "testshop"}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), reqwest::StatusCode::NOT_FOUND);

    let requests_of_1 = |v: &Value| v["slots"][1]["requests"].as_u64().unwrap_or(0);
    let slots_before = admin_get("/api/v1/slots".to_string()).await;
    let mut login = idpool(&env)
        .args([
            "login",
            "--slot",
            "1",
            "--strategy",
            "testshop",
            "--url",
            &d.url(""),
            "--key",
            &admin,
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("idpool login starts");
    let mut lines = tokio::io::BufReader::new(login.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("a first line")
        .expect("read")
        .expect("a line");
    let live_url = first
        .split_whitespace()
        .find(|w| w.contains("/live/"))
        .unwrap_or_else(|| panic!("no live-view URL in {first:?}"))
        .to_string();
    let id = live_url.rsplit('/').next().expect("id").to_string();
    let page = http.get(&live_url).send().await.expect("the live page");
    assert!(page.text().await.expect("html").contains("/api/v1/live/"));
    // Watching needs the admin role too.
    let denied = tokio_tungstenite::connect_async(
        d.url(&format!("/api/v1/live/{id}/ws?key={viewer}"))
            .replace("http:", "ws:"),
    )
    .await;
    assert!(denied.is_err(), "a viewer key watched the live view");

    let ws_url = d
        .url(&format!("/api/v1/live/{id}/ws?key={admin}"))
        .replace("http:", "ws:");
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
        .await
        .expect("the live view");
    let mut frame = None;
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "frame" {
                    frame = Some(v);
                    return;
                }
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "no screencast frame arrived");
    let frame = frame.expect("a frame");
    let jpeg = base64::engine::general_purpose::STANDARD
        .decode(frame["data"].as_str().expect("data"))
        .expect("base64");
    assert_eq!(&jpeg[..2], &[0xff, 0xd8], "a JPEG");
    assert!(frame["width"].as_f64().unwrap_or(0.0) > 100.0, "{frame}");

    // The person: a click on the page, then the keyboard fills the form
    // (Tab past the account line's link to the email field).
    let inputs = [
        json!({"type": "click", "x": 700, "y": 600}),
        json!({"type": "key", "key": "Tab"}),
        json!({"type": "key", "key": "Tab"}),
        json!({"type": "text", "text": accounts::EMAIL}),
        json!({"type": "key", "key": "Tab"}),
        json!({"type": "text", "text": accounts::PASSWORD}),
        json!({"type": "key", "key": "Enter"}),
    ];
    for i in inputs {
        ws.send(Message::Text(i.to_string().into()))
            .await
            .expect("send");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let end = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "status" && v["status"]["done"] == true {
                    return v["status"].clone();
                }
            }
        }
        Value::Null
    })
    .await
    .expect("the session ends");
    assert_eq!(end["state"], "logged_in", "{end}");
    assert!(end["inputs"].as_u64().unwrap_or(0) >= 7, "{end}");
    let status = tokio::time::timeout(Duration::from_secs(30), login.wait())
        .await
        .expect("idpool login exits")
        .expect("wait");
    assert!(status.success(), "idpool login: {status}");
    let mut rest = String::new();
    while let Ok(Some(l)) = lines.next_line().await {
        rest.push_str(&l);
        rest.push('\n');
    }
    assert!(
        rest.contains("slot 1: logged_in on testshop; cookies saved"),
        "{rest}"
    );
    assert_eq!(env.testbed.shared.accounts.signins(), 1);
    // The live view (screencast, input, the sign-in check) never read the
    // page in its own world.
    let reports = common::probe_reports(&env);
    assert!(
        reports.iter().any(|(_, own, _)| *own > 0),
        "the probe ran: {reports:?}"
    );
    let foreign: Vec<_> = reports.iter().filter(|(f, _, _)| *f > 0).collect();
    assert!(
        foreign.is_empty(),
        "the page saw the live view's reads: {foreign:?}"
    );

    let slots = admin_get("/api/v1/slots".to_string()).await;
    assert_eq!(
        slots["slots"][1]["login"]["testshop"]["state"], "logged_in",
        "{slots}"
    );
    // The pages the person reached are the slot's requests (issue 54) and
    // are on the session's recording.
    assert!(
        requests_of_1(&slots) >= requests_of_1(&slots_before) + 2,
        "the sign-in page and the page after it: {slots}"
    );
    let recs = admin_get("/api/v1/recordings".to_string()).await;
    let live = (recs["recordings"].as_array().into_iter().flatten())
        .find(|r| r["kind"] == "live" && r["slot"] == 1)
        .unwrap_or_else(|| panic!("the live session's recording: {recs}"));
    let rec = admin_get(format!(
        "/api/v1/recordings/{}",
        live["id"].as_str().expect("id")
    ))
    .await;
    let loaded = (rec["actions"].as_array().into_iter().flatten())
        .filter(|a| a["kind"] == "loaded")
        .count();
    assert!(loaded >= 2, "each page the person reached is logged: {rec}");
    let jar = std::fs::read_to_string(env.path("data/slots/1/cookies.json")).expect("jar saved");
    assert!(
        jar.contains(accounts::COOKIE),
        "the session cookie is in the jar"
    );
    d.stop().await;
    let audit = std::fs::read_to_string(env.path("data/audit.log")).expect("audit");
    let line = audit
        .lines()
        .find(|l| l.contains("\"live/login\""))
        .unwrap_or_else(|| panic!("no login line in\n{audit}"));
    let rec: Value = serde_json::from_str(line).expect("json");
    assert_eq!(
        (
            rec["principal"].as_str(),
            rec["slot"].as_u64(),
            rec["ok"].as_bool()
        ),
        (Some("root"), Some(1), Some(true)),
        "{rec}"
    );
    assert!(rec["duration_ms"].as_u64().unwrap_or(0) > 0);
    for secret in [accounts::PASSWORD, accounts::EMAIL] {
        assert!(!audit.contains(secret), "the audit log has what was typed");
        assert!(
            !std::fs::read_to_string(env.path("daemon.log"))
                .unwrap_or_default()
                .contains(secret)
        );
    }
}
