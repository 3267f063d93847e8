//! Where the slots' Chromium live: a network namespace of the daemon's with
//! only a loopback interface.
//!
//! One thread of the daemon moves into a new network namespace
//! (`unshare(CLONE_NEWNET)` acts on the calling thread alone), brings its `lo`
//! up, gives it a wired link that carries nothing (so that Chromium sees a
//! machine that is online), and runs a small tokio runtime there. Everything of the browsers that
//! touches that network runs on it: Chromium is spawned from it (a child
//! starts in its parent thread's namespace), the DevTools connection is made
//! from it, and each slot's egress listener is bound on it (a socket stays in
//! the namespace it was made in, whichever thread uses it later). The egress
//! connects out from the daemon's own namespace, so it is the browsers' only
//! way out, and no other process on the machine can reach their DevTools
//! ports.
//!
//! Making a network namespace needs `CAP_SYS_ADMIN` in the daemon's user
//! namespace. A daemon run as root (or given that capability) has it. A daemon
//! run as its own user gets it from a user namespace of its own: [`prepare`],
//! called while the process still has one thread (`unshare(CLONE_NEWUSER)`
//! refuses a threaded process), moves the whole process into a new user
//! namespace that maps its user and group to themselves, where it holds every
//! capability over the namespaces it makes and nothing more on the machine.
//! Files, ports and signals behave as before: the daemon is the same user.
//! Where the system forbids unprivileged user namespaces, or the daemon holds
//! capabilities a user namespace would take away (`CAP_NET_BIND_SERVICE` for a
//! low port, say), it stays where it is, [`Netns::create`] fails, and the pool
//! does not start, saying why, unless `browser.isolate = false` accepts the
//! browsers on the machine's network ([`shared_exposure`] says what that
//! exposes). [`probe`] tells beforehand whether a namespace can be made
//! (`idpool doctor`).

use std::future::Future;
use std::io;
use std::sync::OnceLock;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The browsers' namespace and the runtime thread inside it.
pub struct Netns {
    handle: Handle,
    stop: parking_lot::Mutex<Option<oneshot::Sender<()>>>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Netns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Netns")
    }
}

impl Netns {
    /// A new namespace with `lo` up, and its runtime thread. The error says
    /// why not, including what [`prepare`] found.
    pub fn create() -> Result<Netns, String> {
        Netns::start().map_err(|e| match PREPARED.get() {
            Some(Prepared::Declined(why)) => {
                format!("cannot make a network namespace ({e}; it needs CAP_SYS_ADMIN, or a user namespace of the daemon's, and {why})")
            }
            Some(Prepared::Entered) => {
                format!("cannot make a network namespace inside the daemon's user namespace ({e})")
            }
            _ => format!("cannot make a network namespace ({e}; it needs CAP_SYS_ADMIN)"),
        })
    }

