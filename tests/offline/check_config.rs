//! Acceptance: `idpool check-config` names file and line for each kind of broken
//! file (config, profile, strategy), and the message says what is wrong.

use std::path::Path;
use std::process::Command;

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// A valid setup: one strategy, one profile, a config pointing at both.
    fn new() -> Case {
        let c = Case {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        c.write("idpool.toml", "[pool]\nsize = 2\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\ndata_dir = \"data\"\n");
        c.write(
            "profiles/default.toml",
            "emulation = \"chrome_149\"\nplatform = \"windows\"\npretend_os = true\n",
        );
        c.write("strategies/shop.toml", "name = \"shop\"\nhosts = [\"shop.test\", \"*.shop.test\"]\n\n[block]\nbody = [\"validateCaptcha\"]\nselector = \"form[action*=captcha]\"\n");
        c
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// Run check-config; returns (success, stdout + stderr).
    fn check(&self) -> (bool, String) {
        self.check_with(&self.dir.path().join("idpool.toml"))
    }

    fn check_with(&self, config: &Path) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_idpool"))
            .arg("--config")
            .arg(config)
            .arg("check-config")
            .current_dir(self.dir.path())
            .output()
            .expect("idpool runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn file(&self, rel: &str) -> String {
        self.dir.path().join(rel).display().to_string()
    }
}

fn assert_reports(c: &Case, expected: &str) {
    let (ok, out) = c.check();
    assert!(!ok, "check-config passed a broken setup:\n{out}");
    assert!(out.contains(expected), "expected `{expected}` in:\n{out}");
}

#[test]
fn valid_setup_passes() {
    let c = Case::new();
    let (ok, out) = c.check();
    assert!(ok, "{out}");
    assert!(out.contains("ok (2 slots, 1 profile, 1 strategy)"), "{out}");
}

#[test]
fn config_unknown_key() {
    let c = Case::new();
    c.write(
        "idpool.toml",
        "[pool]\nsize = 2\n\n[server]\nlisten = \"127.0.0.1:8790\"\nlisen = \"x\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:6: unknown field `lisen`, expected one of `listen`",
            c.file("idpool.toml")
        ),
    );
}

#[test]
fn config_wrong_type() {
    let c = Case::new();
    c.write("idpool.toml", "[pool]\nbase_port = \"high\"\n");
    assert_reports(
        &c,
        &format!(
            "{}:2: invalid type: string \"high\", expected u16",
            c.file("idpool.toml")
        ),
    );
}

#[test]
fn config_bad_recording() {
    let c = Case::new();
    c.write(
        "idpool.toml",
        "[pool]\nsize = 1\n\n[recording]\nwhen = \"sometimes\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:5: unknown variant `sometimes`, expected one of `signed_in`, `always`, `never`",
            c.file("idpool.toml")
        ),
    );
    c.write("idpool.toml", "[pool]\nsize = 1\n\n[recording]\nfps = 0\n");
    assert_reports(&c, "recording.fps must be above 0 and at most 30 (is 0)");
    c.write(
        "idpool.toml",
        "[pool]\nsize = 1\n\n[recording]\nmax_recording_mb = 64\nmax_total_mb = 32\n",
    );
    assert_reports(
        &c,
        "recording.max_total_mb (32) must be at least recording.max_recording_mb (64)",
    );
}

#[test]
fn config_bad_notify() {
    let c = Case::new();
    c.write(
        "idpool.toml",
        "[pool]\nsize = 1\n\n[notify]\nurl = \"hooks.example/x\"\n",
    );
    assert_reports(
        &c,
        "notify.url must be an http(s) URL (is `hooks.example/x`)",
    );
}

#[test]
fn config_duplicate_slot() {
    let c = Case::new();
    c.write(
        "idpool.toml",
        "[pool]\nprofiles_dir = \"profiles\"\n\n[[pool.slot]]\nid = 0\nprofile = \"default\"\n\n[[pool.slot]]\nid = 0\nprofile = \"default\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:9: duplicate slot 0 (first declared on line 5)",
            c.file("idpool.toml")
        ),
    );
}

#[test]
fn config_missing_file() {
    let c = Case::new();
    let (ok, out) = c.check_with(&c.dir.path().join("nope.toml"));
    assert!(!ok);
    assert!(
        out.contains(&format!("{}: file not found", c.file("nope.toml"))),
        "{out}"
    );
}

#[test]
fn config_missing_root_cert_and_profile() {
    let c = Case::new();
    c.write(
        "idpool.toml",
        "[pool]\nprofiles = [\"default\", \"mobile\"]\nprofiles_dir = \"profiles\"\nstrategies_dir = \"strategies\"\n\n[security]\nextra_root_certs = [\"certs/corp.pem\"]\n",
    );
    let (ok, out) = c.check();
    assert!(!ok);
    assert!(
        out.contains(&format!(
            "{}:2: slot 1 uses profile `mobile`, which is not in",
            c.file("idpool.toml")
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{}: extra_root_certs: cannot read",
            c.file("certs/corp.pem")
        )),
        "{out}"
    );
}

