//! The CDP ports check: each slot's port (`pool.base_port + n`) is free, or
//! held by that slot's own Chromium; otherwise who holds it, from
//! `/proc/net/tcp{,6}` and the processes' socket fds (as far as this user
//! may look).

use std::net::{Ipv4Addr, TcpListener};

use idpool::config::{Config, SlotPlan};

use super::{Check, Status, bad, ok};

pub(super) fn cdp(cfg: &Config, plan: &[SlotPlan]) -> Check {
    const NAME: &str = "cdp ports";
    let base = cfg.pool.base_port;
    let first = base;
    let last = plan
        .iter()
        .map(|s| base.saturating_add(s.id as u16))
        .max()
        .unwrap_or(base);
    let mut ours = 0;
    for slot in plan {
        let port = base.saturating_add(slot.id as u16);
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            continue;
        }
        let owner = owner_of(port);
        let data_dir = cfg
            .pool
            .data_dir
            .canonicalize()
            .unwrap_or(cfg.pool.data_dir.clone());
        let own_browser = owner.as_ref().is_some_and(|(_, cmd)| {
            cmd.contains("--remote-debugging-port")
                && cmd.contains(
                    &data_dir
                        .join("slots")
                        .join(slot.id.to_string())
                        .display()
                        .to_string(),
                )
        });
        if own_browser {
            ours += 1;
            continue;
        }
        let who = match owner {
            Some((pid, cmd)) => {
                let name = cmd.split([' ', '\0']).next().unwrap_or_default();
                format!("{name} (pid {pid})")
            }
            None => "a process this user cannot see".into(),
        };
        return bad(
            Status::Fail,
            NAME,
            format!(
                "port {port} (slot {}'s CDP port) is taken by {who}",
                slot.id
            ),
            format!(
                "stop that program, or move the pool to free ports with pool.base_port (now from {first})"
            ),
        );
    }
    let range = if first == last {
        format!("{first}")
    } else {
        format!("{first}-{last}")
    };
    let mut detail = format!("{range} free");
    if ours > 0 {
        detail = format!("{range} free or held by the pool's own Chromium ({ours})");
    }
    ok(NAME, detail)
}

/// The process listening on `port` on loopback or any address: its pid and
/// command line (NULs as spaces), when this user may see it.
fn owner_of(port: u16) -> Option<(u32, String)> {
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find_map(|table| listening_inode(&table, port))?;
    let needle = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == needle));
        if holds {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            return Some((pid, cmd.trim().to_string()));
        }
    }
    None
}

/// The inode of the socket listening (state 0A) on `port` in a
/// `/proc/net/tcp` table.
fn listening_inode(table: &str, port: u16) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let local = cols.get(1)?;
        let p = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
        (p == port && cols.get(3) == Some(&"0A")).then(|| cols.get(9)?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listening_socket_is_found_by_its_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:4B64 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 123456 1 0\n\
           1: 0100007F:4B65 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 654321 1 0\n";
        assert_eq!(super::listening_inode(table, 0x4B64), Some(123456));
        assert_eq!(super::listening_inode(table, 0x4B65), None, "not listening");
        assert_eq!(super::listening_inode(table, 1), None);
    }

    #[test]
    fn the_owner_of_our_own_listener_is_this_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let (pid, _) = super::owner_of(port).expect("found");
        assert_eq!(pid, std::process::id());
    }
}
