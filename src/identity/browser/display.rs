//! A slot's virtual display (`browser.display = "xvfb"`): an Xvfb of its
//! own that its Chromium runs headful on.
//!
//! One display per slot, not per daemon: each slot's screen is its
//! profile's (Xvfb's screen is what `screen.width`/`height` report), one
//! slot cannot see or drive another's windows, and a display that dies
//! takes one browser with it. It starts right before its Chromium, inside
//! the same network namespace, and ends after it: the browser's supervisor
//! owns both, and an Xvfb that exits ends its Chromium (a crash).
//!
//! Xvfb picks a free display number itself (`-displayfd`), listens on no
//! TCP port, and admits only clients with the slot's cookie (`-auth`, an
//! `MIT-MAGIC-COOKIE-1` file of mode 0600 in `<slot>/xvfb/`; Chromium gets
//! its path in `XAUTHORITY`, never the cookie on a command line). That path
//! on its command line is how a later start finds an Xvfb left by a daemon
//! that was killed ([`end_stale`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::process::{all_pids, cmdline, kill_and_reap, pid_alive, reap, signal_group};
use crate::error::{Error, ErrorKind, Result};

/// Where Debian's `xvfb` package puts it; else `$PATH`.
const XVFB: &str = "/usr/bin/Xvfb";

/// A running virtual display.
#[derive(Debug)]
pub struct Xvfb {
    child: Child,
    pub pid: u32,
    /// `:N`.
    pub name: String,
    /// The cookie file clients need.
    pub auth: PathBuf,
}

/// `<slot dir>/xvfb`: its cookie file and pid file.
pub fn dir_of(user_data_dir: &Path) -> PathBuf {
    user_data_dir.parent().unwrap_or(user_data_dir).join("xvfb")
}

fn executable() -> Result<PathBuf> {
    if Path::new(XVFB).exists() {
        return Ok(XVFB.into());
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("Xvfb"))
        .find(|p| p.exists())
        .ok_or_else(|| {
            Error::config(
                "browser.display = \"xvfb\" needs Xvfb, which is not installed (Debian: apt install xvfb)",
            )
        })
}

/// An X authority file with one entry for every display (family
/// `FamilyWild`): `MIT-MAGIC-COOKIE-1` and 16 random bytes.
fn write_cookie(path: &Path) -> Result<()> {
    let name = b"MIT-MAGIC-COOKIE-1";
    let cookie: [u8; 16] = rand::random();
    let mut rec = Vec::with_capacity(64);
    rec.extend_from_slice(&0xffffu16.to_be_bytes());
    rec.extend_from_slice(&0u16.to_be_bytes()); // address
    rec.extend_from_slice(&0u16.to_be_bytes()); // display number: any
    rec.extend_from_slice(&(name.len() as u16).to_be_bytes());
    rec.extend_from_slice(name);
    rec.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
    rec.extend_from_slice(&cookie);
    crate::fsutil::write_atomically(path, &rec)
}

/// The arguments of the slot's Xvfb (no secret among them).
pub fn args(auth: &Path, screen: crate::identity::profile::Screen) -> Vec<String> {
    vec![
        "-displayfd".into(),
        "1".into(),
        "-auth".into(),
        auth.display().to_string(),
        "-screen".into(),
        "0".into(),
        format!("{}x{}x24", screen.width, screen.height),
        "-nolisten".into(),
        "tcp".into(),
        // Keep serving when the last client (Chromium) disconnects.
        "-noreset".into(),
    ]
}

/// Start the slot's display and wait (up to `timeout`) for its number.
pub async fn start(
    slot: usize,
    user_data_dir: &Path,
    screen: crate::identity::profile::Screen,
    timeout: Duration,
) -> Result<Xvfb> {
    let dir = dir_of(user_data_dir);
    crate::fsutil::create_private_dir(&dir)?;
    let auth = dir.join("auth");
    write_cookie(&auth)?;
    let exe = executable()?;
    let mut child = Command::new(&exe)
        .args(args(&auth, screen))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("slot {slot}: cannot start {}", exe.display()),
            )
            .with_source(e)
            .retryable(false)
        })?;
    let pid = child.id().unwrap_or(0);
    let _ = std::fs::write(dir.join("xvfb.pid"), format!("{pid}\n"));
    let mut out = child.stdout.take();
    let number = async {
        let out = out.as_mut()?;
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        // `-displayfd` writes the number and a newline once it serves.
        while buf.len() < 16 {
            match out.read(&mut byte).await {
                Ok(1) if byte[0] == b'\n' => break,
                Ok(1) => buf.push(byte[0]),
                _ => return None,
            }
        }
        std::str::from_utf8(&buf).ok()?.trim().parse::<u32>().ok()
    };
    match tokio::time::timeout(timeout, number).await {
        Ok(Some(n)) => Ok(Xvfb {
            child,
            pid,
            name: format!(":{n}"),
            auth,
        }),
        failed => {
            kill_and_reap(&mut child).await;
            let _ = std::fs::remove_file(dir.join("xvfb.pid"));
            Err(Error::new(
                if failed.is_err() {
                    ErrorKind::Timeout
                } else {
                    ErrorKind::Io
                },
                format!("slot {slot}: Xvfb did not report its display number"),
            ))
        }
    }
}

impl Xvfb {
    /// Wait for the display to exit (the supervisor's watch).
    pub async fn exited(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// End and reap it.
    pub async fn end(mut self) {
        kill_and_reap(&mut self.child).await;
        if let Some(dir) = self.auth.parent() {
            let pid_file = dir.join("xvfb.pid");
            if std::fs::read_to_string(&pid_file).is_ok_and(|p| p.trim() == self.pid.to_string()) {
                let _ = std::fs::remove_file(pid_file);
            }
        }
    }
}

/// End an Xvfb left by an earlier run of this slot (its command line names
/// the slot's cookie file); the pid ended, if any.
pub async fn end_stale(user_data_dir: &Path) -> Option<u32> {
    let auth = dir_of(user_data_dir).join("auth").display().to_string();
    let ours = |pid: u32| {
        cmdline(pid).is_some_and(|a| {
            a.first().is_some_and(|x| x.ends_with("Xvfb"))
                && a.windows(2).any(|w| w[0] == "-auth" && w[1] == auth)
        })
    };
    let stale: Vec<u32> = all_pids().into_iter().filter(|p| ours(*p)).collect();
    for &pid in &stale {
        tracing::warn!(pid, "ending an Xvfb left by an earlier run");
        // Started as its own process group's leader.
        signal_group(pid, libc::SIGKILL);
        for _ in 0..100 {
            if !pid_alive(pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        reap(&[pid]).await;
    }
    let _ = std::fs::remove_file(dir_of(user_data_dir).join("xvfb.pid"));
    stale.first().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_file_is_one_wild_entry_and_never_on_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("auth");
        write_cookie(&auth).unwrap();
        let bytes = std::fs::read(&auth).unwrap();
        assert_eq!(bytes.len(), 2 + 2 + 2 + 2 + 18 + 2 + 16);
        assert_eq!(&bytes[..2], &[0xff, 0xff]);
        assert_eq!(&bytes[8..26], b"MIT-MAGIC-COOKIE-1");
        let cookie = &bytes[28..];
        let a = args(&auth, crate::identity::profile::Screen::DESKTOP);
        assert!(a.contains(&"1920x1080x24".to_string()), "{a:?}");
        assert!(a.windows(2).any(|w| w == ["-nolisten", "tcp"]));
        let hex = hex::encode(cookie);
        assert!(!a.iter().any(|x| x.contains(&hex)));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&auth).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "private: {mode:o}");
    }
}