    /// How the namespace was made: `"user namespace"` for a daemon run as its
    /// own user, `"privileged"` for one holding `CAP_SYS_ADMIN`.
    pub fn how() -> &'static str {
        match PREPARED.get() {
            Some(Prepared::Entered) => "user namespace",
            _ => "privileged",
        }
    }

    fn start() -> io::Result<Netns> {
        let (tx, rx) = std::sync::mpsc::channel::<io::Result<(Handle, oneshot::Sender<()>)>>();
        let thread = std::thread::Builder::new()
            .name("idpool-netns".into())
            .spawn(move || {
                let made = enter_new_namespace().and_then(|()| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                });
                let rt = match made {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let (stop_tx, stop_rx) = oneshot::channel::<()>();
                if tx.send(Ok((rt.handle().clone(), stop_tx))).is_err() {
                    return;
                }
                rt.block_on(async {
                    let _ = stop_rx.await;
                });
            })?;
        let (handle, stop) = rx
            .recv()
            .map_err(|_| io::Error::other("the namespace thread ended at once"))??;
        Ok(Netns {
            handle,
            stop: parking_lot::Mutex::new(Some(stop)),
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Stop the namespace's runtime and wait (at most `within`) for its
    /// thread to end, every task on it dropped: a Chromium still starting
    /// there is killed (`kill_on_drop`), not left behind when the daemon
    /// exits a moment later. Nothing runs in the namespace afterwards.
    pub async fn end(&self, within: std::time::Duration) {
        if let Some(stop) = self.stop.lock().take() {
            let _ = stop.send(());
        }
        let Some(thread) = self.thread.lock().take() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + within;
        while !thread.is_finished() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            tracing::warn!("the browsers' namespace thread did not end within {within:?}");
        }
    }

    /// Run `fut` inside the namespace (on its runtime thread).
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(fut)
    }

    /// Run `f` inside the namespace and wait for it (for short synchronous
    /// work such as binding a socket, from code that may not `.await`).
    pub fn run_sync<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .map_err(|_| io::Error::other("the browsers' namespace did not answer"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().take() {
            let _ = stop.send(());
        }
    }
}

/// What the browsers expose on the machine's shared loopback
/// (`browser.isolate = false`), CDP ports counted from `base_port`.
pub fn shared_exposure(base_port: u16) -> String {
    format!(
        "shared loopback: DevTools port {base_port}+n of each slot is reachable by every local \
         user (whoever connects drives that browser, its cookies and its way out); the egress \
         admits only the slot's browser (peer check)"
    )
}

/// What browsers in the namespace expose.
pub const ISOLATED_EXPOSURE: &str = "nothing on the machine's network: DevTools ports and \
     egresses live in the browsers' namespace; each egress admits only its slot's browser (peer check)";

/// Whether a daemon started now, as this user with these capabilities,
/// could make the browsers' namespace: `Ok("privileged" | "user
/// namespace")`, else why not. Tried for real in a short-lived child
/// process (a forked copy, so nothing of this process moves), the way
/// [`prepare`] and [`Netns::create`] would.
pub fn probe() -> Result<&'static str, String> {
    let caps = effective_capabilities();
    let privileged = caps & (1 << CAP_SYS_ADMIN) != 0;
    if !privileged && caps != 0 {
        return Err(format!(
            "the daemon would hold capabilities ({caps:#x}) that a user namespace takes away, \
             and not CAP_SYS_ADMIN"
        ));
    }
    // SAFETY: the child runs only async-signal-safe system calls (unshare,
    // socket, ioctl, close, _exit) on memory it owns, then exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see above; `_exit` skips every handler of the parent's.
        unsafe {
            if !privileged && libc::unshare(libc::CLONE_NEWUSER) != 0 {
                libc::_exit(10);
            }
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                libc::_exit(11);
            }
            libc::_exit(if loopback_up().is_ok() { 0 } else { 12 });
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child just forked.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    if waited != pid || !libc::WIFEXITED(status) {
        return Err("the probe process did not finish".into());
    }
    match libc::WEXITSTATUS(status) {
        0 if privileged => Ok("privileged"),
        0 => Ok("user namespace"),
        10 => Err(
            "unshare(CLONE_NEWUSER) is refused (unprivileged user namespaces disabled? see \
             user.max_user_namespaces, kernel.unprivileged_userns_clone)"
                .into(),
        ),
        11 if privileged => Err("unshare(CLONE_NEWNET) is refused despite CAP_SYS_ADMIN".into()),
        11 => Err("unshare(CLONE_NEWNET) is refused inside a user namespace".into()),
        _ => Err("the new namespace's loopback cannot be brought up".into()),
    }
}

/// What [`prepare`] did.
#[derive(Debug)]
enum Prepared {
    /// The process holds `CAP_SYS_ADMIN` where it is: nothing to do.
    Privileged,
    /// The process moved into a user namespace of its own.
    Entered,
    /// It could not, and why.
    Declined(String),
}

static PREPARED: OnceLock<Prepared> = OnceLock::new();

/// Give a daemon run as its own user the right to make the browsers' network
/// namespace: move the process into a new user namespace that maps its user
/// and group to themselves. Call it first thing in `main`, while the process
/// has one thread, and only for commands that may run browsers. Does nothing
/// for a process that already holds `CAP_SYS_ADMIN`; declines (and
/// [`Netns::create`] later says why) for one that holds other capabilities, since
/// a user namespace would take them away, or where the system forbids it.
pub fn prepare() {
    PREPARED.get_or_init(|| {
        let caps = effective_capabilities();
        if caps & (1 << CAP_SYS_ADMIN) != 0 {
            return Prepared::Privileged;
        }
        if caps != 0 {
            return Prepared::Declined(format!(
                "the daemon holds capabilities ({caps:#x}) that a user namespace would take away"
            ));
        }
        match enter_user_namespace() {
            Ok(()) => Prepared::Entered,
            Err(e) => Prepared::Declined(format!(
                "unshare(CLONE_NEWUSER): {e} (unprivileged user namespaces disabled? see user.max_user_namespaces)"
            )),
        }
    });
}

