//! Shared helpers for the integration tests: an in-process testbed on ephemeral
//! loopback ports and a pool configured against it in a temp folder.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use idpool::config::Config;
use idpool::pool::Pool;
use idpool::testbed::{Testbed, TestbedConfig};

/// The testbed strategy the tests use: no politeness delay, captcha/login/403 are
/// hard blocks, the JS interstitial is a challenge, `.no-reviews` proves empty.
pub const TESTBED_STRATEGY: &str = r##"
name = "testbed"
hosts = ["127.0.0.1"]
cookie_domain = "127.0.0.1"

[politeness]
min_interval_ms = 0
max_in_flight = 8
global_max_in_flight = 32

[block]
status = [403]
body = ["validateCaptcha"]
url = ["/ap/signin"]

[challenge]
selector = "#tb-challenge"

[empty]
selector = ".no-reviews"
"##;

/// A second strategy over the same testbed, reached as `localhost`.
pub const ALT_STRATEGY: &str = r##"
name = "alt"
hosts = ["localhost"]

[politeness]
min_interval_ms = 0
max_in_flight = 8

[block]
body = ["validateCaptcha"]
"##;

/// A temp folder holding idpool.toml, strategies/ and profiles/.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub testbed: Testbed,
}

impl Env {
    /// Start a testbed and write a config for `slots` default-profile slots.
    pub async fn new(slots: usize) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let testbed = Testbed::start(TestbedConfig::ephemeral(dir.path().join("testbed")))
            .await
            .expect("testbed starts");
        let env = Env { dir, testbed };
        env.write("strategies/testbed.toml", TESTBED_STRATEGY);
        env.write("strategies/alt.toml", ALT_STRATEGY);
        env.write(
            "profiles/default.toml",
            "emulation = \"chrome_149\"\nplatform = \"linux\"\n",
        );
        env.write_config(slots, true);
        env
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// idpool.toml with `slots` slots; `trust_ca` adds the testbed CA to extra_root_certs.
    pub fn write_config(&self, slots: usize, trust_ca: bool) {
        let certs = if trust_ca {
            "[\"testbed/ca.pem\"]"
        } else {
            "[]"
        };
        self.write(
            "idpool.toml",
            &format!(
                "[pool]\nsize = {slots}\ndata_dir = \"data\"\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n\n[security]\nallow_private_networks = true\nextra_root_certs = {certs}\n"
            ),
        );
    }

    pub fn config(&self) -> Config {
        Config::load_file(&self.path("idpool.toml")).expect("config loads")
    }

    pub fn pool(&self) -> Pool {
        Pool::open(&self.config()).expect("pool opens")
    }

    /// `https://127.0.0.1:<port><path>`
    pub fn url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!("{}{path}", self.testbed.https_url())).expect("url")
    }

    /// The same testbed reached as `localhost` (the `alt` strategy).
    pub fn alt_url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!(
            "https://localhost:{}{path}",
            self.testbed.https_addr.port()
        ))
        .expect("url")
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }
}
