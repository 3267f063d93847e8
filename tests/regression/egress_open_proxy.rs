//! Issue 32, finding 6: without the namespace, the egress was an open proxy
//! that spent the upstream's credentials. With `isolate = false` any local
//! user could `curl -x` the slot's egress port (shown in `pool_status`) and
//! the upstream proxy saw the slot's credentials; a pool that could not make
//! a namespace fell back to that silently.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, Mcp};
use crate::common::proxies::{Seen, basic_user, http_connect_proxy};
use crate::common::{self, Env};

/// `curl -x <egress> <url>` as the test's user: curl's exit code and the
/// HTTP code it got (`000` when none).
async fn curl_through(egress: &str, url: &str) -> (i32, String) {
    let out = tokio::process::Command::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(["-x", &format!("http://{egress}"), url])
        .kill_on_drop(true)
        .output()
        .await
        .expect("curl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

async fn scrape_in_browser(c: &Mcp, id: u64, url: &str) -> Value {
    c.tool(id, "scrape", json!({"url": url, "mode": "browser"}))
        .await
}

#[tokio::test]
async fn without_the_namespace_the_egress_is_no_open_proxy() {
    let env = Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let upstream = http_connect_proxy(seen.clone()).await;
    env.write(
        "profiles/default.toml",
        &format!(
            "emulation = \"chrome_149\"\nproxy = \"http://dave:upstr3am@127.0.0.1:{upstream}\"\n"
        ),
    );
    let d = Daemon::start_with(
        &env,
        1,
        "",
        "[browser]\nisolate = false\n",
        &[("RUST_LOG", "info,idpool::wire::egress=trace".to_string())],
    )
    .await;
    let mut c = Mcp::new(&d, None);
    assert!(c.initialize().await.status.is_success());

    // The slot's browser goes out through its egress and the upstream.
    let first = scrape_in_browser(&c, 1, env.url("/product/B0EGR1").as_str()).await;
    assert_eq!(
        first["result"]["structuredContent"]["status"],
        200,
        "{first}\n{}",
        d.log_text()
    );
    let (through_browser, users_ok) = {
        let seen = seen.lock();
        (
            seen.targets.len(),
            seen.auth.iter().all(|a| basic_user(a) == "dave"),
        )
    };
    assert!(through_browser >= 1, "the browser skipped the upstream");
    assert!(users_ok, "the upstream saw another user");

    let status = c.tool(2, "pool_status", json!({})).await;
    let status = &status["result"]["structuredContent"];
    let browsers = &status["browsers"];
    assert_eq!(browsers["isolated"], false, "{browsers}");
    let exposes = browsers["exposes"].as_str().unwrap_or_default();
    assert!(
        exposes.contains("DevTools") && exposes.contains("peer check"),
        "pool_status does not say what the shared loopback exposes: {browsers}"
    );
    let egress = status["slots"][0]["egress"]["listen"]
        .as_str()
        .expect("the egress's listener in pool_status")
        .to_string();

    // A local process that is not the slot's browser: plain HTTP (the
    // egress would forward it) and CONNECT (a tunnel), both refused.
    let plain = format!("{}/product/B0CURL1", env.testbed.http_url());
    let (code, http) = curl_through(&egress, &plain).await;
    assert!(
        http == "403" || (code != 0 && http == "000"),
        "curl through the egress: exit {code}, HTTP {http}"
    );
    let tunnel = env.url("/product/B0CURL2").to_string();
    let (code, http) = curl_through(&egress, &tunnel).await;
    assert_ne!(code, 0, "a CONNECT tunnel through the egress: HTTP {http}");
    assert_ne!(http, "200", "a CONNECT tunnel through the egress");

    // What reaches the upstream cannot be told apart by its CONNECT target
    // (Chromium may open more tunnels meanwhile), but whatever the upstream
    // carries reaches the site: the site never saw curl's paths.
    let reached: Vec<String> = env
        .testbed
        .log()
        .iter()
        .map(|e| e.path.clone())
        .filter(|p| p.contains("B0CURL"))
        .collect();
    assert!(
        reached.is_empty(),
        "curl reached the site through the egress: {reached:?}"
    );
    let log = d.log_text();
    assert!(
        log.contains("egress turned away a connection from outside the slot's browser"),
        "the egress did not say it turned curl away:\n{log}"
    );

    // The slot's own browser still gets through, and the stranger is counted.
    let again = scrape_in_browser(&c, 3, env.url("/product/B0EGR2").as_str()).await;
    assert_eq!(
        again["result"]["structuredContent"]["status"],
        200,
        "{again}\n{}",
        d.log_text()
    );
    // (The upstream need not see a new CONNECT: Chromium may reuse the
    // tunnel it opened for the first page.)
    let status = c.tool(4, "pool_status", json!({})).await;
    let facts = &status["result"]["structuredContent"]["slots"][0]["egress"];
    assert!(facts["strangers"].as_u64() >= Some(2), "{facts}");
    let log = d.log_text();
    assert!(
        !log.contains("upstr3am"),
        "the upstream's password in the log"
    );
    d.stop().await;
}

/// A daemon that cannot make the browsers' namespace (run as `nobody`
/// holding `CAP_NET_BIND_SERVICE`, which a user namespace would take away,
/// and no `CAP_SYS_ADMIN`) no longer falls back to the shared loopback: it
/// refuses to start and names `isolate = false`.
#[tokio::test]
async fn a_daemon_that_cannot_lock_its_browsers_away_refuses_to_start() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("needs root to start the daemon as another user with a capability: skipped");
        return;
    }
    let env = Env::new(1).await;
    let port = common::daemon::free_port();
    env.write_config_with(
        1,
        true,
        common::free_base_port(1),
        &format!("[server]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(env.path(""))
        .status()
        .expect("chown runs");
    assert!(chown.success());
    let run = tokio::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+net_bind_service",
            "--ambient-caps=+net_bind_service",
            "--",
            env!("CARGO_BIN_EXE_idpool"),
            "--config",
        ])
        .arg(env.path("idpool.toml"))
        .arg("serve")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the daemon exits at once")
        .expect("setpriv runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started anyway:\n{err}");
    assert!(
        err.contains("isolate = false") && err.contains("network namespace"),
        "the refusal does not name the setting:\n{err}"
    );
}