const CAP_SYS_ADMIN: u32 = 21;

/// The effective capability set, from `/proc/self/status` (`CapEff:`); 0 when
/// it cannot be read.
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// `unshare(CLONE_NEWUSER)` and map our user and group to themselves (the
/// only mapping an unprivileged process may write; `setgroups` must be denied
/// before the group map).
fn enter_user_namespace() -> io::Result<()> {
    // SAFETY: getuid/getgid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare with a plain flag; the caller guarantees one thread
    // (else the kernel refuses with EINVAL, which is reported).
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| io::Error::new(e.kind(), format!("/proc/self/{file}: {e}")))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1"))?;
    write("gid_map", format!("{gid} {gid} 1"))
}

/// Move the calling thread into a new network namespace, bring `lo` up and
/// give it a wired link ([`wired_link`]).
fn enter_new_namespace() -> io::Result<()> {
    // SAFETY: unshare with a plain flag; it affects only the calling thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    loopback_up()?;
    if let Err(e) = wired_link() {
        tracing::warn!(error = %e, "the browsers' namespace has no wired link: their pages will see navigator.onLine false and rtt 0");
    }
    Ok(())
}

fn loopback_up() -> io::Result<()> {
    set_up(b"lo", None)
}

/// The names of the namespace's wired link, a veth pair with both ends
/// inside: `eth0` is what Chromium sees.
const LINK: (&[u8], &[u8]) = (b"eth0", b"eth1");
/// `eth0`'s address: a loopback one, so that nothing is ever sent anywhere
/// through it (the browsers' one way out stays the egress on `lo`).
const LINK_ADDR: [u8; 4] = [127, 0, 0, 9];

