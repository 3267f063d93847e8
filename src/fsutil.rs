//! Files the daemon owns: written atomically, in folders only its user reads.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// Write `bytes` to `path` so that readers see the old or the new file, never a mix.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("jar"),
        std::process::id()
    ));
    let io = |what: &str| {
        let what = format!("{what} {}", tmp.display());
        move |e| Error::io(what, e)
    };
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("cannot create"))?;
    let written = f
        .write_all(bytes)
        .map_err(io("cannot write"))
        .and_then(|()| f.sync_all().map_err(io("cannot fsync")));
    drop(f);
    let renamed = written.and_then(|()| {
        fs::rename(&tmp, path)
            .map_err(|e| Error::io(format!("cannot rename over {}", path.display()), e))
    });
    if let Err(e) = renamed {
        // A full disk must not keep the half-written copy: the old file stays.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable only once the folder entry is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Create `dir` and its parents, mode 0700 (slot folders, Chromium profiles).
pub fn create_private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))
}
