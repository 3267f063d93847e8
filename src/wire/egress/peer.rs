//! Who may use a slot's egress: the processes of that slot's Chromium, and
//! nobody else on the machine.
//!
//! The egress holds the slot's upstream credentials, so an egress anyone on
//! the machine can connect to is an open proxy that spends them. Inside the
//! browsers' network namespace only browsers can reach it; on the shared
//! loopback (`browser.isolate = false`) every local user can. So every
//! connection is checked when it is accepted: the connecting socket is found
//! in `/proc/<browser>/net/tcp{,6}` by its exact (local, remote) address pair,
//! which gives its inode and owner uid, and the connection is admitted only
//! when a process of the browser's tree (the browser and its descendants)
//! holds that inode. Chromium's network service (a direct child of the
//! browser, or the browser itself) opens every connection: pages, workers,
//! service workers, WebSockets, prefetch alike, so the check covers every
//! kind of request without the browser presenting anything.
//!
//! Cost: one socket lookup through the kernel's socket diagnostics
//! (`diag`, `/proc/net/tcp` where that is unavailable) and a walk of one
//! process's descriptors (the network service, remembered after its first
//! connection); the whole tree is walked only when that misses.

use std::net::{IpAddr, SocketAddr};

use parking_lot::{Mutex, RwLock};

use super::diag::Diag;

/// A process, and when it started (`/proc/<pid>/stat` field 22), so a pid
/// the kernel reused is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: u32,
    start: u64,
}

/// Processes remembered as holders of admitted sockets.
const KEPT_OWNERS: usize = 4;

/// How far up a holder's parents are followed to find the browser.
const MAX_DEPTH: usize = 16;

/// The slot's browser, as its egress admits it.
#[derive(Debug, Default)]
pub struct Peers {
    browser: RwLock<Option<Proc>>,
    /// Processes of the tree that held admitted sockets, latest first.
    owners: Mutex<Vec<u32>>,
    /// Socket lookups in the listener's namespace (`None`: `/proc` only).
    diag: Option<Diag>,
}

impl Peers {
    /// Admission for an egress whose listener lives in `netns` (`None`: the
    /// daemon's own network).
    pub(super) fn new(netns: Option<&crate::wire::netns::Netns>) -> Peers {
        let opened = match netns {
            Some(ns) => ns.run_sync(Diag::open).and_then(|r| r),
            None => Diag::open(),
        };
        let diag = opened
            .map_err(|e| {
                tracing::warn!(error = %e, "egress: no socket diagnostics; the peer check reads /proc/net/tcp (slower)");
            })
            .ok();
        Peers {
            diag,
            ..Peers::default()
        }
    }

    /// The slot's Chromium started as `pid`: its tree alone is admitted from
    /// now on (the one before is not).
    pub fn admit_browser(&self, pid: u32) {
        let start = start_time(pid);
        *self.browser.write() = start.map(|start| Proc { pid, start });
        self.owners.lock().clear();
    }

    /// The slot's Chromium ended: nothing is admitted.
    pub fn forget_browser(&self, pid: u32) {
        let mut b = self.browser.write();
        if b.is_some_and(|p| p.pid == pid) {
            *b = None;
            self.owners.lock().clear();
        }
    }

    /// Whether the connection from `peer` to the egress at `local` comes
    /// from the browser's tree; `Err` says why not. Blocking (`/proc`).
    pub fn check(&self, peer: SocketAddr, local: SocketAddr) -> Result<(), String> {
        let Some(browser) = *self.browser.read() else {
            return Err("no browser of this slot is running".into());
        };
        if start_time(browser.pid) != Some(browser.start) {
            return Err("this slot's browser has ended".into());
        }
        let (uid, inode) = self
            .find_socket(browser.pid, peer, local)
            .ok_or_else(|| format!("connection from {peer} is not in the browser's network"))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let ours = unsafe { libc::geteuid() };
        if uid != ours {
            return Err(format!(
                "connection from {peer} belongs to uid {uid}, not the browser's"
            ));
        }
        let needle = format!("socket:[{inode}]");
        let remembered: Vec<u32> = self.owners.lock().clone();
        for &pid in &remembered {
            if descends_from(pid, browser.pid) && holds(pid, &needle) {
                return Ok(());
            }
        }
        for pid in tree(browser.pid) {
            if !remembered.contains(&pid) && holds(pid, &needle) {
                let mut owners = self.owners.lock();
                owners.retain(|p| *p != pid);
                owners.insert(0, pid);
                owners.truncate(KEPT_OWNERS);
                return Ok(());
            }
        }
        Err(format!(
            "connection from {peer} comes from a process outside this slot's browser"
        ))
    }
}

