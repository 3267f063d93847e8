//! Identity bundles (issue 38, item 4): a signed-in identity of one daemon,
//! exported as one encrypted file and imported into a slot of another
//! daemon, is the same person to the site: the same session cookie, the
//! same proxy session, members-only items readable. A wrong passphrase, a
//! flipped byte or a cut file is refused and the target slot is unchanged.

use crate::common;

use std::sync::Arc;

use common::daemon::Daemon;
use common::proxies::{Seen, basic_user, http_connect_proxy};
use common::shop;
use parking_lot::Mutex;
use serde_json::{Value, json};

const PASS: &str = "a long passphrase";

/// Start a daemon named `name` (its own config, data dir, port and CDP
/// ports) on the env's testbed, going out through the proxy on `proxy`
/// with the identity's proxy session in the user name.
async fn daemon(env: &common::Env, name: &str, proxy: u16) -> Daemon {
    let port = common::daemon::free_port();
    let base = common::free_base_port(2);
    env.write(
        &format!("{name}.toml"),
        &format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\nanonymous_role = \"admin\"\n\n\
             [pool]\nsize = 2\nbase_port = {base}\ndata_dir = \"{name}-data\"\n\
             strategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n\
             proxies = [\"http://u-{{session}}:pw@127.0.0.1:{proxy}\"]\n\n\
             [security]\nallow_private_networks = true\nextra_root_certs = [\"testbed/ca.pem\"]\n"
        ),
    );
    let log = env.path(&format!("{name}.log"));
    let child = cli(env, name)
        .arg("serve")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .kill_on_drop(true)
        .spawn()
        .expect("idpool serve");
    Daemon::up(child, port, log).await
}

fn cli(env: &common::Env, name: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"));
    c.arg("--config").arg(env.path(&format!("{name}.toml")));
    c
}

async fn tool(d: &Daemon, name: &str, args: Value) -> (u16, Value) {
    d.rest_tool(name, args).await
}

async fn slot_of(d: &Daemon, slot: usize) -> Value {
    tool(d, "pool_status", json!({})).await.1["slots"][slot].clone()
}

fn members(slot: usize) -> Value {
    json!({"strategy": "testshop", "operation": "account_reviews",
           "params": {"item": "ACCT7"}, "slot": slot})
}

/// `idpool identity import FILE --slot 1` into `b`: (exit code, stderr).
async fn import(env: &common::Env, file: &std::path::Path, pass: &str) -> (i32, String) {
    let out = cli(env, "b")
        .args(["identity", "import"])
        .arg(file)
        .args(["--slot", "1"])
        .env("IDPOOL_PASSPHRASE", pass)
        .output()
        .await
        .expect("identity import");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn a_signed_in_identity_moves_to_another_daemon_whole() {
    let env = shop(2).await;
    let (seen_a, seen_b) = (
        Arc::new(Mutex::new(Seen::default())),
        Arc::new(Mutex::new(Seen::default())),
    );
    let pa = http_connect_proxy(seen_a.clone()).await;
    let pb = http_connect_proxy(seen_b.clone()).await;
    let a = daemon(&env, "a", pa).await;
    let b = daemon(&env, "b", pb).await;

    // a's slot 0 signs in (the user's own account) and reads members' items.
    let token = common::sign_in(&env).await;
    let name = idpool_testbed::accounts::COOKIE;
    let file = format!(
        "# Netscape HTTP Cookie File\n#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\t{name}\t{token}\n"
    );
    let (code, r) = tool(&a, "import_session", json!({"slot": 0, "session": file})).await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["login"]["testshop"], "logged_in", "{r}");
    let (code, r) = tool(&a, "extract", members(0)).await;
    assert_eq!(code, 200, "a reads members' items: {r}");
    let a0 = slot_of(&a, 0).await;
    let session = a0["identity"]["session"]
        .as_str()
        .expect("session")
        .to_string();

    // Export it (the passphrase from the environment, never argv).
    let bundle = env.path("alice.idpool");
    let out = cli(&env, "a")
        .args(["identity", "export", "--slot", "0", "--out"])
        .arg(&bundle)
        .env("IDPOOL_PASSPHRASE", PASS)
        .output()
        .await
        .expect("identity export");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&bundle).expect("bundle");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&bundle)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains(&token) && !text.contains(&session),
        "the bundle is not sealed"
    );
    // Nothing secret in the daemon's audit log either.
    let audit = std::fs::read_to_string(env.path("a-data/audit.log")).unwrap_or_default();
    assert!(
        !audit.contains(PASS),
        "the passphrase reached the audit log"
    );

    // Damaged or wrong: refused, b's slot 1 as it was.
    let before = slot_of(&b, 1).await;
    let flipped = env.path("flipped.idpool");
    let mut f = bytes.clone();
    let mid = f.len() / 2;
    f[mid] ^= 0x40;
    std::fs::write(&flipped, &f).expect("write");
    let cut = env.path("cut.idpool");
    std::fs::write(&cut, &bytes[..bytes.len() - 20]).expect("write");
    for (file, pass, why) in [
        (&bundle, "not the passphrase", "passphrase is wrong"),
        (&flipped, PASS, "was changed or cut"),
        (&cut, PASS, "was changed or cut"),
    ] {
        let (code, said) = import(&env, file, pass).await;
        assert_eq!(code, 2, "{said}");
        assert!(said.contains(why) && said.contains("unchanged"), "{said}");
        let now = slot_of(&b, 1).await;
        assert_eq!(
            now["identity"], before["identity"],
            "{file:?} changed the slot"
        );
        assert_eq!(now["cookies"]["count"], before["cookies"]["count"]);
    }

    // The real one: b's slot 1 is now alice.
    let (code, said) = import(&env, &bundle, PASS).await;
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(&format!("proxy session {session}")), "{said}");
    let b1 = slot_of(&b, 1).await;
    assert_eq!(b1["identity"]["session"], json!(session), "{b1}");
    assert_eq!(b1["login"]["testshop"]["state"], "logged_in", "{b1}");
    let log_before = env.testbed.log().len();
    let (code, r) = tool(&b, "extract", members(1)).await;
    assert_eq!(code, 200, "b reads members' items as alice: {r}");
    assert!(r["items"].as_array().is_some_and(|i| !i.is_empty()), "{r}");
    let sent: Vec<_> = env.testbed.log().into_iter().skip(log_before).collect();
    assert!(
        sent.iter().any(|e| e
            .cookie
            .as_deref()
            .is_some_and(|c| c.contains(&format!("{name}={token}")))),
        "the testbed did not see alice's session cookie from b"
    );
    let users: Vec<String> = seen_b.lock().auth.iter().map(|a| basic_user(a)).collect();
    assert!(
        users.contains(&format!("u-{session}")),
        "b's proxy did not see alice's proxy session: {users:?}"
    );
    // b's slot 1's own identity before the import is kept.
    assert!(said.contains("retired"), "{said}");
    a.stop().await;
    b.stop().await;
}
