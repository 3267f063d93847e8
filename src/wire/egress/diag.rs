//! One TCP socket looked up by its address pair through the kernel's socket
//! diagnostics (`NETLINK_SOCK_DIAG`, what `ss` uses): its owner uid and
//! inode, in microseconds. `/proc/net/tcp` gives the same but walks the
//! kernel's whole connection table, a few milliseconds per read.
//!
//! The netlink socket answers for the network namespace it was made in, so
//! each egress makes its own where its listener lives.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use parking_lot::Mutex;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
/// nlmsghdr (16) + inet_diag_req_v2 (56).
const REQUEST_LEN: usize = 72;
/// Offsets in inet_diag_msg, after its nlmsghdr.
const UID_AT: usize = 16 + 64;
const INODE_AT: usize = 16 + 68;

/// A `NETLINK_SOCK_DIAG` socket, one question at a time.
pub(super) struct Diag {
    fd: Mutex<(OwnedFd, u32)>,
}

impl std::fmt::Debug for Diag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Diag")
    }
}

impl Diag {
    /// A socket for the calling thread's network namespace.
    pub(super) fn open() -> io::Result<Diag> {
        // SAFETY: a plain socket call; the result is checked and owned.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a socket we just made and nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The kernel answers at once; a second bounds a surprise.
        let timeout = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: SO_RCVTIMEO with a timeval of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const timeout).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Diag {
            fd: Mutex::new((fd, 0)),
        })
    }

    /// The TCP socket whose local address is `from` and remote address
    /// `to`: `Ok(Some((uid, inode)))`, `Ok(None)` when there is none.
    pub(super) fn find(&self, from: SocketAddr, to: SocketAddr) -> io::Result<Option<(u32, u64)>> {
        let mut guard = self.fd.lock();
        guard.1 = guard.1.wrapping_add(1);
        let seq = guard.1;
        let req = request(from, to, seq);
        let fd = guard.0.as_raw_fd();
        // SAFETY: a zeroed sockaddr_nl addressed to the kernel (pid 0).
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sendto with a buffer and an address of the sizes given.
        let sent = unsafe {
            libc::sendto(
                fd,
                req.as_ptr().cast(),
                req.len(),
                0,
                (&raw const kernel).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 512];
        loop {
            // SAFETY: recv into a buffer of the size given.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
            match answer(&buf[..n], seq)? {
                Some(found) => return Ok(found),
                // An answer to an earlier question that timed out: skip it.
                None => continue,
            }
        }
    }
}

/// The request: nlmsghdr + inet_diag_req_v2 for one exact socket.
fn request(from: SocketAddr, to: SocketAddr, seq: u32) -> [u8; REQUEST_LEN] {
    let mut r = [0u8; REQUEST_LEN];
    r[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    r[8..12].copy_from_slice(&seq.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, ext, pad, states, then the id.
    let v4 = |a: SocketAddr| match a.ip() {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    };
    let family = if v4(from).is_some() && v4(to).is_some() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    r[16] = family as u8;
    r[17] = libc::IPPROTO_TCP as u8;
    r[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    // inet_diag_sockid: sport, dport (big-endian), src[16], dst[16], if, cookie[2].
    let id = 24;
    r[id..id + 2].copy_from_slice(&from.port().to_be_bytes());
    r[id + 2..id + 4].copy_from_slice(&to.port().to_be_bytes());
    let put = |r: &mut [u8; REQUEST_LEN], at: usize, a: SocketAddr| match (family, a.ip()) {
        (libc::AF_INET, _) => {
            if let Some(v4) = v4(a) {
                r[at..at + 4].copy_from_slice(&v4.octets());
            }
        }
        (_, IpAddr::V6(v6)) => r[at..at + 16].copy_from_slice(&v6.octets()),
        (_, IpAddr::V4(v4)) => r[at..at + 16].copy_from_slice(&v4.to_ipv6_mapped().octets()),
    };
    put(&mut r, id + 4, from);
    put(&mut r, id + 20, to);
    // No cookie: INET_DIAG_NOCOOKIE.
    r[id + 40..id + 48].copy_from_slice(&[0xff; 8]);
    r
}

/// One reply: `Some(Some(..))` the socket, `Some(None)` none such, `None`
/// a reply to another question.
fn answer(buf: &[u8], seq: u32) -> io::Result<Option<Option<(u32, u64)>>> {
    let short = || io::Error::new(io::ErrorKind::InvalidData, "short sock_diag reply");
    let u32_at = |at: usize| -> io::Result<u32> {
        let b = buf.get(at..at + 4).ok_or_else(short)?;
        Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let kind = buf.get(4..6).ok_or_else(short)?;
    let kind = u16::from_ne_bytes([kind[0], kind[1]]);
    if u32_at(8)? != seq {
        return Ok(None);
    }
    if kind == NLMSG_ERROR {
        // nlmsgerr: a negative errno (0 would be an acknowledgement).
        let errno = -(u32_at(16)? as i32);
        return match errno {
            libc::ENOENT => Ok(Some(None)),
            e => Err(io::Error::from_raw_os_error(e)),
        };
    }
    if kind != SOCK_DIAG_BY_FAMILY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected sock_diag reply type {kind}"),
        ));
    }
    let inode = u64::from(u32_at(INODE_AT)?);
    Ok(Some((inode != 0).then_some((u32_at(UID_AT)?, inode))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_found_by_its_exact_pair_only() {
        let diag = Diag::open().expect("sock_diag");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let to = listener.local_addr().expect("addr");
        let client = std::net::TcpStream::connect(to).expect("connect");
        let from = client.local_addr().expect("addr");
        let (_accepted, _) = listener.accept().expect("accept");
        let (uid, inode) = diag.find(from, to).expect("asked").expect("found");
        // SAFETY: geteuid cannot fail.
        assert_eq!(uid, unsafe { libc::geteuid() });
        let link =
            std::fs::read_link(format!("/proc/self/fd/{}", client.as_raw_fd())).expect("fd link");
        assert_eq!(link.to_string_lossy(), format!("socket:[{inode}]"));
        // The accepted side has the pair the other way round.
        let (_, other) = diag.find(to, from).expect("asked").expect("found");
        assert_ne!(other, inode);
        let elsewhere: SocketAddr = format!("127.0.0.9:{}", from.port()).parse().expect("addr");
        assert_eq!(diag.find(elsewhere, to).expect("asked"), None);
    }
}
