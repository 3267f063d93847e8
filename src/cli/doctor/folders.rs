//! The folders the daemon writes, as this user finds them: the data dir
//! (`pool.data_dir`) and the audit log's (`server.audit_log`). Systemd makes
//! both at the unit's start (`StateDirectory=`, `LogsDirectory=`); elsewhere
//! `scripts/install.sh` does, and the fixes say how by hand.

use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use idpool::config::Config;

use super::{Check, Status, bad, ok};

pub(super) fn data_dir(dir: &Path) -> Check {
    const NAME: &str = "data dir";
    match folder(
        NAME,
        dir,
        "point pool.data_dir at a folder",
        "cookies and sessions live there",
    ) {
        Ok(Some(mode)) => ok(
            NAME,
            format!("{} is writable (mode {mode:o})", dir.display()),
        ),
        Ok(None) => ok(
            NAME,
            format!("{} will be created at the first start", dir.display()),
        ),
        Err(c) => c,
    }
}

/// The audit log's folder is there (or can be made) and this user can
/// create the file in it or append to it. Never written here: a doctor run
/// as root would leave the daemon a log it cannot open.
pub(super) fn audit_log(cfg: &Config) -> Check {
    const NAME: &str = "audit log";
    let path = cfg.server.audit_path(&cfg.pool.data_dir);
    let dir = parent(&path);
    let mode = match folder(
        NAME,
        dir,
        "point server.audit_log at a file in a folder",
        "who called what is kept there",
    ) {
        Ok(mode) => mode,
        Err(c) => return c,
    };
    let folder = match mode {
        Some(mode) => format!("{} is writable, mode {mode:o}", dir.display()),
        None => format!("{} is made with it", dir.display()),
    };
    match OpenOptions::new().append(true).open(&path) {
        Ok(_) => ok(
            NAME,
            format!("{} can be appended to ({folder})", path.display()),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ok(
            NAME,
            format!(
                "{} will be created at the first start ({folder})",
                path.display()
            ),
        ),
        Err(e) => bad(
            Status::Fail,
            NAME,
            format!(
                "{} cannot be appended to by this user ({e})",
                path.display()
            ),
            format!(
                "give it to the daemon's user: `chown idpool: {0} && chmod 0600 {0}`",
                path.display()
            ),
        ),
    }
}

/// `dir` as the daemon will need it: `Ok(Some(mode))` a folder this user
/// can write, `Ok(None)` missing but its parent lets this user make it;
/// else the failed check `name` with its fix (`elsewhere` the fix when `dir`
/// is no folder, `holds` why everyone must not write in it).
fn folder(
    name: &'static str,
    dir: &Path,
    elsewhere: &str,
    holds: &str,
) -> Result<Option<u32>, Check> {
    let own = format!(
        "give the daemon's user the folder: `chown -R idpool: {0} && chmod 0750 {0}`",
        dir.display()
    );
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let up = parent(dir);
            return match probe_write(up) {
                Ok(()) => Ok(None),
                Err(e) => Err(bad(
                    Status::Fail,
                    name,
                    format!(
                        "{} is missing and {} is not writable ({e})",
                        dir.display(),
                        up.display()
                    ),
                    format!(
                        "make it for the daemon's user: `install -d -o idpool -g idpool -m 0750 {}`",
                        dir.display()
                    ),
                )),
            };
        }
        Err(e) => {
            return Err(bad(
                Status::Fail,
                name,
                format!("{}: {e}", dir.display()),
                own,
            ));
        }
    };
    if !meta.is_dir() {
        return Err(bad(
            Status::Fail,
            name,
            format!("{} is not a folder", dir.display()),
            elsewhere,
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o002 != 0 {
        return Err(bad(
            Status::Fail,
            name,
            format!(
                "{} is writable by everyone (mode {mode:o}): {holds}",
                dir.display()
            ),
            format!("chmod 0750 {}", dir.display()),
        ));
    }
    match probe_write(dir) {
        Ok(()) => Ok(Some(mode)),
        Err(e) => Err(bad(
            Status::Fail,
            name,
            format!("{} is not writable by this user ({e})", dir.display()),
            own,
        )),
    }
}

/// The folder `path` is in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Create and remove a file in `dir`.
fn probe_write(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".idpool-doctor-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}
