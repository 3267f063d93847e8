//! Build metadata: the commit the binary is built from (`idpool_build_info`,
//! `idpool --version`), from `git` when the source is a checkout, else
//! `$IDPOOL_COMMIT`, else "unknown" (a tarball or a Docker context without `.git`).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=IDPOOL_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = std::env::var("IDPOOL_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
                .filter(|c| !c.is_empty())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=IDPOOL_COMMIT={commit}");
}
