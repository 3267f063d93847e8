//! Profiles' proxies: a slot reaches the testbed through a real HTTP CONNECT proxy
//! and a real SOCKS5 proxy (both tiny, on loopback, requiring credentials), and the
//! credentials never appear in what idpool prints.

mod common;

use std::sync::Arc;

use common::proxies::{Seen, http_connect_proxy, socks5_proxy};
use idpool::http::FetchRequest;
use parking_lot::Mutex;

#[tokio::test]
async fn slot_goes_through_an_authenticated_http_proxy() {
    let env = common::Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = http_connect_proxy(seen.clone()).await;
    env.write(
        "profiles/default.toml",
        &format!(
            "emulation = \"chrome_149\"\nproxy = \"http://alice:s3cr%40t@127.0.0.1:{port}\"\n"
        ),
    );
    let pool = env.pool();
    let f = pool
        .fetch(FetchRequest::get(env.url("/product/B0PROXY")), None)
        .await
        .expect("fetch via proxy");
    assert_eq!(f.response.status, 200);
    let s = seen.lock();
    assert_eq!(s.targets, [env.testbed.https_addr.to_string()]);
    // base64("alice:s3cr@t")
    assert_eq!(s.auth, ["basic YwxpY2U6czNjckB0".to_lowercase()]);
    assert!(format!("{:?}", pool.slots()[0].profile).contains("***@127.0.0.1"));
    assert!(!format!("{:?}", pool.slots()[0].profile).contains("s3cr"));
}

#[tokio::test]
async fn slot_goes_through_an_authenticated_socks5_proxy() {
    let env = common::Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = socks5_proxy(seen.clone()).await;
    env.write(
        "profiles/default.toml",
        &format!("emulation = \"chrome_149\"\nproxy = \"socks5://bob:hunter2@127.0.0.1:{port}\"\n"),
    );
    let pool = env.pool();
    let f = pool
        .fetch(FetchRequest::get(env.url("/whoami")), None)
        .await
        .expect("fetch via socks5");
    assert_eq!(f.response.status, 200);
    let s = seen.lock();
    assert_eq!(s.auth, ["bob:hunter2"]);
    assert_eq!(s.targets, [env.testbed.https_addr.to_string()]);
}

#[tokio::test]
async fn proxy_credentials_never_reach_the_output() {
    let env = common::Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = http_connect_proxy(seen.clone()).await;
    env.write(
        "profiles/default.toml",
        &format!(
            "emulation = \"chrome_149\"\nproxy = \"http://carol:topsecret@127.0.0.1:{port}\"\n"
        ),
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(env.path("idpool.toml"))
        .args(["fetch", env.url("/whoami").as_str()])
        .env("RUST_LOG", "trace")
        .output()
        .await
        .expect("idpool fetch");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{all}");
    assert!(!seen.lock().auth.is_empty(), "the proxy was not used");
    assert!(
        !all.contains("topsecret"),
        "proxy password leaked into output/logs"
    );
    assert!(
        !all.contains(&"Y2Fyb2w6dG9wc2VjcmV0".to_string()),
        "encoded proxy credentials leaked"
    );
}