impl Peers {
    /// The connecting socket's (uid, inode): asked of the kernel, else read
    /// from `/proc/<browser>/net/tcp{,6}` (the browser's namespace).
    fn find_socket(&self, browser: u32, peer: SocketAddr, local: SocketAddr) -> Option<(u32, u64)> {
        if let Some(diag) = &self.diag {
            match diag.find(peer, local) {
                Ok(found) => return found,
                Err(e) => tracing::debug!(error = %e, "egress: sock_diag failed; reading /proc"),
            }
        }
        find_socket(browser, peer, local)
    }
}

/// Field `n` of `/proc/<pid>/stat` counted after the command name (0: the
/// state, 1: the parent, 19: the start time), with the state.
fn stat_field(pid: u32, n: usize) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let value = if n == 0 {
        0
    } else {
        fields.nth(n - 1)?.parse().ok()?
    };
    Some((state, value))
}

/// When `pid` started (clock ticks after boot); `None` if it is gone or a zombie.
fn start_time(pid: u32) -> Option<u64> {
    match stat_field(pid, 19)? {
        ('Z' | 'X', _) => None,
        (_, start) => Some(start),
    }
}

fn parent(pid: u32) -> Option<u32> {
    u32::try_from(stat_field(pid, 1)?.1).ok()
}

/// Whether `root` is `pid` or one of its ancestors.
fn descends_from(pid: u32, root: u32) -> bool {
    let mut cur = pid;
    for _ in 0..MAX_DEPTH {
        if cur == root {
            return true;
        }
        match parent(cur) {
            Some(p) if p > 1 => cur = p,
            _ => return false,
        }
    }
    false
}

/// `root` and its descendants, `root` first.
fn tree(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, parent(p)?)))
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let cur = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == cur).map(|(p, _)| *p));
        i += 1;
    }
    tree
}

/// Whether one of `pid`'s descriptors is `needle` (`socket:[inode]`). Each
/// link is read relative to the open folder: a path walk per descriptor
/// would cost several times more.
fn holds(pid: u32, needle: &str) -> bool {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let path = format!("/proc/{pid}/fd");
    let (Ok(dir), Ok(fds)) = (std::fs::File::open(&path), std::fs::read_dir(&path)) else {
        return false;
    };
    let mut link = [0u8; 64];
    fds.flatten().any(|fd| {
        let mut name = [0u8; 16];
        let bytes = fd.file_name();
        let bytes = bytes.as_bytes();
        if bytes.len() >= name.len() {
            return false;
        }
        name[..bytes.len()].copy_from_slice(bytes);
        // SAFETY: `name` is NUL-terminated, `link` is written up to its
        // length, and `dir` is an open folder.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr().cast(),
                link.as_mut_ptr().cast(),
                link.len(),
            )
        };
        usize::try_from(n).is_ok_and(|n| &link[..n] == needle.as_bytes())
    })
}

/// The socket whose local address is `peer` and remote address `local`, in
/// the network namespace of `pid`: its (uid, inode).
fn find_socket(pid: u32, peer: SocketAddr, local: SocketAddr) -> Option<(u32, u64)> {
    ["tcp", "tcp6"].into_iter().find_map(|table| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok()?;
        text.lines()
            .skip(1)
            .find_map(|line| socket_line(line, peer, local))
    })
}

