//! Acceptance: a slot with a Chrome emulation passes the testbed's JA4 gate over
//! HTTPS, trusting the testbed CA only through `security.extra_root_certs`; curl and
//! a plain rustls client (reqwest) are blocked.

use crate::common;

use idpool::request::FetchRequest;
use idpool::strategy::Outcome;

#[tokio::test]
async fn chrome_slot_passes_the_gate_curl_and_rustls_are_blocked() {
    let env = common::Env::new(1).await;
    env.testbed.set_modes(|m| m.gate = true);
    let pool = env.pool();

    // The slot: Chrome 149 emulation over HTTPS.
    let fetched = pool
        .fetch(FetchRequest::get(env.url("/product/B0GATE1")), None)
        .await
        .expect("slot fetch");
    assert_eq!(fetched.response.status, 200, "{}", fetched.response.text());
    assert_eq!(fetched.outcome, Outcome::Ok);
    assert!(fetched.response.text().contains("id=\"productTitle\""));

    // curl, trusting the same CA.
    // tokio's Command: the testbed runs on this test's runtime and must keep serving.
    let out = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-m",
            "20",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--cacert",
        ])
        .arg(&env.testbed.ca_path)
        .arg(env.url("/product/B0GATE1").as_str())
        .output()
        .await
        .expect("curl runs (scripts/test.sh installs it)");
    let curl = String::from_utf8_lossy(&out.stdout);
    assert!(curl.ends_with("403"), "curl was not blocked: {curl}");
    assert!(curl.contains("Automated client detected"));

    // A plain rustls client.
    let ca = reqwest::Certificate::from_pem(env.testbed.ca_pem.as_bytes()).expect("ca");
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("reqwest");
    let resp = client
        .get(env.url("/product/B0GATE1").as_str())
        .send()
        .await
        .expect("reqwest send");
    assert_eq!(resp.status().as_u16(), 403);
    assert!(
        resp.text()
            .await
            .expect("body")
            .contains("Automated client detected")
    );

    // What the testbed saw.
    let stats = env.testbed.stats();
    for (ja4, s) in &stats.by_ja4 {
        println!(
            "JA4 {ja4}  family={} requests={} blocked={}",
            s.family, s.count, s.blocked
        );
    }
    let chrome: Vec<_> = stats
        .by_ja4
        .iter()
        .filter(|(_, s)| s.family == "chrome")
        .collect();
    assert_eq!(
        chrome.len(),
        1,
        "one Chrome fingerprint expected: {stats:?}"
    );
    assert_eq!(chrome[0].1.blocked, 0);
    let others: Vec<_> = stats
        .by_ja4
        .iter()
        .filter(|(_, s)| s.family == "other")
        .collect();
    assert_eq!(
        others.len(),
        2,
        "curl and rustls should be two distinct non-browser fingerprints: {stats:?}"
    );
    assert!(others.iter().all(|(_, s)| s.blocked == s.count));
}

#[tokio::test]
async fn testbed_ca_is_trusted_only_through_extra_root_certs() {
    let env = common::Env::new(1).await;
    env.write_config(1, false);
    let pool = env.pool();
    let err = pool
        .fetch(FetchRequest::get(env.url("/")), None)
        .await
        .expect_err("an unknown CA must fail the handshake");
    assert!(err.to_string().contains("TLS"), "{err} / {err:?}");
}

#[tokio::test]
async fn every_emulation_family_in_profiles_readme_passes_the_gate() {
    let env = common::Env::new(1).await;
    env.testbed.set_modes(|m| m.gate = true);
    for emulation in ["chrome_149", "edge_148", "opera_131"] {
        env.write(
            "profiles/default.toml",
            &format!("emulation = \"{emulation}\"\nplatform = \"linux\"\n"),
        );
        let pool = env.pool();
        let fetched = pool
            .fetch(FetchRequest::get(env.url("/whoami")), None)
            .await
            .expect("fetch");
        let who: serde_json::Value = serde_json::from_slice(&fetched.response.body).expect("json");
        println!("{emulation}: JA4 {} family {}", who["ja4"], who["family"]);
        assert_eq!(
            who["browser"], true,
            "{emulation} was not seen as a browser: {who}"
        );
    }
}

/// Issue 56: a profile whose engine the slots' browser is not (Firefox,
/// Safari on Chromium) fails to load, naming why; one that claims another
/// operating system needs `pretend_os`.
#[tokio::test]
async fn a_profile_the_browser_cannot_back_is_refused_with_its_reason() {
    let env = common::Env::new(1).await;
    for (file, want) in [
        (
            "emulation = \"firefox_151\"\nplatform = \"linux\"\n",
            "is firefox, but every slot's browser is Chromium",
        ),
        (
            "emulation = \"safari_26.4\"\nplatform = \"linux\"\n",
            "is safari, but every slot's browser is Chromium",
        ),
        (
            "emulation = \"chrome_149\"\nplatform = \"windows\"\n",
            "claims Windows, but its browser runs on Linux",
        ),
        (
            "emulation = \"chrome_149\"\nplatform = \"macos\"\n",
            "set pretend_os = true",
        ),
    ] {
        env.write("profiles/default.toml", file);
        let e = idpool::pool::Pool::open(&env.config())
            .err()
            .unwrap_or_else(|| panic!("{file} loaded"));
        let text = format!("{e:#}");
        assert!(text.contains(want), "{file}: {text}");
        assert!(text.contains("default.toml"), "names the file: {text}");
    }
    env.write(
        "profiles/default.toml",
        "emulation = \"chrome_149\"\nplatform = \"windows\"\npretend_os = true\n",
    );
    let pool = env.pool();
    common::shutdown_and_check(&pool).await;
}
