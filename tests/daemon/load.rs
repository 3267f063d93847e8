//! The load script's shortened case: `tests/mcp-js/load.mjs` (what
//! `scripts/load.sh` runs with 50 clients x 100 calls) with 9 clients x 8
//! calls against a test daemon and testbed, faults on. Its figures must hold:
//! zero protocol errors, every call correct (the testbed's ground truth) or a
//! tool error with a reason, RSS within 10% of after warm-up, fds back to the
//! warm-up count, no Chromium beyond the pool's own (and some ran).

use crate::common;

use std::time::Duration;

use common::daemon::Daemon;
use common::shop;
use serde_json::Value;

#[tokio::test]
async fn the_load_script_holds_its_figures_in_short() {
    let env = shop(2).await;
    let d = Daemon::start_with(
        &env,
        2,
        "",
        "[http]\nmax_queue_wait_secs = 120\n\n[cascade]\ntier_cooldown_secs = 5\n\n[breaker]\ncooldown_secs = 2\nmax_cooldown_secs = 4\n",
        &[],
    )
    .await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-js");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript SDK is not installed: run `npm ci --prefix tests/mcp-js` (scripts/test.sh does)"
    );
    let pid = d.child.id().expect("pid").to_string();
    let daemon = d.url("").trim_end_matches('/').to_string();
    let data = env.path("data");
    let config = env.path("idpool.toml");
    let out = tokio::time::timeout(
        Duration::from_secs(600),
        tokio::process::Command::new("node")
            .arg(dir.join("load.mjs"))
            .args(["--daemon", &daemon])
            .args(["--testbed", &env.testbed.https_url()])
            .args(["--testbed-control", &env.testbed.http_url()])
            .args(["--pid", &pid])
            .arg("--data-dir")
            .arg(&data)
            .args(["--idpool", env!("CARGO_BIN_EXE_idpool")])
            .arg("--config")
            .arg(&config)
            .args(["--clients", "9", "--calls", "8"])
            .output(),
    )
    .await
    .expect("load.mjs finishes")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("load.mjs printed no report ({e}): {stdout}\n{stderr}"));
    eprintln!("{stderr}");
    assert_eq!(report["pass"], true, "{report}\n{stderr}");
    let calls = &report["results"];
    let total: u64 = ["ok", "tool_error", "wrong", "protocol_error"]
        .iter()
        .map(|k| calls[k].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(total, 9 * (8 + 6), "every call was judged: {calls}");
    assert!(
        calls["ok"].as_u64().unwrap_or(0) * 2 > total,
        "most calls succeed under the faults: {calls}"
    );
    d.stop().await;
}
