//! What `scripts/install.sh` puts besides the binary: shell completions, the
//! man pages and the docs (its `install_extras`), written twice into a
//! scratch root: the same files both times, completions that parse, pages
//! that `man` renders with the exit status; and usage errors exit 64.
//! The whole script into a scratch root (`--root`), as on a host without
//! systemd: the data and log folders made for the service's user, the same
//! tree from a second run, and `doctor` as that user ok on every check but
//! the daemon's.

use std::hash::Hasher;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The service's user of the scratch installs: `nobody`, there on every
/// Debian (and its group `nogroup`), so the test makes no user.
const NOBODY: u32 = 65534;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn install_extras(dest: &Path) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(". scripts/lib.sh && install_extras \"$0\" \"$1\"")
        .arg(env!("CARGO_BIN_EXE_idpool"))
        .arg(dest)
        .current_dir(root())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One entry of a tree: its path under the root, mode, owner, group and
/// (files) a hash of its content.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    path: PathBuf,
    mode: u32,
    uid: u32,
    gid: u32,
    content: Option<u64>,
}

/// Every folder and file under `dir`, sorted.
fn snapshot(dir: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).expect("metadata");
            let content = if meta.is_dir() {
                stack.push(p.clone());
                None
            } else {
                Some(hash(&p))
            };
            out.push(Entry {
                path: p.strip_prefix(dir).expect("under").to_path_buf(),
                mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
                content,
            });
        }
    }
    out.sort();
    out
}

/// The file's content, hashed a piece at a time (the binary is large).
fn hash(path: &Path) -> u64 {
    let mut file = std::fs::File::open(path).expect("open");
    let mut hasher = std::hash::DefaultHasher::new();
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut buf).expect("read");
        if n == 0 {
            return hasher.finish();
        }
        hasher.write(&buf[..n]);
    }
}

#[test]
fn completions_man_pages_and_docs_install_the_same_twice() {
    let dest = tempfile::tempdir().expect("tempdir");
    install_extras(dest.path());
    let first = snapshot(dest.path());
    install_extras(dest.path());
    assert_eq!(first, snapshot(dest.path()), "a second run changes nothing");
    let has = |rel: &str| first.iter().any(|e| e.path == Path::new(rel));
    for rel in [
        "usr/share/bash-completion/completions/idpool",
        "usr/local/share/zsh/site-functions/_idpool",
        "usr/share/fish/vendor_completions.d/idpool.fish",
        "usr/local/share/man/man1/idpool.1",
        "usr/local/share/man/man1/idpool-doctor.1",
        "usr/local/share/man/man1/idpool-serve.1",
        "usr/local/share/doc/idpool/README.md",
        "usr/local/share/doc/idpool/docs/configuration.md",
    ] {
        assert!(has(rel), "{rel} installed");
    }
    // The bash completion parses and knows the commands.
    let bash = dest
        .path()
        .join("usr/share/bash-completion/completions/idpool");
    let check = Command::new("bash")
        .arg("-n")
        .arg(&bash)
        .status()
        .expect("bash -n");
    assert!(check.success(), "the bash completion parses");
    let text = std::fs::read_to_string(&bash).expect("read");
    for cmd in ["doctor", "serve", "refresh-cookies", "completions"] {
        assert!(text.contains(cmd), "completes {cmd}");
    }
    // man renders the page, with the exit status.
    let man = Command::new("man")
        .arg("-l")
        .arg(dest.path().join("usr/local/share/man/man1/idpool.1"))
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .output()
        .expect("man runs (Debian's man-db)");
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(
        page.contains("doctor") && page.contains("Exit status"),
        "{page}"
    );
    assert!(page.contains("64  usage error"), "{page}");
}

