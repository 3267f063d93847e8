//! Chaos for the daemon itself: SIGKILLed under load, 20 times in a row.
//! After each kill every jar loads whole and every audit line is complete
//! JSON; after each restart no Chromium of the killed daemon is left. (Its
//! own test binary: no pool runs in this process, so the killed daemon's
//! browsers are not reparented to it.)

use crate::common;

use std::time::Duration;

use common::daemon::{Daemon, Mcp, free_port};
use common::{chromium_browsers_under, shop};
use serde_json::{Value, json};

/// The calls the daemon answered: what each one's audit line carries.
type Answered = std::sync::Arc<parking_lot::Mutex<Vec<String>>>;

/// Calls that touch every file the daemon writes: reviews (jars, audit) and
/// browser scrapes (Chromium, its profile, jars after the sync). Each
/// answered call (a result or an error: the daemon acknowledged it) is
/// noted in `answered` by the item or URL its audit line names.
fn load(
    d: &Daemon,
    n: usize,
    testbed: &str,
    round: usize,
    answered: &Answered,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|k| {
            let mut c = Mcp::new(d, None);
            let answered = answered.clone();
            let testbed = testbed.to_string();
            tokio::spawn(async move {
                if !c.initialize().await.status.is_success() {
                    return;
                }
                for i in 0u64.. {
                    // Unique per call, so each acknowledged call has its
                    // own audit line to find.
                    let tag = format!("B0CHAOS{round}X{k}X{i}");
                    let (tool, args, mark) = if (i + k as u64).is_multiple_of(3) {
                        let url = format!("{testbed}/product/{tag}");
                        ("scrape", json!({"url": url, "mode": "browser"}), url)
                    } else {
                        let args = json!({"item": tag, "strategy": "testshop", "pages": 2});
                        ("get_reviews", args, tag)
                    };
                    let r = c.tool(i, tool, args).await;
                    if r.get("result").is_some() || r.get("error").is_some() {
                        answered.lock().push(mark);
                    }
                }
            })
        })
        .collect()
}

/// Answered `pool_status` calls, by MCP session.
type StatusAnswered = std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<String, usize>>>;

/// Clients that call `pool_status` as fast as it answers (the load that
/// has calls in flight at the kill); each answer is counted for its
/// session, whose audit lines must number at least as many.
fn status_load(
    d: &Daemon,
    n: usize,
    answered: &StatusAnswered,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let mut c = Mcp::new(d, None);
            let answered = answered.clone();
            tokio::spawn(async move {
                if !c.initialize().await.status.is_success() {
                    return;
                }
                let Some(session) = c.session.clone() else {
                    return;
                };
                for i in 0u64.. {
                    let r = c.tool(i, "pool_status", json!({})).await;
                    if r.get("result").is_some() || r.get("error").is_some() {
                        *answered.lock().entry(session.clone()).or_default() += 1;
                    }
                }
            })
        })
        .collect()
}

/// Every audit line, checked whole (complete JSON, the file ending in a
/// newline); panics on a torn one.
fn audit_lines_are_whole(env: &common::Env, round: usize) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(env.path("data/audit.log")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!("round {round}: audit line {} is torn ({e}): {line}", i + 1)
        });
        assert!(v["ts"].is_string(), "round {round}: {line}");
        out.push(v);
    }
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "round {round}: the audit log ends in a partial line"
    );
    out
}

fn jars_load(env: &common::Env, slots: usize, round: usize) {
    use idpool::identity::jar::{Jar, OpenNote};
    for s in 0..slots {
        let path = env.path(&format!("data/slots/{s}/cookies.json"));
        if !path.exists() {
            continue;
        }
        let (_, note) = Jar::open(&path).unwrap_or_else(|e| panic!("round {round}: slot {s}: {e}"));
        assert!(
            !matches!(note, OpenNote::MovedAside(_)),
            "round {round}: slot {s}'s jar was torn: {note:?}"
        );
    }
}

#[tokio::test]
async fn the_daemon_sigkilled_under_load_twenty_times_leaves_whole_files_and_no_browsers() {
    let env = shop(2).await;
    let port = free_port();
    let data = env.path("data");
    let testbed = env.testbed.https_url();
    let mut audit = 0;
    let mut acknowledged = 0;
    for round in 0..20 {
        let d = Daemon::start_at(&env, port, 2, "", "", &[]).await;
        // The browsers of the daemon killed before are gone by the time the
        // new one answers (it ends them before it listens).
        let left = chromium_browsers_under(&data);
        assert!(left.is_empty(), "round {round}: orphan Chromium: {left:?}");
        let answered = Answered::default();
        let statuses = StatusAnswered::default();
        let mut tasks = load(&d, 4, &testbed, round, &answered);
        tasks.extend(status_load(&d, 4, &statuses));
        tokio::time::sleep(Duration::from_millis(600 + 97 * round as u64 % 900)).await;
        let pid = d.child.id().expect("pid");
        // SAFETY: a plain signal to the daemon this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let mut d = d;
        let _ = tokio::time::timeout(Duration::from_secs(10), d.child.wait())
            .await
            .expect("the killed daemon is reaped");
        for t in tasks {
            t.abort();
        }
        let lines = audit_lines_are_whole(&env, round);
        assert!(lines.len() >= audit, "round {round}: audit lines were lost");
        audit = lines.len();
        // Every call the daemon answered before it died has its line: the
        // line is written before the answer leaves (docs/performance.md).
        let named: std::collections::HashSet<&str> = lines
            .iter()
            .filter_map(|l| l["args"]["item"].as_str().or(l["args"]["url"].as_str()))
            .collect();
        let answered = answered.lock().clone();
        let missing: Vec<&String> = answered
            .iter()
            .filter(|m| !named.contains(m.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} of {} answered calls have no audit line: {missing:?}",
            missing.len(),
            answered.len()
        );
        acknowledged += answered.len();
        for (session, n) in statuses.lock().iter() {
            let lines_of = lines
                .iter()
                .filter(|l| {
                    l["tool"] == "pool_status" && l["session"].as_str() == Some(session.as_str())
                })
                .count();
            assert!(
                lines_of >= *n,
                "round {round}: session {session} had {n} pool_status calls answered and {lines_of} audit lines"
            );
            acknowledged += n;
        }
        jars_load(&env, 2, round);
    }
    assert!(audit > 20, "the load reached the audit log: {audit} lines");
    println!(
        "{acknowledged} answered calls over 20 kills, each with its audit line; {audit} lines"
    );
    assert!(acknowledged > 20, "calls were answered: {acknowledged}");
    // A last clean start and stop: nothing left behind.
    let d = Daemon::start_at(&env, port, 2, "", "", &[]).await;
    assert!(chromium_browsers_under(&data).is_empty());
    d.stop().await;
    assert!(chromium_browsers_under(&data).is_empty());
}

