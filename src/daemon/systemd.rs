//! The systemd notify protocol (sd_notify(3), `Type=notify-reload`), without a
//! library: datagrams to `$NOTIFY_SOCKET` (a path, or `@name` for an abstract
//! socket). `READY=1` with a `STATUS=` line once the listener is bound,
//! `WATCHDOG=1` at half of `$WATCHDOG_USEC`, `RELOADING=1` with
//! `MONOTONIC_USEC=` in the same datagram on SIGHUP (then `READY=1` again),
//! `STOPPING=1` on shutdown. Outside systemd (no `NOTIFY_SOCKET`) every call
//! is a no-op. Chromium does not inherit the socket (`browser/launcher.rs`).

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Where notifications go, if anywhere.
pub struct Notifier {
    target: Option<(UnixDatagram, String)>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`.
    pub fn from_env() -> Notifier {
        let target = std::env::var("NOTIFY_SOCKET")
            .ok()
            .filter(|s| !s.is_empty())
            .and_then(|path| match UnixDatagram::unbound() {
                Ok(sock) => Some((sock, path)),
                Err(e) => {
                    tracing::warn!("systemd notify: cannot create a socket: {e}");
                    None
                }
            });
        Notifier { target }
    }

    /// Send `state` (e.g. `READY=1`); failures are logged, never fatal.
    pub fn notify(&self, state: &str) {
        let Some((sock, path)) = &self.target else {
            return;
        };
        let sent = if let Some(name) = path.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                .and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
        } else {
            sock.send_to(state.as_bytes(), path)
        };
        if let Err(e) = sent {
            tracing::warn!("systemd notify {state:?} to {path}: {e}");
        }
    }
}

/// `RELOADING=1` as sd_notify(3) requires it: with `MONOTONIC_USEC`, the
/// CLOCK_MONOTONIC time the reload began, in the same datagram.
pub fn reloading(status: &str) -> String {
    format!(
        "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS={status}",
        monotonic_usec()
    )
}

/// CLOCK_MONOTONIC now, in microseconds.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs * 1_000_000 + nanos / 1_000
}

/// Half of `$WATCHDOG_USEC` when the watchdog is on for this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Some(pid) = std::env::var("WATCHDOG_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        && pid != std::process::id()
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_reach_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            target: Some((UnixDatagram::unbound().unwrap(), path.display().to_string())),
        };
        n.notify("READY=1");
        let mut buf = [0u8; 256];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
        let before = monotonic_usec();
        n.notify(&reloading("reloading"));
        let len = server.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..len]).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "RELOADING=1", "{text}");
        let usec: u64 = lines[1]
            .strip_prefix("MONOTONIC_USEC=")
            .unwrap()
            .parse()
            .unwrap();
        assert!(usec >= before && usec <= monotonic_usec(), "{text}");
        assert_eq!(lines[2], "STATUS=reloading");
    }
}
