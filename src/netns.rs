//! Where the slots' Chromium live: a network namespace of the daemon's with
//! only a loopback interface.
//!
//! One thread of the daemon moves into a new network namespace
//! (`unshare(CLONE_NEWNET)` acts on the calling thread alone), brings its `lo`
//! up and runs a small tokio runtime there. Everything of the browsers that
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
        std::thread::Builder::new()
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
        })
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

/// Move the calling thread into a new network namespace and bring `lo` up.
fn enter_new_namespace() -> io::Result<()> {
    // SAFETY: unshare with a plain flag; it affects only the calling thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    loopback_up()
}

fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain datagram socket, used for two interface ioctls, then
    // closed; `req` is a zeroed ifreq naming "lo".
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut rc = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if rc == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            rc = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let err = io::Error::last_os_error();
        libc::close(fd);
        if rc != 0 {
            return Err(err);
        }
    }
    Ok(())
}