#[test]
fn profile_unknown_emulation() {
    let c = Case::new();
    c.write(
        "profiles/default.toml",
        "# a profile\nemulation = \"chrome_999\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:2: unknown emulation `chrome_999`",
            c.file("profiles/default.toml")
        ),
    );
}

#[test]
fn profile_unknown_key_and_bad_proxy() {
    let c = Case::new();
    c.write(
        "profiles/default.toml",
        "emulation = \"chrome_149\"\nuser_agnet = \"x\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:2: unknown field `user_agnet`",
            c.file("profiles/default.toml")
        ),
    );
    c.write(
        "profiles/default.toml",
        "emulation = \"chrome_149\"\nproxy = \"ftp://user:hunter2@proxy.test:21\"\n",
    );
    let (ok, out) = c.check();
    assert!(!ok);
    assert!(
        out.contains(&format!(
            "{}:2: unsupported proxy scheme `ftp`",
            c.file("profiles/default.toml")
        )),
        "{out}"
    );
    assert!(!out.contains("hunter2"), "proxy password printed: {out}");
}

#[test]
fn strategy_bad_selector() {
    let c = Case::new();
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = [\"shop.test\"]\n\n[empty]\nselector = \"div[[\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:5: empty.selector `div[[` is not a valid CSS selector",
            c.file("strategies/shop.toml")
        ),
    );
}

#[test]
fn strategy_unknown_key_and_wrong_type() {
    let c = Case::new();
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = [\"shop.test\"]\n[block]\nbodies = [\"x\"]\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:4: unknown field `bodies`",
            c.file("strategies/shop.toml")
        ),
    );
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = \"shop.test\"\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:2: invalid type: string \"shop.test\", expected a sequence",
            c.file("strategies/shop.toml")
        ),
    );
}

#[test]
fn strategy_duplicate_name_and_host() {
    let c = Case::new();
    c.write(
        "strategies/zz.toml",
        "name = \"other\"\nhosts = [\"shop.test\"]\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}: host `shop.test` is already covered by strategy `shop`",
            c.file("strategies/zz.toml")
        ),
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let c = Case::new();
    c.write("profiles/default.toml", "emulation = 149\n");
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = [\"http://shop.test/\"]\n",
    );
    let (ok, out) = c.check();
    assert!(!ok);
    assert!(
        out.contains(&format!("{}:1:", c.file("profiles/default.toml"))),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{}:2: host `http://shop.test/` is not a host name",
            c.file("strategies/shop.toml")
        )),
        "{out}"
    );
}

#[test]
fn bundled_files_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(root.join("idpool.example.toml"))
        .arg("check-config")
        .output()
        .expect("idpool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
}

const OP_HEAD: &str = "name = \"shop\"\nhosts = [\"shop.test\"]\nbase_url = \"https://shop.test\"\n\n[operations.reviews.params.item]\ntype = \"string\"\nrequired = true\n\n";

#[test]
fn operation_unknown_template_variable() {
    let c = Case::new();
    c.write(
        "strategies/shop.toml",
        &format!("{OP_HEAD}[operations.reviews.tier2]\nurl = \"{{base_url}}/r/{{item}}?p={{page}}\"\n[operations.reviews.tier2.extract]\nitems = \"div.review\"\n"),
    );
    assert_reports(
        &c,
        &format!(
            "{}:10: operations.reviews.tier2.url uses unknown template variable `{{page}}` (known: item, base_url)",
            c.file("strategies/shop.toml")
        ),
    );
}

#[test]
fn operation_bad_field_selector_and_unknown_key() {
    let c = Case::new();
    c.write(
        "strategies/shop.toml",
        &format!("{OP_HEAD}[operations.reviews.tier2]\nurl = \"{{base_url}}/r/{{item}}\"\n[operations.reviews.tier2.extract]\nitems = \"div.review\"\nfields = {{ title = {{ css = \"h2[\" }} }}\n"),
    );
    assert_reports(
        &c,
        &format!(
            "{}:13: operations.reviews.tier2.extract.fields.title `h2[` is not a valid CSS selector",
            c.file("strategies/shop.toml")
        ),
    );
    c.write(
        "strategies/shop.toml",
        &format!("{OP_HEAD}[operations.reviews.tier2]\nurl = \"{{base_url}}/r/{{item}}\"\nformt = \"json\"\n"),
    );
    assert_reports(
        &c,
        &format!(
            "{}:11: unknown field `formt`",
            c.file("strategies/shop.toml")
        ),
    );
}