/// A namespace with only `lo` looks offline to Chromium: no interface is up
/// with an address, so `navigator.onLine` is false and
/// `navigator.connection` says `rtt` 0, `downlink` 10, which no person's
/// browser shows. A veth pair whose ends are both in the namespace, up, with
/// a loopback address on one, is a wired link to Chromium's network-change
/// notifier: online, and the network quality estimator's usual values.
///
/// The link is made settled, before any browser starts: IPv6 is off for it
/// (the link-local addresses IPv6 would add a moment later are a network
/// change to Chromium, which aborts its requests with
/// `ERR_NETWORK_CHANGED`), and both ends have their carrier.
fn wired_link() -> io::Result<()> {
    // Interfaces made from now on in this namespace start without IPv6
    // (`lo` keeps its `::1`). A kernel without IPv6 has no such file.
    let _ = std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    add_veth(LINK.0, LINK.1)?;
    set_up(LINK.1, None)?;
    set_up(LINK.0, Some(LINK_ADDR))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while !(carrier(LINK.0)? && carrier(LINK.1)?) {
        if std::time::Instant::now() > deadline {
            return Err(io::Error::other("the veth pair has no carrier after 3 s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(())
}

/// Whether interface `name` is operational (`IFF_RUNNING`: its carrier is
/// up). Not from sysfs, which shows the namespace it was mounted in.
fn carrier(name: &[u8]) -> io::Result<bool> {
    flags(name).map(|f| f & libc::IFF_RUNNING != 0)
}

/// Interface `name`'s flags (SIOCGIFFLAGS).
fn flags(name: &[u8]) -> io::Result<libc::c_int> {
    with_ifreq(name, |fd, req| {
        // SAFETY: SIOCGIFFLAGS fills `req`'s flags.
        let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, req as *mut libc::ifreq) };
        // SAFETY: SIOCGIFFLAGS wrote the flags member.
        (rc == 0).then(|| libc::c_int::from(unsafe { req.ifr_ifru.ifru_flags }) & 0xffff)
    })
}

/// Bring interface `name` up; with `addr`, give it that address first
/// (a /32).
fn set_up(name: &[u8], addr: Option<[u8; 4]>) -> io::Result<()> {
    with_ifreq(name, |fd, req| {
        if let Some(ip) = addr {
            for (op, value) in [
                (libc::SIOCSIFADDR, u32::from_ne_bytes(ip)),
                (libc::SIOCSIFNETMASK, u32::MAX),
            ] {
                let mut a = *req;
                // SAFETY: the union's sockaddr member is written whole as a
                // sockaddr_in (which fits in it), as these two ioctls read it.
                unsafe {
                    let mut sin: libc::sockaddr_in = std::mem::zeroed();
                    sin.sin_family = libc::AF_INET as libc::sa_family_t;
                    sin.sin_addr.s_addr = value;
                    std::ptr::write(
                        std::ptr::addr_of_mut!(a.ifr_ifru).cast::<libc::sockaddr_in>(),
                        sin,
                    );
                    if libc::ioctl(fd, op, &a as *const libc::ifreq) != 0 {
                        return None;
                    }
                }
            }
        }
        // SAFETY: read the flags into `req`, add UP, write them back.
        unsafe {
            if libc::ioctl(fd, libc::SIOCGIFFLAGS, req as *mut libc::ifreq) != 0 {
                return None;
            }
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            (libc::ioctl(fd, libc::SIOCSIFFLAGS, req as *const libc::ifreq) == 0).then_some(())
        }
    })
}

/// `f` with a datagram socket and a zeroed ifreq naming `name`; `None` from
/// `f` is the OS error of its last call.
fn with_ifreq<T>(
    name: &[u8],
    f: impl FnOnce(libc::c_int, &mut libc::ifreq) -> Option<T>,
) -> io::Result<T> {
    // SAFETY: a plain datagram socket of our own, closed below; the ifreq is
    // zeroed (a valid value) and names `name`, cut to IFNAMSIZ - 1 bytes.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in name.iter().take(libc::IFNAMSIZ - 1).enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    let out = f(fd, &mut req);
    let err = io::Error::last_os_error();
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    out.ok_or(err)
}

/// An rtnetlink attribute: type, then its payload, padded to 4 bytes.
fn attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// An empty `struct ifinfomsg` (family, pad, type, index, flags, change).
const IFINFOMSG: [u8; 16] = [0; 16];

/// `ip link add A type veth peer name B`, over rtnetlink.
fn add_veth(a: &[u8], b: &[u8]) -> io::Result<()> {
    const IFLA_INFO_KIND: u16 = 1;
    const IFLA_INFO_DATA: u16 = 2;
    const VETH_INFO_PEER: u16 = 1;
    let name = |n: &[u8]| [n, b"\0"].concat();
    let mut peer = IFINFOMSG.to_vec();
    attr(&mut peer, libc::IFLA_IFNAME, &name(b));
    let mut data = Vec::new();
    attr(&mut data, VETH_INFO_PEER, &peer);
    let mut info = Vec::new();
    attr(&mut info, IFLA_INFO_KIND, b"veth");
    attr(&mut info, IFLA_INFO_DATA, &data);
    let mut body = IFINFOMSG.to_vec();
    attr(&mut body, libc::IFLA_IFNAME, &name(a));
    attr(&mut body, libc::IFLA_LINKINFO, &info);
    let flags = libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL;
    let mut msg = Vec::with_capacity(16 + body.len());
    msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&(flags as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
    msg.extend_from_slice(&body);
    let mut ack = [0u8; 512];
    // SAFETY: a netlink socket of our own, written one message and read one
    // acknowledgement into a buffer of ours, then closed.
    let got = unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let sent = libc::send(fd, msg.as_ptr().cast(), msg.len(), 0);
        let got = if sent == msg.len() as isize {
            libc::recv(fd, ack.as_mut_ptr().cast(), ack.len(), 0)
        } else {
            -1
        };
        let err = io::Error::last_os_error();
        libc::close(fd);
        if got < 0 {
            return Err(err);
        }
        got
    };
    // nlmsghdr (16 bytes), then for NLMSG_ERROR an i32: 0 or -errno.
    let kind = u16::from_ne_bytes([ack[4], ack[5]]);
    if got < 20 || kind != libc::NLMSG_ERROR as u16 {
        return Err(io::Error::other("rtnetlink answered no acknowledgement"));
    }
    match i32::from_ne_bytes([ack[16], ack[17], ack[18], ack[19]]) {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(-code)),
    }
}