#[test]
fn usage_errors_exit_64_and_help_exits_0() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_idpool"))
            .args(args)
            .output()
            .expect("idpool runs")
    };
    assert_eq!(run(&["no-such-command"]).status.code(), Some(64));
    assert_eq!(run(&["call"]).status.code(), Some(64), "a missing argument");
    assert_eq!(run(&["slots", "--bogus"]).status.code(), Some(64));
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit status"));
    let version = run(&["--version"]);
    assert_eq!(version.status.code(), Some(0));
    let v = String::from_utf8_lossy(&version.stdout);
    assert!(
        v.starts_with(&format!("idpool {} (", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
}

/// `scripts/install.sh ARGS` as root: what it exited with and printed.
fn install_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg("scripts/install.sh")
        .args(args)
        .current_dir(root())
        .output()
        .expect("bash runs")
}

/// `install.sh --no-start` into `dest` with the test's binary, for `nobody`.
fn install_into(dest: &Path) -> Output {
    let dest = dest.to_str().expect("a UTF-8 temp path");
    let out = install_sh(&[
        "--no-start",
        "--root",
        dest,
        "--bin",
        env!("CARGO_BIN_EXE_idpool"),
        "--user",
        "nobody",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `idpool doctor` on the scratch install, run as `nobody`: its lines.
fn doctor_as_nobody(dest: &Path) -> String {
    let out = Command::new(dest.join("usr/local/bin/idpool"))
        .arg("--config")
        .arg(dest.join("etc/idpool/idpool.toml"))
        .arg("doctor")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("idpool doctor runs");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The line of `check` (`ok    data dir: …`).
fn line<'a>(out: &'a str, check: &str) -> &'a str {
    out.lines()
        .find(|l| l[6.min(l.len())..].starts_with(&format!("{check}:")))
        .unwrap_or_else(|| panic!("no `{check}` line in:\n{out}"))
}

/// Issue 59: without systemd nothing made `/var/lib/idpool` and
/// `/var/log/idpool`, so `doctor` as the service's user failed on the data
/// dir and the daemon could not open its audit log. The script makes both
/// with the unit's owner and modes; run twice it changes nothing.
#[test]
fn install_without_systemd_makes_the_folders_and_doctor_passes_as_the_service_user() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().expect("tempdir");
    let dest = scratch.path();
    // The service's user walks down to its config.
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // A path under the scratch root, as the install writes it.
    let at = |rel: &str| dest.join(rel).display().to_string();

    let first = install_into(dest);
    let key = String::from_utf8_lossy(&first.stdout).to_string();
    assert!(key.trim().starts_with("idp_"), "the admin key, once: {key}");
    let said = String::from_utf8_lossy(&first.stderr).to_string();
    let by_hand = format!(
        "runuser -u nobody -- {} --config {} serve",
        at("usr/local/bin/idpool"),
        at("etc/idpool/idpool.toml")
    );
    assert!(said.contains(&by_hand), "how to start it by hand: {said}");
    let config = std::fs::read_to_string(at("etc/idpool/idpool.toml")).expect("config");
    let data_dir = format!("data_dir = \"{}\"", at("var/lib/idpool"));
    assert!(config.contains(&data_dir), "{config}");

    let tree = snapshot(dest);
    let entry = |rel: &str| {
        tree.iter()
            .find(|e| e.path == Path::new(rel))
            .unwrap_or_else(|| panic!("{rel} installed"))
    };
    // scripts/idpool.service: StateDirectoryMode=0750, LogsDirectoryMode=0750.
    for folder in ["var/lib/idpool", "var/log/idpool"] {
        let e = entry(folder);
        assert_eq!(
            (e.uid, e.gid, e.mode),
            (NOBODY, NOBODY, 0o750),
            "{folder}: {e:?}"
        );
    }
    let keys = entry("etc/idpool/keys.toml");
    assert_eq!(
        (keys.uid, keys.gid, keys.mode),
        (0, NOBODY, 0o640),
        "{keys:?}"
    );
    let unit = std::fs::read_to_string(at("etc/systemd/system/idpool.service")).expect("unit");
    let writes = format!(
        "ReadWritePaths={} {}",
        at("var/lib/idpool"),
        at("var/log/idpool")
    );
    assert!(unit.contains("\nUser=nobody\n"), "{unit}");
    assert!(unit.contains(&writes), "{unit}");

    let second = install_into(dest);
    assert!(second.stdout.is_empty(), "no second key");
    assert_eq!(tree, snapshot(dest), "a second run changes nothing");

    let out = doctor_as_nobody(dest);
    let checks: Vec<&str> = out.lines().filter(|l| !l.contains(" checks: ")).collect();
    assert!(checks.len() >= 16, "{out}");
    for l in checks.iter().filter(|l| !l.contains("  daemon: ")) {
        assert!(l.starts_with("ok "), "{l}\n{out}");
    }
    let audit = line(&out, "audit log");
    let created = format!(
        "{} will be created at the first start",
        at("var/log/idpool/audit.log")
    );
    assert!(audit.contains(&created), "{out}");
    assert!(line(&out, "geography").contains("1 slot agrees"), "{out}");

    // What the tester's host had: no log folder. Doctor names it and the fix.
    std::fs::remove_dir(at("var/log/idpool")).expect("rmdir");
    let out = doctor_as_nobody(dest);
    let audit = line(&out, "audit log");
    let fix = format!(
        "Fix: make it for the daemon's user: `install -d -o idpool -g idpool -m 0750 {}`",
        at("var/log/idpool")
    );
    assert!(audit.starts_with("FAIL"), "{out}");
    assert!(audit.contains(&fix), "{audit}");
}

#[test]
fn install_usage_errors_exit_64() {
    for args in [
        &["--bogus"][..],
        &["--root"],
        &["--no-start", "--user"],
        &["--bin", "/nonexistent/idpool"],
    ] {
        let out = install_sh(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("usage: "),
            "{args:?}"
        );
    }
}
