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
//! Making a network namespace needs `CAP_SYS_ADMIN` (a daemon run as root, or
//! with that capability). Without it [`Netns::create`] fails and the pool runs
//! its browsers in the daemon's namespace, saying so loudly.

use std::future::Future;
use std::io;

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
    /// A new namespace with `lo` up, and its runtime thread.
    pub fn create() -> io::Result<Netns> {
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
