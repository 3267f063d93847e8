//! `idpool doctor` on a good install (a running daemon, a calibrated slot, a
//! reachable proxy: every check ok, exit 0) and on a broken one (a squatted
//! CDP port, a keys file the daemon's user cannot read, a broken strategy and
//! a proxy nobody listens on: each named with its fix, exit 1).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use common::daemon::{Daemon, add_key, free_port, idpool};

/// The unprivileged user the broken install's doctor runs as (root reads
/// any file, so an unreadable keys file shows only to another user).
const NOBODY: u32 = 65534;

/// `idpool --config FILE doctor` (as `uid`): exit code and stdout.
async fn doctor(env: &common::Env, config: &str, uid: Option<u32>) -> (i32, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"));
    cmd.arg("--config").arg(env.path(config)).arg("doctor");
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let out = cmd.output().await.expect("idpool doctor runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// The line of `check`.
fn line<'a>(out: &'a str, check: &str) -> &'a str {
    out.lines()
        .find(|l| l[6.min(l.len())..].starts_with(&format!("{check}:")))
        .unwrap_or_else(|| panic!("no `{check}` line in:\n{out}"))
}

#[tokio::test]
async fn doctor_passes_a_good_install_and_names_each_fault_with_its_fix() {
    let env = common::shop(1).await;
    let admin = add_key(&env, "ops", "admin").await;
    let d = Daemon::start_with(&env, 1, "keys_file = \"keys.toml\"", "", &[]).await;
    let calibrated = idpool(&env)
        .args(["calibrate", "--slot", "0", "--url", &d.url("")])
        .env("IDPOOL_KEY", &admin)
        .output()
        .await
        .expect("calibrate runs");
    assert!(
        calibrated.status.success(),
        "{}",
        String::from_utf8_lossy(&calibrated.stderr)
    );

    // Good: every check ok.
    let (code, out) = doctor(&env, "idpool.toml", None).await;
    assert_eq!(code, 0, "{out}");
    let checks: Vec<&str> = out.lines().filter(|l| !l.contains(" checks: ")).collect();
    assert!(checks.len() >= 10, "{out}");
    assert!(checks.iter().all(|l| l.starts_with("ok ")), "{out}");
    assert!(
        line(&out, "calibration").contains("1 slot current"),
        "{out}"
    );
    assert!(line(&out, "daemon").contains("answers at"), "{out}");
    assert!(line(&out, "chromium").contains("Chromium"), "{out}");

    assert!(
        line(&out, "browser looks").contains("1 slot without signals"),
        "the self-check of the calibration: {out}"
    );
    assert!(
        line(&out, "geography").contains("no profile declares"),
        "{out}"
    );

    // A profile that says its proxy is in Berlin, with a New York clock and
    // English only: a warning that names all three.
    std::fs::create_dir_all(env.path("geo-profiles")).expect("dir");
    env.write(
        "geo-profiles/default.toml",
        "emulation = \"chrome_149\"\ntimezone = \"America/New_York\"\naccept_language = \"en-US,en;q=0.9\"\ngeo = { timezone = \"Europe/Berlin\", locale = \"de-DE\", country = \"DE\" }\n",
    );
    let config = std::fs::read_to_string(env.path("idpool.toml")).expect("config");
    assert!(config.contains("profiles_dir = \"profiles\""), "{config}");
    env.write(
        "geo.toml",
        &config.replace(
            "profiles_dir = \"profiles\"",
            "profiles_dir = \"geo-profiles\"",
        ),
    );
    let (_, out) = doctor(&env, "geo.toml", None).await;
    let geo = line(&out, "geography");
    assert!(geo.starts_with("warn"), "{out}");
    for want in [
        "America/New_York",
        "Europe/Berlin",
        "lack the proxy's de-DE",
        "en-US",
    ] {
        assert!(geo.contains(want), "{want}: {geo}");
    }

    // The same with a proxy that answers (a real CONNECT proxy on loopback).
    let proxy = common::proxies::http_connect_proxy(Arc::default()).await;
    let config = std::fs::read_to_string(env.path("idpool.toml")).expect("config");
    let with_proxy = config.replace(
        "[pool]\n",
        &format!("[pool]\nproxies = [\"http://u:secret@127.0.0.1:{proxy}\"]\n"),
    );
    env.write("proxied.toml", &with_proxy);
    let (code, out) = doctor(&env, "proxied.toml", None).await;
    assert_eq!(code, 0, "{out}");
    assert!(line(&out, "proxies").contains("1 reachable"), "{out}");
    assert!(!out.contains("secret"), "no proxy password in the output");

    // Broken: a squatted CDP port, an unreadable keys file, a broken
    // strategy, a dead proxy; checked as an unprivileged user.
    let squat = std::net::TcpListener::bind("127.0.0.1:0").expect("squat");
    let squatted = squat.local_addr().expect("addr").port();
    let dead = free_port();
    let base = config
        .lines()
        .find_map(|l| l.strip_prefix("base_port = "))
        .expect("base_port")
        .to_string();
    let broken = config
        .replace(
            &format!("base_port = {base}"),
            &format!("base_port = {squatted}"),
        )
        .replace(
            "strategies_dir = \"strategies\"",
            "strategies_dir = \"bad-strategies\"",
        )
        .replace("data_dir = \"data\"", "data_dir = \"bad-data\"")
        .replace(
            "[pool]\n",
            &format!("[pool]\nproxies = [\"http://127.0.0.1:{dead}\"]\n"),
        )
        .replace("keys_file = \"keys.toml\"", "keys_file = \"bad-keys.toml\"");
    assert!(broken.contains("bad-keys.toml"), "{broken}");
    env.write("broken.toml", &broken);
    std::fs::create_dir_all(env.path("bad-strategies")).expect("dir");
    std::fs::copy(
        env.path("strategies/testshop.toml"),
        env.path("bad-strategies/testshop.toml"),
    )
    .expect("copy");
    env.write(
        "bad-strategies/broken.toml",
        "name = \"broken\"\nhosts = [\"127.0.0.1\"]\n[operations.reviews]\nurl = 12\n",
    );
    std::fs::copy(env.path("keys.toml"), env.path("bad-keys.toml")).expect("copy keys");
    std::fs::create_dir_all(env.path("bad-data")).expect("dir");
    // Everything readable by the unprivileged user but the keys file.
    let chown = std::process::Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(env.path(""))
        .status()
        .expect("chown");
    assert!(chown.success());
    std::fs::set_permissions(
        env.path("bad-keys.toml"),
        std::fs::Permissions::from_mode(0o000),
    )
    .expect("chmod");
    let (code, out) = doctor(&env, "broken.toml", Some(NOBODY)).await;
    assert_eq!(code, 1, "{out}");
    let port = line(&out, "cdp ports");
    assert!(port.starts_with("FAIL"), "{out}");
    assert!(
        port.contains(&format!("port {squatted} (slot 0's CDP port) is taken")),
        "{port}"
    );
    assert!(
        port.contains("Fix: ") && port.contains("pool.base_port"),
        "{port}"
    );
    let keys = line(&out, "keys file");
    assert!(
        keys.starts_with("FAIL") && keys.contains("cannot be read"),
        "{keys}"
    );
    assert!(
        keys.contains("Fix: ") && keys.contains("chmod 0640"),
        "{keys}"
    );
    let strategies = line(&out, "strategies and profiles");
    assert!(
        strategies.starts_with("FAIL") && strategies.contains("broken.toml"),
        "{strategies}"
    );
    assert!(strategies.contains("Fix: "), "{strategies}");
    let proxies = line(&out, "proxies");
    assert!(
        proxies.starts_with("FAIL") && proxies.contains(&format!("127.0.0.1:{dead}")),
        "{proxies}"
    );
    // As root, the squatter is named by its command and pid.
    std::fs::set_permissions(
        env.path("bad-keys.toml"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    let (_, out) = doctor(&env, "broken.toml", None).await;
    assert!(
        line(&out, "cdp ports").contains(&format!("(pid {})", std::process::id())),
        "{out}"
    );
    drop(squat);
    d.stop().await;
}

/// Issue 56: `doctor` with the daemon's key warns when two signed-in
/// identities of one site share a device fingerprint, naming the site and
/// the slots (and the fix); without the key it knows only the devices.
#[tokio::test]
async fn doctor_warns_about_signed_in_identities_of_one_site_on_one_device() {
    let env = common::shop(2).await;
    let admin = add_key(&env, "ops", "admin").await;
    let seed = common::seat_persona(&env, 0, |_| true).seed;
    common::seat_persona(&env, 1, |p| p.seed == seed);
    let d = Daemon::start_with(&env, 2, "keys_file = \"keys.toml\"", "", &[]).await;
    let http = reqwest::Client::new();
    let tool = |name: &str, args: serde_json::Value| {
        http.post(d.url(&format!("/api/v1/tools/{name}")))
            .bearer_auth(&admin)
            .json(&args)
            .send()
    };
    let r = tool("calibrate", serde_json::json!({}))
        .await
        .expect("calibrate");
    assert!(
        r.status().is_success(),
        "{}",
        r.text().await.unwrap_or_default()
    );
    for slot in 0..2 {
        let session = common::signed_in_session(&env).await;
        let r = tool(
            "import_session",
            serde_json::json!({"slot": slot, "session": session}),
        )
        .await
        .expect("import");
        assert!(
            r.status().is_success(),
            "{}",
            r.text().await.unwrap_or_default()
        );
    }
    let run = |key: Option<&str>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"));
        cmd.arg("--config")
            .arg(env.path("idpool.toml"))
            .arg("doctor");
        cmd.env_remove("IDPOOL_KEY");
        if let Some(k) = key {
            cmd.env("IDPOOL_KEY", k);
        }
        cmd.output()
    };
    let out = run(Some(&admin)).await.expect("doctor");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let l = line(&text, "linkage");
    assert!(l.starts_with("warn"), "{text}");
    assert!(l.contains("testshop: slots 0 and 1"), "{l}");
    assert!(l.contains("distinct_devices"), "names the fix: {l}");
    assert!(!text.contains(&admin), "the key shows nowhere");
    // The same in /metrics: a pair that is one device, each slot's peer,
    // and the site's signed-in pair.
    let m = http
        .get(d.url("/metrics"))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for want in [
        "idpool_linkage_same_device_pairs 1",
        "idpool_slot_same_device_peers{slot=\"0\"} 1",
        "idpool_slot_same_device_peers{slot=\"1\"} 1",
        "idpool_linkage_signed_in_sharing_pairs{strategy=\"testshop\"} 1",
    ] {
        assert!(m.contains(want), "{want} not in:\n{m}");
    }
    let out = run(None).await.expect("doctor");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let l = line(&text, "linkage");
    assert!(
        l.contains("one device to a fingerprinting library: slots 0 and 1")
            && l.contains("IDPOOL_KEY"),
        "{l}"
    );
    d.stop().await;
}
