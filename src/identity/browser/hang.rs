//! A dead or hung Chromium. Dead: gone since its last use, it is forgotten
//! and the next operation launches another. Hung (stopped, deadlocked,
//! swapped out): after an operation
//! timed out, a cheap CDP call tells a slow page from a browser that no
//! longer answers. A hung one is killed and reaped at once (a graceful close
//! would only wait on it), counted as a crash, and the next operation
//! launches a fresh one.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Running, SlotBrowser, process};

/// How long a live browser gets to answer `Browser.getVersion`.
const PROBE: Duration = Duration::from_secs(2);

impl SlotBrowser {
    /// Whether the browser still answers CDP.
    pub(super) async fn answers(running: &Running) -> bool {
        tokio::time::timeout(PROBE, running.browser.version())
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Forget a browser that died since its last use, perhaps a moment ago
    /// (the process is gone before its supervisor noticed); the supervisor
    /// reaps it.
    pub(super) async fn forget_dead(slot: &mut Option<Running>) {
        let dead = slot
            .as_ref()
            .is_some_and(|r| r.flags.dead.load(Ordering::Acquire) || !process::pid_alive(r.pid));
        if dead
            && let Some(mut r) = slot.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut r.supervisor)
                .await
                .is_err()
        {
            r.supervisor.abort();
        }
    }

    /// Kill and reap a browser that stopped answering; the next operation
    /// launches a new one.
    pub(super) async fn end_hung(&self, slot: &mut Option<Running>) {
        let Some(mut r) = slot.take() else {
            return;
        };
        self.kept_tabs.lock().clear();
        let why = format!(
            "Chromium (pid {}) stopped answering after an operation timed out: killed",
            r.pid
        );
        tracing::warn!(slot = self.spec.slot, "{why}");
        r.flags.closing.store(true, Ordering::Release);
        // SIGKILL ends a stopped process too; the supervisor reaps it. One it
        // reaped already is not signalled: its pid may be another's by now.
        if !r.flags.dead.load(Ordering::Acquire) {
            process::signal_group(r.pid, libc::SIGKILL);
        }
        if let Some(stop) = r.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(5), &mut r.supervisor)
            .await
            .is_err()
        {
            r.supervisor.abort();
        }
        // Dead already (killed from outside during the probe): its
        // supervisor counted it, and this does not again.
        r.flags.count_crash(&self.facts, &why);
        let mut f = self.facts.lock();
        f.running = false;
        f.pid = None;
    }
}
