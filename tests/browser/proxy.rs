//! Profiles' proxies: a slot reaches the testbed through a real HTTP CONNECT proxy
//! and a real SOCKS5 proxy (both tiny, on loopback, requiring credentials), and the
//! credentials never appear in what idpool prints.

use crate::common;

use std::sync::Arc;

use common::proxies::{Seen, http_connect_proxy, socks5_proxy};
use idpool::request::FetchRequest;
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
    assert_eq!(s.auth, ["Basic YWxpY2U6czNjckB0"]);
    assert!(format!("{:?}", pool.leases().slots_for_tests()[0].profile).contains("***@127.0.0.1"));
    assert!(!format!("{:?}", pool.leases().slots_for_tests()[0].profile).contains("s3cr"));
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

/// An `https://` upstream (CONNECT spoken over TLS, its certificate from a
/// CA in `security.extra_root_certs`) carries both tiers of the slot: the
/// HTTP tier's requests and every request of its browser, through the egress.
#[tokio::test]
async fn an_https_upstream_proxy_carries_both_tiers() {
    use common::proxies::{basic_user, https_connect_proxy};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let env = common::Env::new(1).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let handshakes = Arc::new(AtomicUsize::new(0));
    let port = https_connect_proxy(
        seen.clone(),
        env.testbed.leaf_tls.clone(),
        handshakes.clone(),
    )
    .await;
    env.write(
        "profiles/default.toml",
        &format!("emulation = \"chrome_149\"\nproxy = \"https://erin:tl5pw@localhost:{port}\"\n"),
    );
    let pool = env.pool();
    let target = env.testbed.https_addr.to_string();
    let through = || seen.lock().targets.iter().filter(|t| **t == target).count();
    let f = pool
        .fetch(FetchRequest::get(env.url("/product/B0TLSPX")), None)
        .await
        .expect("the HTTP tier through the https proxy");
    assert_eq!(f.response.status, 200);
    let after_http = through();
    assert!(after_http >= 1, "{:?}", seen.lock());
    let b = pool
        .browse(env.url("/product/B0TLSPX2"), None, Some(0))
        .await
        .expect("the browser through the egress and the https proxy");
    assert_eq!(b.response.status, 200);
    assert!(
        through() > after_http,
        "the browser skipped the proxy: {:?}",
        seen.lock()
    );
    assert!(handshakes.load(Ordering::Relaxed) >= 2);
    assert!(seen.lock().auth.iter().all(|a| basic_user(a) == "erin"));
    common::shutdown_and_check(&pool).await;
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
    let mut all = String::new();
    // Both tiers: the browser's requests go through its egress to the proxy.
    for tier in ["http", "browser"] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
            .arg("--config")
            .arg(env.path("idpool.toml"))
            .args(["fetch", env.url("/whoami").as_str(), "--tier", tier])
            .env("RUST_LOG", "trace")
            .output()
            .await
            .expect("idpool fetch");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{tier}: {text}");
        all.push_str(&text);
    }
    assert!(seen.lock().auth.len() >= 2, "both tiers used the proxy");
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

/// idpool.toml with two slots whose upstreams are proxies `a` and `b`.
fn two_proxy_config(env: &common::Env, a: u16, b: u16, extra: &str) {
    env.write(
        "idpool.toml",
        &format!(
            "[pool]\nsize = 2\nbase_port = {}\ndata_dir = \"data\"\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n\
             proxies = [\"http://user-{{slot}}-{{session}}:pr0xypw@127.0.0.1:{a}\", \"http://user-{{slot}}-{{session}}:pr0xypw@127.0.0.1:{b}\"]\n{extra}\n\
             [security]\nallow_private_networks = true\nextra_root_certs = [\"testbed/ca.pem\"]\n",
            common::free_base_port(2)
        ),
    );
}

