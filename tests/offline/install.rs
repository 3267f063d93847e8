//! What `scripts/install.sh` puts besides the binary: shell completions, the
//! man pages and the docs (its `install_extras`), written twice into a
//! scratch root: the same files both times, completions that parse, pages
//! that `man` renders with the exit status; and usage errors exit 64.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Every file under `dir` with its content, sorted.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("under").to_path_buf();
                out.push((rel, std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn completions_man_pages_and_docs_install_the_same_twice() {
    let dest = tempfile::tempdir().expect("tempdir");
    install_extras(dest.path());
    let first = snapshot(dest.path());
    install_extras(dest.path());
    assert_eq!(first, snapshot(dest.path()), "a second run changes nothing");
    let has = |rel: &str| first.iter().any(|(p, _)| p == Path::new(rel));
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
