//! Work on a page off the runtime threads: a few threads of our own with
//! big stacks, fed by a queue. A caller waits with a deadline; a job that
//! panics ends only itself.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Stack of each worker: recursion over a page capped at
/// [`super::MAX_DEPTH`] levels needs a fraction of it.
const STACK: usize = 64 << 20;

/// How long a caller waits for a job (the parse inside it stops at
/// [`super::PARSE_DEADLINE`]; conversion after it is bounded by the cap).
pub const WAIT: Duration = Duration::from_secs(30);

struct Workers {
    jobs: Mutex<Option<Sender<Job>>>,
}

static WORKERS: LazyLock<Workers> = LazyLock::new(|| {
    let (tx, rx) = channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8);
    let mut started = 0;
    for i in 0..n {
        let rx = rx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("idpool-page-{i}"))
            .stack_size(STACK)
            .spawn(move || work(&rx));
        match spawned {
            Ok(_) => started += 1,
            Err(e) => tracing::warn!("cannot start a page worker: {e}"),
        }
    }
    Workers {
        jobs: Mutex::new((started > 0).then_some(tx)),
    }
});

fn work(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A panicking job drops its answer's sender: its caller gets an
        // error, the worker goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        collect_if_due();
    }
}

/// Run `f` on a page worker and wait for it, at most [`WAIT`]. `what`
/// names the work in errors ("converting the page to markdown").
pub async fn run<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    let sent = match WORKERS.jobs.lock() {
        Ok(jobs) => jobs.as_ref().map(|j| j.send(job).is_ok()).unwrap_or(false),
        Err(_) => false,
    };
    if !sent {
        return Err(Error::new(
            ErrorKind::Internal,
            format!("{what}: no page worker is running"),
        ));
    }
    match tokio::time::timeout(WAIT, rx).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(Error::new(
            ErrorKind::Internal,
            format!("{what} failed (the page worker stopped)"),
        )),
        Err(_) => Err(Error::new(
            ErrorKind::Timeout,
            format!("{what} took longer than {} s", WAIT.as_secs()),
        )),
    }
}

/// A page from this size on leaves memory behind in the allocator's
/// thread caches (its text, its parse, its conversions: several times its
/// size), which it keeps until the thread that freed it asks it back.
pub const LARGE_BYTES: usize = 4 << 20;

/// How long after a large page the threads give freed memory back.
const COLLECT_FOR: Duration = Duration::from_secs(10);

/// At most this often per thread.
const COLLECT_EVERY: Duration = Duration::from_millis(500);

/// When the last large page was read (ms after [`EPOCH`], 0: never).
static LARGE_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static EPOCH: LazyLock<std::time::Instant> = LazyLock::new(std::time::Instant::now);
/// The allocator's "give back what you hold" (the binary's: mimalloc's
/// `mi_collect`); none in the library's own tests.
static COLLECTOR: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

thread_local! {
    /// When this thread last gave memory back (ms after [`EPOCH`], 0: never).
    static COLLECTED_AT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn ms_now() -> u64 {
    u64::try_from(EPOCH.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Set the allocator's collector (once, at start).
pub fn set_collector(collect: fn()) {
    let _ = COLLECTOR.set(collect);
}

/// A page of `bytes` was read: if it is large, every thread gives back
/// what it freed of it for a while ([`collect_if_due`]).
pub fn read_page(bytes: usize) {
    if bytes >= LARGE_BYTES {
        LARGE_AT.store(ms_now(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// On a thread with nothing to do (a runtime worker about to park, a page
/// worker between jobs): shortly after a large page, give back what this
/// thread freed. One atomic load when no large page came lately.
pub fn collect_if_due() {
    let large = LARGE_AT.load(std::sync::atomic::Ordering::Relaxed);
    if large == 0 {
        return;
    }
    let Some(collect) = COLLECTOR.get() else {
        return;
    };
    let now = ms_now();
    let for_ms = u64::try_from(COLLECT_FOR.as_millis()).unwrap_or(u64::MAX);
    let every_ms = u64::try_from(COLLECT_EVERY.as_millis()).unwrap_or(u64::MAX);
    if now.saturating_sub(large) > for_ms {
        return;
    }
    COLLECTED_AT.with(|at| {
        let last = at.get();
        if last == 0 || now.saturating_sub(last) >= every_ms {
            at.set(now);
            collect();
        }
    });
}

/// Bodies from this size on are read with [`heavy`]'s hand-off.
pub const HEAVY_BYTES: usize = 256 << 10;

/// Run `f`, which reads a body of `bytes`, in place; a big body on a
/// multi-threaded runtime first hands this worker's other tasks to another
/// thread (`block_in_place`), so they do not wait for the read.
pub fn heavy<T>(bytes: usize, f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if bytes >= HEAVY_BYTES && multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_job_runs_and_a_panic_ends_only_itself() {
        assert_eq!(run("adding", || 2 + 2).await.unwrap(), 4);
        let e = run("panicking", || -> u8 { panic!("boom") })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("panicking failed"), "{e}");
        assert_eq!(run("again", || 7).await.unwrap(), 7);
    }

    thread_local! {
        /// How often the collector ran on this thread.
        static COLLECTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    // Counted per thread: the tests of this process share the page workers
    // and the time of the last large page.
    #[test]
    fn a_large_page_has_each_thread_give_memory_back_once_and_not_often() {
        set_collector(|| COLLECTED.with(|c| c.set(c.get() + 1)));
        read_page(LARGE_BYTES);
        let on_a_thread = || {
            std::thread::spawn(|| {
                collect_if_due();
                collect_if_due();
                COLLECTED.with(std::cell::Cell::get)
            })
            .join()
            .unwrap()
        };
        assert_eq!(on_a_thread(), 1, "once, then not within COLLECT_EVERY");
        assert_eq!(on_a_thread(), 1, "every thread its own");
    }

    #[tokio::test]
    async fn deep_recursion_fits_a_worker_stack() {
        fn down(n: usize) -> usize {
            let pad = [0u8; 512];
            if n == 0 {
                pad[0] as usize
            } else {
                down(n - 1) + std::hint::black_box(pad)[1] as usize
            }
        }
        assert_eq!(run("recursing", || down(20_000)).await.unwrap(), 0);
    }
}
