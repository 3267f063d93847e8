//! Recordings (issue 38, item 2): a signed-in identity's browser work is
//! recorded (`[recording] when = "signed_in"`, the default): a tier-3
//! `get_reviews` page gives frames that are JPEG, an action log naming the
//! navigation and a network summary; an interactive session is one
//! recording whose typed text is nowhere in it; the id is in the result and
//! the audit line, the REST routes and the status page's player read it;
//! a daemon killed with SIGKILL leaves recordings whole or absent.

use crate::common;

use common::chromium::{Chromium, eval, until};
use common::daemon::Daemon;
use serde_json::{Value, json};

const SECRET: &str = "hunter2-not-for-recordings";

async fn get(d: &Daemon, path: &str) -> (u16, Value) {
    let r = reqwest::get(d.url(path)).await.expect("get");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn tool(d: &Daemon, name: &str, args: Value) -> (u16, Value) {
    d.rest_tool(name, args).await
}

/// A JPEG's width and height, read from its frame header (SOF0..SOF15 but
/// DHT, JPG and DAC), after checking it starts with SOI and ends with EOI.
fn jpeg_size(b: &[u8]) -> Option<(u16, u16)> {
    if !(b.starts_with(&[0xFF, 0xD8]) && b.ends_with(&[0xFF, 0xD9])) {
        return None;
    }
    let mut i = 2;
    while i + 9 < b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            let h = u16::from_be_bytes([b[i + 5], b[i + 6]]);
            let w = u16::from_be_bytes([b[i + 7], b[i + 8]]);
            return (w > 0 && h > 0).then_some((w, h));
        }
        i += 2 + len;
    }
    None
}

/// Every file of recording `id` on disk is whole: its meta and manifest
/// parse, every frame the manifest names is a JPEG.
fn whole_on_disk(dir: &std::path::Path, id: &str) {
    let at = dir.join(id);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(at.join("meta.json")).expect("meta.json"))
            .expect("meta.json parses");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(at.join("recording.json")).expect("recording.json"))
            .expect("recording.json parses");
    let frames = manifest["frames"].as_array().expect("frames");
    assert_eq!(meta["frames"], frames.len(), "{id}");
    for f in frames {
        let file = at.join(f["file"].as_str().expect("file"));
        let jpeg = std::fs::read(&file).expect("frame file");
        assert!(jpeg_size(&jpeg).is_some(), "{} is no JPEG", file.display());
    }
}