#[test]
fn operation_without_tiers_and_wait_for_outside_the_browser() {
    let c = Case::new();
    c.write("strategies/shop.toml", OP_HEAD);
    assert_reports(&c, "operations.reviews has no tier1, tier2 or tier3");
    c.write(
        "strategies/shop.toml",
        &format!("{OP_HEAD}[operations.reviews.tier2]\nurl = \"{{base_url}}/r/{{item}}\"\nwait_for = \"#x\"\nextract = {{ items = \"div\" }}\n"),
    );
    assert_reports(
        &c,
        &format!(
            "{}:11: operations.reviews.tier2.wait_for only applies to tier3",
            c.file("strategies/shop.toml")
        ),
    );
}

#[test]
fn a_broken_strategy_is_reported_at_start_and_the_others_still_load() {
    let c = Case::new();
    c.write(
        "strategies/broken.toml",
        "name = \"broken\"\nhosts = [\"broken.test\"]\n[empty]\nselector = \"p[[\"\n",
    );
    // The closed list: a host only a skipped strategy named is not fetched.
    let cfg = std::fs::read_to_string(c.dir.path().join("idpool.toml")).expect("cfg");
    c.write(
        "idpool.toml",
        &format!("{cfg}\n[security]\npublic_web = false\n"),
    );
    let (ok, out) = c.check();
    assert!(!ok);
    let expected = format!(
        "{}:4: empty.selector `p[[` is not a valid CSS selector",
        c.file("strategies/broken.toml")
    );
    assert!(out.contains(&expected), "{out}");
    // Opening the pool (what the daemon does at start) logs the same line and goes on.
    let run = Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(c.dir.path().join("idpool.toml"))
        .args(["fetch", "https://broken.test/x"])
        .output()
        .expect("idpool runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains(&expected) && stderr.contains("strategy skipped"),
        "{stderr}"
    );
    assert!(
        stderr.contains("host `broken.test` is not covered by any strategy"),
        "{stderr}"
    );
    let run = Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(c.dir.path().join("idpool.toml"))
        .args(["fetch", "file:///etc/hostname"])
        .output()
        .expect("idpool runs");
    assert!(String::from_utf8_lossy(&run.stderr).contains("scheme `file` is not allowed"));
    // The good strategy loaded: its host gets past the allow-list (and then fails
    // to resolve, `.test` names never do).
    let run = Command::new(env!("CARGO_BIN_EXE_idpool"))
        .arg("--config")
        .arg(c.dir.path().join("idpool.toml"))
        .args(["fetch", "https://shop.test/x"])
        .output()
        .expect("idpool runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("not covered"), "{stderr}");
}

#[test]
fn backoff_settings_are_checked() {
    let c = Case::new();
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = [\"shop.test\"]\n\n[politeness]\nmax_requests_per_minute = 3\nmin_requests_per_minute = 6\n",
    );
    assert_reports(
        &c,
        &format!(
            "{}:4: politeness.max_requests_per_minute is below min_requests_per_minute",
            c.file("strategies/shop.toml")
        ),
    );
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = [\"shop.test\"]\n\n[rate_limit]\nstatus = [4290]\n",
    );
    assert_reports(&c, "rate_limit.status: 4290 is not an HTTP status code");
    c.write(
        "strategies/shop.toml",
        "name = \"shop\"\nhosts = [\"shop.test\"]\n[operations.o]\n[operations.o.tier2]\nurl = \"https://shop.test/\"\nextract = { items = \"p\" }\nblock = { selector = \"div[[\" }\n",
    );
    assert_reports(
        &c,
        "operations.o.tier2.block.selector `div[[` is not a valid CSS selector",
    );
    c.write(
        "idpool.toml",
        "[pool]\nsize = 2\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n[breaker]\nwhen_all_open = \"retry\"\n",
    );
    assert_reports(&c, "unknown variant `retry`, expected `fail` or `wait`");
}

/// Slot proxies and `[pool.retire]`: a bad URL names its line and never
/// echoes the password; a templated one checks; a misspelt key is named.
#[test]
fn slot_proxies_and_retirement_are_checked() {
    let c = Case::new();
    let base = "[pool]\nsize = 2\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\ndata_dir = \"data\"\n";
    c.write(
        "idpool.toml",
        &format!("{base}proxies = [\"http://u-{{slot}}-{{session}}:pw@127.0.0.1:3128\"]\n[pool.retire]\nafter_hard_blocks = 3\n"),
    );
    let (ok, out) = c.check();
    assert!(ok, "{out}");
    c.write(
        "idpool.toml",
        &format!("{base}proxies = [\"ftp://u:s3cretpw@h:1\"]\n"),
    );
    assert_reports(
        &c,
        &format!(
            "{}:6: unsupported proxy scheme `ftp`",
            c.file("idpool.toml")
        ),
    );
    let (_, out) = c.check();
    assert!(!out.contains("s3cretpw"), "{out}");
    c.write(
        "idpool.toml",
        &format!("{base}[pool.retire]\nafter_hardblocks = 2\n"),
    );
    assert_reports(&c, "unknown field `after_hardblocks`");
}
