//! The pool's background tasks: browser facts turned into events, proxy
//! probes and age retirement, idle browsers closed. Each holds only a weak
//! reference to the pool and ends at shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Inner, Pool};

impl Pool {
    /// Turn changes in the browsers' facts (launches, recycles, crashes, RSS
    /// restarts, closes) into events. Ends at shutdown, or once the pool is gone.
    pub(super) fn spawn_browser_watcher(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        rt.spawn(async move {
            let mut last: Vec<crate::identity::browser::BrowserFacts> = Vec::new();
            let mut interval = interval(Duration::from_millis(500));
            let (mut zombies, mut ticks) = (std::collections::HashSet::new(), 0u32);
            while let Some(inner) = tick(&mut interval, &stop, &weak).await {
                ticks = ticks.wrapping_add(1);
                if ticks % 10 == 0 {
                    // Every 5 s: orphans handed to us that no one reaps.
                    let mains: Vec<u32> = inner
                        .slots
                        .iter()
                        .filter_map(|s| s.browser_facts().pid)
                        .collect();
                    crate::identity::browser::process::sweep_zombies(&mut zombies, &mains);
                }
                let now: Vec<_> = inner.slots.iter().map(|s| s.browser_facts()).collect();
                for (i, (old, new)) in last.iter().zip(&now).enumerate() {
                    let detail = serde_json::json!({"pid": new.pid, "port": new.port});
                    let emit = |kind: &str, changed: bool| {
                        if changed {
                            inner.events.emit(kind, Some(i), None, detail.clone());
                        }
                    };
                    emit("browser_crash", new.crashes > old.crashes);
                    emit("browser_restart_rss", new.rss_restarts > old.rss_restarts);
                    emit("browser_launch", new.launches > old.launches);
                    emit("browser_recycle", new.recycles > old.recycles);
                    emit(
                        "browser_closed",
                        old.running && !new.running && new.crashes == old.crashes,
                    );
                }
                last = now;
            }
        });
    }

    /// Probe the proxies of `proxy_down` slots when due, turn changes of
    /// proxy health into events and the `idpool_slot_proxy_down` gauge, and
    /// retire identities past `pool.retire.max_age_secs`.
    pub(super) fn spawn_maintenance(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let proxied = self.inner.slots.iter().any(|s| s.egress().has_upstream());
        if !proxied && self.inner.retire.max_age_secs == 0 {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        rt.spawn(async move {
            let mut down: Vec<bool> = Vec::new();
            let mut interval = interval(Duration::from_millis(500));
            while let Some(inner) = tick(&mut interval, &stop, &weak).await {
                for slot in &inner.slots {
                    if slot.egress().health().probe_due() {
                        slot.egress().probe_upstream().await;
                    }
                }
                let now: Vec<bool> = inner.slots.iter().map(|s| s.proxy_down()).collect();
                for (i, is_down) in now.iter().enumerate() {
                    let was = down.get(i).copied().unwrap_or(false);
                    if *is_down != was {
                        let report = inner.slots[i].egress().health().report();
                        let kind = if *is_down { "proxy_down" } else { "proxy_up" };
                        tracing::warn!(slot = i, error = ?report.last_error, "{kind}");
                        inner.events.emit(
                            kind,
                            Some(i),
                            None,
                            serde_json::json!({"error": report.last_error, "failures": report.failures}),
                        );
                    }
                }
                down = now;
                Pool { inner }.retire_aged();
            }
        });
    }

    /// Close browsers nobody used for `idle`. Ends at shutdown, or once the
    /// pool is gone (the task holds only a weak reference).
    pub(super) fn spawn_idle_closer(&self, idle: Duration) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let every = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(30));
        let stop = self.inner.stop.clone();
        rt.spawn(async move {
            let mut interval = interval(every);
            while let Some(inner) = tick(&mut interval, &stop, &weak).await {
                for slot in &inner.slots {
                    slot.browser().close_if_idle(idle).await;
                }
            }
        });
    }
}

/// A pool task's clock: a late tick is delayed, not bunched.
pub(super) fn interval(period: Duration) -> tokio::time::Interval {
    let mut i = tokio::time::interval(period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// A pool task's next tick: the pool, or `None` once it shuts down or is
/// gone (the task holds only a weak reference).
pub(super) async fn tick(
    interval: &mut tokio::time::Interval,
    stop: &CancellationToken,
    pool: &std::sync::Weak<Inner>,
) -> Option<Arc<Inner>> {
    tokio::select! {
        _ = interval.tick() => pool.upgrade(),
        () = stop.cancelled() => None,
    }
}