#[tokio::test]
async fn a_signed_in_identitys_browser_work_is_recorded_whole() {
    let env = common::shop(2).await;
    let mut d = Daemon::start_with(
        &env,
        2,
        "anonymous_role = \"admin\"\n",
        "[recording]\nfps = 8\n",
        &[],
    )
    .await;

    // Slot 0 is signed in (the user's own account); slot 1 is not.
    let token = common::sign_in(&env).await;
    let name = idpool_testbed::accounts::COOKIE;
    let file = format!(
        "# Netscape HTTP Cookie File\n#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\t{name}\t{token}\n"
    );
    let (code, r) = tool(&d, "import_session", json!({"slot": 0, "session": file})).await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["login"]["testshop"], "logged_in", "{r}");

    // The HTML page is challenged: the browser serves the reviews.
    env.testbed.set_modes(|m| m.challenge = true);
    let (code, r) = tool(
        &d,
        "get_reviews",
        json!({"item": "B0REC1", "strategy": "testshop", "slot": 0}),
    )
    .await;
    assert_eq!(code, 200, "{r}");
    assert!(
        r["pages"]
            .as_array()
            .expect("pages")
            .iter()
            .any(|p| p["tier"] == 3),
        "the browser served: {r}"
    );
    let ids: Vec<String> = r["recordings"]
        .as_array()
        .unwrap_or_else(|| panic!("no recordings in the result: {r}"))
        .iter()
        .map(|v| v.as_str().expect("id").to_string())
        .collect();
    assert_eq!(ids.len(), 1, "one browser page, one recording: {r}");
    let id = &ids[0];

    // The audit line names it.
    let line = common::audit_lines(&env)
        .into_iter()
        .rev()
        .find(|l| l["tool"] == "get_reviews")
        .expect("get_reviews audit line");
    assert_eq!(line["recordings"], json!([id]), "{line}");

    // What it holds: JPEG frames, the navigation, the network.
    let (code, list) = get(&d, "/api/v1/recordings").await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["recordings"][0]["id"], json!(id), "{list}");
    let (code, rec) = get(&d, &format!("/api/v1/recordings/{id}")).await;
    assert_eq!(code, 200, "{rec}");
    assert_eq!(rec["meta"]["kind"], "call", "{rec}");
    assert_eq!(rec["meta"]["slot"], 0);
    assert_eq!(rec["meta"]["strategy"], "testshop");
    let navigated = rec["actions"].as_array().expect("actions").iter().any(|a| {
        a["kind"] == "navigate" && a["detail"].as_str().is_some_and(|u| u.contains("B0REC1"))
    });
    assert!(
        navigated,
        "the action log does not name the navigation: {rec}"
    );
    let net = rec["network"].as_array().expect("network");
    assert!(
        net.iter().any(|n| n["status"] == 200
            && n["bytes"].as_u64() > Some(0)
            && n["url"].as_str().is_some_and(|u| u.contains("B0REC1"))),
        "the network summary misses the page: {rec}"
    );
    let frames = rec["frames"].as_array().expect("frames");
    assert!(!frames.is_empty(), "no frames: {rec}");
    for n in 1..=frames.len() {
        let r = reqwest::get(d.url(&format!("/api/v1/recordings/{id}/frames/{n}")))
            .await
            .expect("frame");
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "image/jpeg");
        let jpeg = r.bytes().await.expect("bytes");
        assert!(jpeg_size(&jpeg).is_some(), "frame {n} is no JPEG");
    }
    let text = serde_json::to_string(&rec).expect("json");
    assert!(!text.contains(&token), "a cookie value in the recording");
    let (code, _) = get(&d, &format!("/api/v1/recordings/{id}/frames/999")).await;
    assert_eq!(code, 404);
    let (code, _) = get(&d, "/api/v1/recordings/..%2Fdata").await;
    assert!(code == 400 || code == 404, "{code}");

    // Slot 1 is not signed in: its browser work is not recorded.
    let (code, r) = tool(
        &d,
        "get_reviews",
        json!({"item": "B0REC2", "strategy": "testshop", "slot": 1}),
    )
    .await;
    assert_eq!(code, 200, "{r}");
    assert!(r.get("recordings").is_none(), "{r}");
    env.testbed.set_modes(|m| m.challenge = false);

    // An interactive session is one recording; typed text never lands.
    let (code, open) = tool(
        &d,
        "browser_open",
        json!({"url": env.url("/signin").as_str(), "slot": 0, "strategy": "testshop"}),
    )
    .await;
    assert_eq!(code, 200, "{open}");
    let session = open["session"].as_str().expect("session").to_string();
    let sid = open["recordings"][0]
        .as_str()
        .expect("the session's recording")
        .to_string();
    let snapshot = open["snapshot"].as_str().expect("snapshot");
    let field = snapshot
        .lines()
        .find(|l| l.contains("textbox"))
        .and_then(|l| l.split("[ref=").nth(1))
        .and_then(|r| r.split(']').next())
        .unwrap_or_else(|| panic!("no text box on the sign-in page:\n{snapshot}"))
        .to_string();
    let (code, typed) = tool(
        &d,
        "browser_type",
        json!({"session": session, "ref": field, "text": SECRET}),
    )
    .await;
    assert_eq!(code, 200, "{typed}");
    assert_eq!(typed["recordings"], json!([sid]), "{typed}");
    let (code, r) = tool(&d, "browser_close", json!({"session": session})).await;
    assert_eq!(code, 200, "{r}");
    let (code, rec) = get(&d, &format!("/api/v1/recordings/{sid}")).await;
    assert_eq!(code, 200, "{rec}");
    assert_eq!(rec["meta"]["kind"], "session");
    let kinds: Vec<&str> = rec["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter_map(|a| a["kind"].as_str())
        .collect();
    assert!(
        ["open", "navigate", "type", "close"]
            .iter()
            .all(|k| kinds.contains(k)),
        "{kinds:?}"
    );
    let dir = env.path("data/recordings");
    let mut on_disk = Vec::new();
    for e in walk(&dir.join(&sid)) {
        on_disk.extend(std::fs::read(e).expect("read"));
    }
    assert!(
        !on_disk
            .windows(SECRET.len())
            .any(|w| w == SECRET.as_bytes()),
        "the typed text is in the recording"
    );
    assert!(
        !std::fs::read_to_string(env.path("data/audit.log"))
            .unwrap_or_default()
            .contains(SECRET),
        "the typed text is in the audit log"
    );

    // The status page's player shows a frame (decoded by Chromium) and
    // the action log.
    let chromium = Chromium::start(env.path("").as_path()).await;
    let page = chromium.page(1280, 900, false, &d.url("/")).await;
    until(
        &page,
        &format!("!!document.querySelector('[data-rec=\"{id}\"]')"),
        20,
        "the recording in the list",
    )
    .await;
    eval(
        &page,
        &format!("document.querySelector('[data-rec=\"{id}\"]').click(); true"),
    )
    .await;
    until(
        &page,
        "document.getElementById('rec-frame').complete && document.getElementById('rec-frame').naturalWidth > 0",
        20,
        "a frame decoded in the player",
    )
    .await;
    let log = eval(&page, "document.getElementById('rec-actions').textContent").await;
    assert!(
        log.as_str()
            .is_some_and(|t| t.contains("navigate") && t.contains("B0REC1")),
        "{log}"
    );
    chromium.stop().await;

    // SIGKILL while a session's recording is open, and with a write left
    // half-done: after a restart every listed recording is whole, the
    // half-done one is gone.
    let (code, open) = tool(
        &d,
        "browser_open",
        json!({"url": env.url("/product/B0REC3").as_str(), "slot": 0, "strategy": "testshop"}),
    )
    .await;
    assert_eq!(code, 200, "{open}");
    let half = dir.join(".tmp-20261205T000000-s0-0badc0de");
    std::fs::create_dir_all(half.join("frames")).expect("mkdir");
    std::fs::write(half.join("frames/000001.jpg"), b"\xff\xd8half").expect("write");
    d.signal(libc::SIGKILL);
    let _ = d.child.wait().await;
    let port = d.port;
    drop(d);
    d = Daemon::start_at(
        &env,
        port,
        2,
        "anonymous_role = \"admin\"\n",
        "[recording]\nfps = 8\n",
        &[],
    )
    .await;
    assert!(!half.exists(), "the half-written recording is still there");
    let (code, list) = get(&d, "/api/v1/recordings").await;
    assert_eq!(code, 200, "{list}");
    let listed: Vec<String> = list["recordings"]
        .as_array()
        .expect("list")
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_string())
        .collect();
    assert!(listed.contains(id) && listed.contains(&sid), "{listed:?}");
    for e in std::fs::read_dir(&dir).expect("dir").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        assert!(
            listed.contains(&name),
            "{name} is on disk but not listed (half-written?)"
        );
        whole_on_disk(&dir, &name);
    }
    d.stop().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
