//! `idpool-testbed` as a process: it prints its CA path and ports, takes its
//! limits from the command line, and its control endpoint works over HTTP.

use std::io::{BufRead, BufReader};
use std::time::Duration;

/// The binary prints its CA path and ports, and the control endpoint works over HTTP.
#[tokio::test]
async fn testbed_runs_as_a_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Reaped(
        std::process::Command::new(env!("CARGO_BIN_EXE_idpool-testbed"))
            .args([
                "--https",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                "--state-dir",
            ])
            .arg(dir.path())
            .args(["--rate-limit", "30/10/20/429", "--site-limit", "100/2"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("testbed starts"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .take_while(|l| l != "ready")
        .collect();
    let get = |k: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(k))
            .map(str::trim)
            .map(str::to_string)
    };
    let ca = get("ca:").expect("ca line");
    let https = get("https:").expect("https line");
    let http = get("http:").expect("http line");
    assert!(std::path::Path::new(&ca).is_file());

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let state: serde_json::Value = client
        .get(format!("{http}/__control/state"))
        .send()
        .await
        .expect("state")
        .json()
        .await
        .expect("json");
    let rate = &state["rate_limit"];
    assert_eq!(
        (
            &rate["max"],
            &rate["window_secs"],
            &rate["block_secs"],
            &rate["status"]
        ),
        (&30.into(), &10.into(), &20.into(), &429.into()),
        "{state}"
    );
    assert_eq!(rate["retry_after"], serde_json::Value::Null);
    let modes: serde_json::Value = client
        .post(format!("{http}/__control/mode"))
        .body(r#"{"gate": true, "rate_limit": {"max": 5, "window_secs": 60}}"#)
        .send()
        .await
        .expect("control")
        .json()
        .await
        .expect("json");
    assert_eq!(modes["gate"], true);
    assert_eq!(modes["rate_limit"]["block_secs"], 60);
    // The patch left the command line's site-wide limit as it was.
    assert_eq!(modes["site_limit"]["max_per_sec"], 100);
    assert_eq!(modes["site_limit"]["retry_after"], 2);
    let bad = client
        .post(format!("{http}/__control/mode"))
        .body(r#"{"gait": true}"#)
        .send()
        .await
        .expect("control");
    assert_eq!(bad.status().as_u16(), 400);
    assert!(
        bad.text()
            .await
            .expect("body")
            .contains("unknown mode `gait`")
    );

    let ca_cert = reqwest::Certificate::from_pem(&std::fs::read(&ca).expect("ca")).expect("pem");
    let tls = reqwest::Client::builder()
        .add_root_certificate(ca_cert)
        .build()
        .expect("client");
    let blocked = tls
        .get(format!("{https}/product/B0P"))
        .send()
        .await
        .expect("get");
    assert_eq!(blocked.status().as_u16(), 403);
    let stats: serde_json::Value = client
        .get(format!("{http}/__control/stats"))
        .send()
        .await
        .expect("stats")
        .json()
        .await
        .expect("json");
    assert_eq!(stats["by_path"]["/product/B0P"], 1);
}

/// Kills and reaps the child by PID when the test ends, even on a failed assertion.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
