//! Each slot's Chromium trusts `security.extra_root_certs` through its own
//! NSS database (`$HOME/.pki/nssdb` under the slot's own HOME), so a server
//! that sends only its leaf certificate, as almost every server does, or a
//! TLS-inspecting proxy, is verified against them. The SPKI list
//! (`--ignore-certificate-errors-spki-list`) only matches certificates a
//! server sends, so it cannot do this; it stays for the calibration listener.
//! Nothing is ever trusted blanket.
//!
//! The database is written with `certutil` (Debian: `libnss3-tools`). Without
//! it the browser trusts only what the SPKI list matches, and the log says so.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

/// How long one `certutil` run may take.
const CERTUTIL_TIMEOUT: Duration = Duration::from_secs(20);

/// Rebuild `<home>/.pki/nssdb` to hold exactly `roots` (DER). Problems are
/// logged: the browser still launches, trusting what it trusted before.
pub async fn prepare(slot: usize, home: &Path, roots: &[Vec<u8>]) {
    if let Err(e) = rebuild(home, roots).await {
        tracing::warn!(
            slot,
            "the browser's trust store could not be written ({e}); servers that send only their leaf \
             certificate will not be trusted by slot {slot}'s browser"
        );
    }
}

async fn rebuild(home: &Path, roots: &[Vec<u8>]) -> Result<(), String> {
    let db = home.join(".pki").join("nssdb");
    if db.exists() {
        std::fs::remove_dir_all(&db).map_err(|e| format!("cannot clear {}: {e}", db.display()))?;
    }
    if roots.is_empty() {
        return Ok(());
    }
    crate::fsutil::create_private_dir(&db).map_err(|e| e.to_string())?;
    let dir = format!("sql:{}", db.display());
    certutil(&["-N", "--empty-password", "-d", &dir]).await?;
    for (i, der) in roots.iter().enumerate() {
        let file = db.join(format!("root-{i}.der"));
        std::fs::write(&file, der).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let name = format!("idpool extra root {i}");
        let path = file.to_string_lossy().to_string();
        let added = certutil(&["-A", "-n", &name, "-t", "C,,", "-i", &path, "-d", &dir]).await;
        let _ = std::fs::remove_file(&file);
        added?;
    }
    Ok(())
}

async fn certutil(args: &[&str]) -> Result<(), String> {
    let run = Command::new("certutil")
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CERTUTIL_TIMEOUT, run)
        .await
        .map_err(|_| {
            format!(
                "certutil did not finish within {}s",
                CERTUTIL_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "certutil not found (Debian: apt install libnss3-tools)".to_string()
            }
            _ => format!("cannot run certutil: {e}"),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "certutil {} failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