/// `[pool] proxies` gives each slot its own upstream, with `{slot}` and
/// `{session}` in the user name: every request of slot 0, HTTP tier and
/// browser alike, goes through proxy A as `user-0-<session>`, every request
/// of slot 1 through proxy B; the password is nowhere to be read.
#[tokio::test]
async fn each_slot_leaves_through_its_own_proxy_on_both_tiers() {
    use common::proxies::basic_user;
    let env = common::Env::new(2).await;
    let (seen_a, seen_b) = (
        Arc::new(Mutex::new(Seen::default())),
        Arc::new(Mutex::new(Seen::default())),
    );
    let a = http_connect_proxy(seen_a.clone()).await;
    let b = http_connect_proxy(seen_b.clone()).await;
    two_proxy_config(&env, a, b, "");
    let pool = env.pool();
    let target = env.testbed.https_addr.to_string();
    let through = |s: &Arc<Mutex<Seen>>| s.lock().targets.iter().filter(|t| **t == target).count();
    for (slot, mine, other) in [(0, &seen_a, &seen_b), (1, &seen_b, &seen_a)] {
        let (before_mine, before_other) = (through(mine), through(other));
        pool.fetch(FetchRequest::get(env.url("/product/B0PX1")), Some(slot))
            .await
            .expect("http tier");
        let after_http = through(mine);
        assert!(
            after_http > before_mine,
            "slot {slot}'s HTTP tier skipped its proxy"
        );
        pool.browse(env.url("/product/B0PX2"), None, Some(slot))
            .await
            .expect("browser");
        assert!(
            through(mine) > after_http,
            "slot {slot}'s browser skipped its proxy"
        );
        assert_eq!(
            through(other),
            before_other,
            "slot {slot} used the other proxy"
        );
        let session = pool.leases().slots_for_tests()[slot].identity().session;
        let users: Vec<String> = mine.lock().auth.iter().map(|a| basic_user(a)).collect();
        assert!(
            users.iter().all(|u| *u == format!("user-{slot}-{session}")) && !users.is_empty(),
            "slot {slot}: {users:?}"
        );
    }
    assert_ne!(
        pool.leases().slots_for_tests()[0].identity().session,
        pool.leases().slots_for_tests()[1].identity().session
    );
    let status = pool.reports().status_now().to_string();
    assert!(!status.contains("pr0xypw"), "{status}");
    assert!(status.contains("***@127.0.0.1"), "{status}");
    // `:PORT` not followed by another digit (the egress's own port may
    // begin with the proxy's digits: `:43691` is not `:4369`).
    let names_port = |x: &str, port: u16| {
        let needle = format!(":{port}");
        x.match_indices(&needle).any(|(at, _)| {
            !x[at + needle.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
    };
    for (_, args) in common::chromium_browsers_under(&env.path("data")) {
        assert!(
            !args
                .iter()
                .any(|x| x.contains("pr0xypw") || names_port(x, a) || names_port(x, b)),
            "{args:?}"
        );
    }
    common::shutdown_and_check(&pool).await;

    // The session survives a restart: the same IP for the same identity.
    let before = seen_a.lock().auth.len();
    let pool = env.pool();
    pool.fetch(FetchRequest::get(env.url("/whoami")), Some(0))
        .await
        .expect("again");
    let last = seen_a.lock().auth[before..].to_vec();
    assert!(!last.is_empty());
    assert_eq!(
        basic_user(&last[0]),
        format!(
            "user-0-{}",
            pool.leases().slots_for_tests()[0].identity().session
        )
    );
}

/// A slot whose proxy refuses connections becomes `proxy_down` after
/// `pool.proxy_failures` failures and calls go to the other slot; when the
/// proxy comes back the probe finds it and the slot serves again.
#[tokio::test]
async fn a_slot_whose_proxy_is_down_is_routed_around_until_it_recovers() {
    use common::proxies::http_connect_proxy_on;
    let env = common::Env::new(2).await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }; // nothing listens here now
    let seen_b = Arc::new(Mutex::new(Seen::default()));
    let b = http_connect_proxy(seen_b.clone()).await;
    two_proxy_config(&env, dead, b, "proxy_failures = 2\nproxy_probe_secs = 1");
    let pool = env.pool();
    let mut failures = 0;
    for _ in 0..6 {
        match pool
            .fetch(FetchRequest::get(env.url("/whoami")), None)
            .await
        {
            Ok(f) => assert_eq!(f.slot, 1, "slot 0 cannot have answered"),
            Err(e) => {
                failures += 1;
                assert_eq!(e.kind(), idpool::ErrorKind::Network, "{e}");
            }
        }
        if pool.leases().slots_for_tests()[0].proxy_down() {
            break;
        }
    }
    assert!(
        pool.leases().slots_for_tests()[0].proxy_down(),
        "slot 0 is proxy_down"
    );
    assert_eq!(failures, 2, "pool.proxy_failures failures took it down");
    let status = pool.reports().status_now();
    assert_eq!(
        status["slots"][0]["proxy_health"]["state"], "down",
        "{status}"
    );
    for _ in 0..6 {
        let f = pool
            .fetch(FetchRequest::get(env.url("/whoami")), None)
            .await
            .expect("the other slot serves");
        assert_eq!(f.slot, 1);
    }
    let e = pool
        .fetch(FetchRequest::get(env.url("/whoami")), Some(0))
        .await
        .expect_err("pinned to a slot whose proxy is down");
    assert!(e.to_string().contains("proxy is down"), "{e}");
    assert!(e.retry_after().is_some());

    // The proxy comes back on the same port.
    let seen_a = Arc::new(Mutex::new(Seen::default()));
    http_connect_proxy_on(dead, seen_a.clone())
        .await
        .expect("the port is free again");
    for _ in 0..100 {
        if !pool.leases().slots_for_tests()[0].proxy_down() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        !pool.leases().slots_for_tests()[0].proxy_down(),
        "the probe brought it back"
    );
    let f = pool
        .fetch(FetchRequest::get(env.url("/whoami")), Some(0))
        .await
        .expect("slot 0 serves again");
    assert_eq!(f.response.status, 200);
    assert!(!seen_a.lock().targets.is_empty());
    let kinds: Vec<String> = pool
        .events()
        .recent()
        .into_iter()
        .filter(|e| e.slot == Some(0))
        .map(|e| e.kind.clone())
        .collect();
    assert!(
        kinds.iter().any(|k| k == "proxy_down") && kinds.iter().any(|k| k == "proxy_up"),
        "{kinds:?}"
    );
}