/// One line of `/proc/net/tcp{,6}`: `sl local rem st tx:rx tr:when retr uid
/// timeout inode …`, addresses as `HEX:PORT`.
fn socket_line(line: &str, peer: SocketAddr, local: SocketAddr) -> Option<(u32, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let (from, to) = (parse_addr(f.get(1)?)?, parse_addr(f.get(2)?)?);
    if !same(from, peer) || !same(to, local) {
        return None;
    }
    let uid = f.get(7)?.parse().ok()?;
    let inode = f.get(9)?.parse().ok()?;
    // A socket that is gone but not yet freed has inode 0.
    (inode != 0).then_some((uid, inode))
}

/// Two addresses equal, an IPv4-mapped IPv6 address equal to its IPv4 one.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && plain(a.ip()) == plain(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits `:PORT` (IPv6): each 32-bit word
/// printed as the host-order integer it is in memory.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (hex, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<[u8; 4]> = hex
        .as_bytes()
        .chunks(8)
        .map(|w| {
            let w = std::str::from_utf8(w).ok()?;
            (w.len() == 8)
                .then(|| u32::from_str_radix(w, 16).ok())
                .flatten()
                .map(u32::to_ne_bytes)
        })
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [a] => IpAddr::from(*a),
        [a, b, c, d] => {
            let mut o = [0u8; 16];
            for (i, w) in [a, b, c, d].into_iter().enumerate() {
                o[i * 4..i * 4 + 4].copy_from_slice(w);
            }
            IpAddr::from(o)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_table_addresses_parse() {
        assert_eq!(
            parse_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().expect("addr"))
        );
        assert_eq!(
            parse_addr("0000000000000000FFFF00000100007F:0050"),
            Some("[::ffff:127.0.0.1]:80".parse().expect("addr"))
        );
        assert_eq!(
            parse_addr("00000000000000000000000001000000:0016"),
            Some("[::1]:22".parse().expect("addr"))
        );
        assert_eq!(parse_addr("0100007F"), None);
        assert_eq!(parse_addr("0100007:1F90"), None);
    }

    #[test]
    fn a_line_matches_its_exact_address_pair_only() {
        let line = "   3: 0500007F:A3F2 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 778899 1 0000000000000000 20 4 30 10 -1";
        let peer: SocketAddr = "127.0.0.5:41970".parse().expect("addr");
        let local: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
        assert_eq!(socket_line(line, peer, local), Some((1000, 778899)));
        // Same ports from another loopback address: another socket.
        let other: SocketAddr = "127.0.0.1:41970".parse().expect("addr");
        assert_eq!(socket_line(line, other, local), None);
        // The accepted side of the same connection (the daemon's) is not it.
        assert_eq!(socket_line(line, local, peer), None);
        let mapped: SocketAddr = "[::ffff:127.0.0.5]:41970".parse().expect("addr");
        assert_eq!(socket_line(line, mapped, local), Some((1000, 778899)));
    }

    /// A socket of this process's own tree is admitted; one held by a
    /// process outside it (a `sh` child of the test's *parent* would be the
    /// real case; here the tree's root is a child, so the test's own socket
    /// is outside it) is not.
    #[test]
    fn only_the_browsers_tree_is_admitted() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let local = listener.local_addr().expect("addr");
        let ours = std::net::TcpStream::connect(local).expect("connect");
        let (_accepted, peer) = listener.accept().expect("accept");
        let peers = Peers::default();
        assert!(peers.check(peer, local).is_err(), "nothing admitted yet");
        peers.admit_browser(std::process::id());
        assert_eq!(peers.check(peer, local), Ok(()));
        assert_eq!(peers.check(peer, local), Ok(()), "remembered holder");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        peers.admit_browser(child.id());
        let refused = peers.check(peer, local).expect_err("outside the tree");
        assert!(refused.contains("outside"), "{refused}");
        peers.forget_browser(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(peers.check(peer, local).is_err());
        drop(ours);
    }
}
