//! Acceptance: cookies the testbed sets survive a restart of the pool, and a jar
//! writer killed with SIGKILL in a loop never leaves a jar that fails to load.

use crate::common;

use std::time::Duration;

use idpool::identity::jar::{Jar, OpenNote};
use idpool::request::FetchRequest;

#[tokio::test]
async fn cookies_survive_a_pool_restart() {
    let env = common::Env::new(1).await;
    let pool = env.pool();
    let first = pool
        .fetch(FetchRequest::get(env.url("/product/B0JAR1")), None)
        .await
        .expect("fetch");
    assert_eq!(first.response.cookies_set, vec!["tb_sid".to_string()]);
    let who: serde_json::Value = serde_json::from_slice(
        &pool
            .fetch(FetchRequest::get(env.url("/whoami")), None)
            .await
            .expect("whoami")
            .response
            .body,
    )
    .expect("json");
    let sent_before = who["cookie"].as_str().expect("cookie sent").to_string();
    assert!(sent_before.starts_with("tb_sid="), "{sent_before}");
    drop(pool);

    let jar_file = env.path("data/slots/0/cookies.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&jar_file)
            .expect("jar saved")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // A new pool over the same data dir sends the same cookie.
    let pool = env.pool();
    let again = pool
        .fetch(FetchRequest::get(env.url("/whoami")), None)
        .await
        .expect("whoami");
    let who: serde_json::Value = serde_json::from_slice(&again.response.body).expect("json");
    assert_eq!(who["cookie"].as_str(), Some(sent_before.as_str()));
    assert!(
        again.response.cookies_set.is_empty(),
        "testbed had to issue a new identity"
    );
}

const CHILD_ENV: &str = "IDPOOL_TEST_JAR_WRITER";

/// Not a test on its own: the child process the SIGKILL test starts. It rewrites one
/// jar as fast as it can until killed.
#[test]
#[ignore = "child process of jar_survives_sigkill_during_saves"]
fn jar_writer_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let path = std::path::PathBuf::from(path);
    let (jar, _) = Jar::open(&path).expect("child opens jar");
    let url = url::Url::parse("https://shop.test/").expect("url");
    for round in 0u64.. {
        // Enough cookies that a save is several kilobytes, so kills land mid-write.
        for i in 0..40 {
            jar.insert_set_cookie(&format!("c{i}={round:0>64}; Max-Age=3600; Path=/"), &url);
        }
        jar.save().expect("save");
    }
}

#[test]
fn jar_survives_sigkill_during_saves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cookies.json");
    let exe = std::env::current_exe().expect("test binary");
    let mut last_round = String::new();
    for i in 0..40u64 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "jar::jar_writer_child",
                "--exact",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn writer");
        // Wait for the first save, then let it run a varying while before the kill.
        let start = std::time::Instant::now();
        while !path.exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(5 + (i * 7) % 40));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");

        let (jar, note) = Jar::open(&path).expect("jar opens");
        assert!(matches!(note, OpenNote::Loaded(40)), "round {i}: {note:?}");
        let url = url::Url::parse("https://shop.test/").expect("url");
        let values = jar.cookies_for(&url);
        assert_eq!(values.len(), 40, "round {i}: a save was torn");
        last_round = values[0].1.clone();
    }
    assert_eq!(last_round.len(), 64);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("corrupt"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
