//! `browser.display = "xvfb"`: each slot's Chromium headful on a virtual
//! display of its own, which the daemon starts, supervises and ends; a
//! daemon that is SIGKILLed leaves both, and its next start ends them.

use crate::common;

use std::time::Duration;

use common::Env;
use common::daemon::{Daemon, Mcp};
use serde_json::{Value, json};

const XVFB: &str = "[browser]\ndisplay = \"xvfb\"\n";

/// Xvfb processes serving a slot under `data`: their pids.
fn displays_under(data: &std::path::Path) -> Vec<u32> {
    use idpool::identity::browser::process::{all_pids, cmdline, pid_alive};
    let prefix = data.join("slots").display().to_string();
    all_pids()
        .into_iter()
        .filter(|&p| {
            cmdline(p).is_some_and(|a| {
                a.first().is_some_and(|x| x.ends_with("Xvfb"))
                    && a.windows(2)
                        .any(|w| w[0] == "-auth" && w[1].starts_with(&prefix))
            }) && pid_alive(p)
        })
        .collect()
}

fn environ(pid: u32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .split('\0')
        .map(str::to_string)
        .collect()
}

/// A browser call through the daemon; the pool's view of slot 0 after it.
async fn browser_call(d: &Daemon, env: &Env, path: &str) -> (Value, Value) {
    let mut c = Mcp::new(d, None);
    c.initialize().await;
    let r = c
        .tool(
            2,
            "scrape",
            json!({"url": env.url(path).as_str(), "mode": "browser",
                   "format": "raw_html", "wait_for": "#done"}),
        )
        .await;
    assert_eq!(r["result"]["structuredContent"]["via"], "browser", "{r}");
    let status = c.tool(3, "pool_status", json!({})).await;
    (
        r["result"]["structuredContent"].clone(),
        status["result"]["structuredContent"]["slots"][0].clone(),
    )
}

/// What the screen probe page reported (its `#out`).
fn probe_of(scraped: &Value) -> Value {
    let html = scraped["content"].as_str().unwrap_or_default();
    let at = html.find("<pre id=\"out\">").expect("the probe's output") + 14;
    let json = &html[at..at + html[at..].find("</pre>").expect("end")];
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

async fn gone(pids: &[u32]) -> bool {
    for _ in 0..100 {
        if !pids
            .iter()
            .any(|p| idpool::identity::browser::process::pid_alive(*p))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn xvfb_mode_runs_headful_and_leaves_nothing_after_sigterm_or_sigkill() {
    let env = Env::new(1).await;
    common::seat_plain_desktop(&env, 0);
    let data = env.path("data");
    // 1. The daemon starts the display with the browser and serves a call.
    let d = Daemon::start_with(&env, 1, "", XVFB, &[]).await;
    assert!(displays_under(&data).is_empty(), "lazily, with the browser");
    let (page, slot) = browser_call(&d, &env, "/detect/screen").await;
    let chromium = slot["browser"]["pid"].as_u64().expect("a running browser") as u32;
    let displays = displays_under(&data);
    assert_eq!(displays.len(), 1, "one display for the slot");
    let args =
        idpool::identity::browser::process::cmdline(chromium).expect("Chromium's command line");
    assert!(
        !args.iter().any(|a| a.starts_with("--headless")),
        "headful: {args:?}"
    );
    let vars = environ(chromium);
    let display = vars.iter().find(|v| v.starts_with("DISPLAY=:"));
    assert!(display.is_some(), "Chromium draws on the slot's display");
    assert!(
        vars.iter()
            .any(|v| v.starts_with("XAUTHORITY=") && v.ends_with("/xvfb/auth")),
        "with the slot's cookie file"
    );
    // What the page sees on it: the profile's screen, which Xvfb is.
    let seen = probe_of(&page);
    println!("headful page: {seen}");
    assert_eq!(seen["page"]["screen"][0], 1920, "{seen}");
    assert_eq!(seen["page"]["screen"][1], 1080, "{seen}");
    // The calibration (and its self-check) runs behind the first call.
    let mut c = Mcp::new(&d, None);
    c.initialize().await;
    let mut looks = Value::Null;
    for i in 0..300 {
        let s = c.tool(10 + i, "pool_status", json!({})).await;
        looks = s["result"]["structuredContent"]["slots"][0]["fidelity"]["browser"].clone();
        if !looks.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("headful self-check: {looks}");
    let names: Vec<&str> = looks["names"]
        .as_array()
        .unwrap_or_else(|| panic!("the self-check ran: {looks}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Headful shows what headless shows: no signal but software WebGL.
    assert!(
        names.iter().all(|n| *n == "webgl"),
        "headful signals: {looks}"
    );
    // 2. SIGTERM: the daemon ends Chromium, then its display.
    d.stop().await;
    assert!(gone(&[chromium]).await, "Chromium outlived SIGTERM");
    assert!(gone(&displays).await, "Xvfb outlived SIGTERM");
    assert!(common::chromium_browsers_under(&data).is_empty());
    // 3. SIGKILL leaves both; the next start's sweep ends them.
    let d = Daemon::start_with(&env, 1, "", XVFB, &[]).await;
    let (_, slot) = browser_call(&d, &env, "/detect/screen").await;
    let chromium = slot["browser"]["pid"].as_u64().expect("a running browser") as u32;
    let displays = displays_under(&data);
    assert_eq!(displays.len(), 1);
    let mut d = d;
    d.child.kill().await.expect("SIGKILL the daemon");
    d.child.wait().await.expect("reap it");
    drop(d);
    assert!(
        idpool::identity::browser::process::pid_alive(chromium)
            && displays_under(&data) == displays,
        "both outlive a SIGKILLed daemon"
    );
    let d = Daemon::start_with(&env, 1, "", XVFB, &[]).await;
    assert!(gone(&[chromium]).await, "the sweep ended the old Chromium");
    assert!(gone(&displays).await, "the sweep ended the old display");
    let (_, slot) = browser_call(&d, &env, "/detect/screen?after=sweep").await;
    assert!(slot["browser"]["pid"].as_u64().is_some());
    let fresh = displays_under(&data);
    assert_eq!(fresh.len(), 1);
    d.stop().await;
    assert!(gone(&fresh).await, "Xvfb outlived SIGTERM");
    assert!(common::chromium_browsers_under(&data).is_empty());
}

/// A display that dies takes its Chromium with it (a crash, said so), and
/// the next call launches both again.
#[tokio::test]
async fn a_display_that_dies_ends_its_chromium_and_the_next_call_starts_both() {
    let env = Env::new(1).await;
    let d = Daemon::start_with(&env, 1, "", XVFB, &[]).await;
    let data = env.path("data");
    let (_, slot) = browser_call(&d, &env, "/detect/screen").await;
    let chromium = slot["browser"]["pid"].as_u64().expect("browser") as u32;
    let displays = displays_under(&data);
    assert_eq!(displays.len(), 1);
    // SAFETY: kill(2) on the Xvfb this test's daemon started.
    unsafe { libc::kill(displays[0] as i32, libc::SIGKILL) };
    assert!(gone(&[chromium]).await, "Chromium ended with its display");
    let (_, slot) = browser_call(&d, &env, "/detect/screen").await;
    assert_ne!(slot["browser"]["pid"].as_u64(), Some(u64::from(chromium)));
    assert!(
        slot["browser"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("virtual display")),
        "{slot}"
    );
    assert_eq!(displays_under(&data).len(), 1, "a new display");
    d.stop().await;
    assert!(displays_under(&data).is_empty());
}
