//! The slots' upkeep: browser facts turned into events, proxy probes and
//! age retirement, idle browsers closed. Each task holds only a weak
//! reference to the leases and ends at shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::lease::Leases;

/// Turn changes in the browsers' facts (launches, recycles, crashes, RSS
/// restarts, closes) into events. Ends at shutdown, or once the pool is gone.
pub fn spawn_browser_watcher(leases: &Arc<Leases>, stop: &CancellationToken) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(leases);
    let stop = stop.clone();
    rt.spawn(async move {
        let mut last: Vec<crate::identity::browser::BrowserFacts> = Vec::new();
        let mut interval = interval(Duration::from_millis(500));
        let (mut zombies, mut ticks) = (std::collections::HashSet::new(), 0u32);
        while let Some(leases) = tick(&mut interval, &stop, &weak).await {
            ticks = ticks.wrapping_add(1);
            let now = leases.identities().browser_facts();
            if ticks % 10 == 0 {
                // Every 5 s: orphans handed to us that no one reaps.
                let mains: Vec<u32> = now.iter().filter_map(|f| f.pid).collect();
                crate::identity::browser::process::sweep_zombies(&mut zombies, &mains);
            }
            for (i, (old, new)) in last.iter().zip(&now).enumerate() {
                let detail = serde_json::json!({"pid": new.pid, "port": new.port});
                let emit = |kind: &str, changed: bool| {
                    if changed {
                        leases.events().emit(kind, Some(i), None, detail.clone());
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
pub fn spawn_maintenance(leases: &Arc<Leases>, stop: &CancellationToken) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let proxied = leases.identities().proxied();
    if !proxied && leases.config().retire.max_age_secs == 0 {
        return;
    }
    let weak = Arc::downgrade(leases);
    let stop = stop.clone();
    rt.spawn(async move {
        let mut down: Vec<bool> = Vec::new();
        let mut interval = interval(Duration::from_millis(500));
        while let Some(leases) = tick(&mut interval, &stop, &weak).await {
            let states = leases.identities().probe_proxies().await;
            for (i, (is_down, error, failures)) in states.iter().enumerate() {
                let was = down.get(i).copied().unwrap_or(false);
                if *is_down != was {
                    let kind = if *is_down { "proxy_down" } else { "proxy_up" };
                    tracing::warn!(slot = i, error = ?error, "{kind}");
                    leases.events().emit(
                        kind,
                        Some(i),
                        None,
                        serde_json::json!({"error": error, "failures": failures}),
                    );
                }
            }
            down = states.iter().map(|(d, _, _)| *d).collect();
            leases.retire_aged();
        }
    });
}

/// Close browsers nobody used for `idle`. Ends at shutdown, or once the
/// pool is gone (the task holds only a weak reference).
pub fn spawn_idle_closer(leases: &Arc<Leases>, stop: &CancellationToken, idle: Duration) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(leases);
    let every = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(30));
    let stop = stop.clone();
    rt.spawn(async move {
        let mut interval = interval(every);
        while let Some(leases) = tick(&mut interval, &stop, &weak).await {
            leases.identities().close_idle_browsers(idle).await;
        }
    });
}

/// A background task's clock: a late tick is delayed, not bunched.
pub(crate) fn interval(period: Duration) -> tokio::time::Interval {
    let mut i = tokio::time::interval(period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// A background task's next tick: its owner, or `None` once it shuts down or is
/// gone (the task holds only a weak reference).
pub(crate) async fn tick<T>(
    interval: &mut tokio::time::Interval,
    stop: &CancellationToken,
    owner: &std::sync::Weak<T>,
) -> Option<Arc<T>> {
    tokio::select! {
        _ = interval.tick() => owner.upgrade(),
        () = stop.cancelled() => None,
    }
}