/// The daemon with its data dir on a 1 MiB tmpfs of its own (a mount
/// namespace: nothing is mounted on the host), reached through
/// `/proc/<pid>/root`.
struct OnSmallDisk {
    child: tokio::process::Child,
    port: u16,
    data: std::path::PathBuf,
}

impl OnSmallDisk {
    async fn start(env: &common::Env) -> OnSmallDisk {
        let port = free_port();
        env.write_config_with(
            1,
            true,
            common::free_base_port(1),
            &format!("[server]\nlisten = \"127.0.0.1:{port}\"\nanonymous_role = \"operator\"\n"),
        );
        let data = env.path("data");
        std::fs::create_dir_all(&data).expect("data dir");
        let log = std::fs::File::create(env.path("daemon.log")).expect("log");
        let child = tokio::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg("mount -t tmpfs -o size=1m,mode=0700 idpool-small \"$0\" && exec \"$1\" --config \"$2\" serve")
            .arg(&data)
            .arg(env!("CARGO_BIN_EXE_idpool"))
            .arg(env.path("idpool.toml"))
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("unshare runs");
        let d = OnSmallDisk { child, port, data };
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if http
                .get(d.url("/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the daemon on a small tmpfs did not come up (unshare --mount needs root):\n{}",
            std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default()
        );
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// A path in the daemon's view of its data dir.
    fn inside(&self, rel: &str) -> std::path::PathBuf {
        let pid = self.child.id().expect("pid");
        std::path::PathBuf::from(format!("/proc/{pid}/root"))
            .join(self.data.strip_prefix("/").expect("absolute"))
            .join(rel)
    }
}

/// A tool call over the plain HTTP face (`POST /api/v1/tools/{name}`): the
/// structured result, or the error answer.
async fn call(d: &OnSmallDisk, tool: &str, args: Value) -> (bool, Value) {
    let r = reqwest::Client::new()
        .post(d.url(&format!("/api/v1/tools/{tool}")))
        .json(&args)
        .send()
        .await
        .expect("POST /api/v1/tools");
    let ok = r.status().is_success();
    (ok, r.json().await.expect("json"))
}

#[tokio::test]
async fn a_full_disk_fails_the_jar_save_keeps_the_old_jar_and_the_daemon_serving() {
    let env = shop(1).await;
    let d = OnSmallDisk::start(&env).await;
    let search = |t: &str| json!({"url": format!("{}/site/search?q={t}", env.testbed.https_url()), "mode": "http"});
    let (ok, r) = call(&d, "scrape", search("alpha")).await;
    assert!(ok, "{r}");
    let jar_path = d.inside("slots/0/cookies.json");
    let before = std::fs::read(&jar_path).expect("the jar was saved");
    assert!(String::from_utf8_lossy(&before).contains("alpha"));

    // Fill the disk.
    let filler = d.inside("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).expect("filler");
        let chunk = vec![0u8; 16 * 1024];
        while f.write_all(&chunk).and_then(|()| f.sync_data()).is_ok() {}
    }
    let (ok, r) = call(&d, "scrape", search("bravo")).await;
    assert!(ok, "the daemon keeps serving: {r}");
    let (_, status) = call(&d, "pool_status", json!({})).await;
    let cookies = &status["slots"][0]["cookies"];
    assert!(
        cookies["save_error"]
            .as_str()
            .is_some_and(|e| e.contains("No space left")),
        "a failed save is reported: {cookies}"
    );
    let now = std::fs::read(&jar_path).expect("the jar is still there");
    assert_eq!(now, before, "the previous jar is intact");
    let (ok, r) = call(
        &d,
        "get_reviews",
        json!({"item": "B0FULL1", "strategy": "testshop"}),
    )
    .await;
    assert!(ok, "{r}");

    // Room again: the next save goes through and the report clears.
    std::fs::remove_file(&filler).expect("remove filler");
    let (ok, r) = call(&d, "scrape", search("charlie")).await;
    assert!(ok, "{r}");
    let (_, status) = call(&d, "pool_status", json!({})).await;
    let cookies = &status["slots"][0]["cookies"];
    assert!(cookies["save_error"].is_null(), "{cookies}");
    assert!(String::from_utf8_lossy(&std::fs::read(&jar_path).expect("jar")).contains("charlie"));
    let leftovers: Vec<_> = std::fs::read_dir(d.inside("slots/0"))
        .expect("slot dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "half-written copies left: {leftovers:?}"
    );
    let mut d = d;
    // SAFETY: a plain signal to the daemon this test started.
    unsafe { libc::kill(d.child.id().expect("pid") as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(60), d.child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert!(status.success(), "{status}");
}
