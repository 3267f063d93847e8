//! One process per data dir: an exclusive `flock` on `<data_dir>/.lock`, held
//! for as long as the pool lives (the kernel drops it when the process dies).
//! Without it a second process (`idpool call --embedded` next to a running
//! daemon) would take the daemon's Chromium for stale ones and end them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The held lock; released when the last pool of this process on that data
/// dir is gone.
#[derive(Debug, Clone)]
pub struct DataDirLock {
    _held: Arc<Held>,
}

#[derive(Debug)]
struct Held {
    _file: File,
}

/// Locks this process holds, by data dir: pools of one process on one data
/// dir share the lock (only another process is refused).
static HELD: Mutex<Vec<(PathBuf, Weak<Held>)>> = Mutex::new(Vec::new());

impl DataDirLock {
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| Error::io(format!("cannot create {}", data_dir.display()), e))?;
        let key = data_dir
            .canonicalize()
            .unwrap_or_else(|_| data_dir.to_path_buf());
        let mut held = HELD.lock();
        held.retain(|(_, w)| w.strong_count() > 0);
        if let Some(h) = held
            .iter()
            .find(|(p, _)| *p == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(DataDirLock { _held: h });
        }
        let h = Arc::new(Held {
            _file: Self::lock_file(data_dir, std::time::Duration::from_secs(2))?,
        });
        held.push((key, Arc::downgrade(&h)));
        Ok(DataDirLock { _held: h })
    }

    fn lock_file(data_dir: &Path, patience: std::time::Duration) -> Result<File> {
        let path = data_dir.join(".lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        // Our own pool that was just dropped may still be closing the file on
        // another thread: give our own pid a moment, anyone else none.
        let deadline = std::time::Instant::now() + patience;
        loop {
            // SAFETY: flock on a descriptor we own.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let mut holder = String::new();
            let _ = file.rewind();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim().to_string();
            let ours = holder == std::process::id().to_string();
            if ours && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
            return Err(Error::config(format!(
                "another idpool process{} is using the data dir {}; talk to it \
                 (`idpool call` / `idpool mcp` without --embedded) or stop it first",
                if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                },
                data_dir.display()
            )));
        }
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(file, "{}", std::process::id());
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        // Pools of this process share the lock...
        let second = DataDirLock::acquire(dir.path()).unwrap();
        // ...while another open of the file (as another process would) is refused.
        let e = DataDirLock::lock_file(dir.path(), std::time::Duration::ZERO).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(first);
        assert!(
            DataDirLock::lock_file(dir.path(), std::time::Duration::ZERO).is_err(),
            "still held by the second"
        );
        drop(second);
        assert!(DataDirLock::lock_file(dir.path(), std::time::Duration::ZERO).is_ok());
    }
}
