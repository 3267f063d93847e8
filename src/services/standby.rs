//! Standby browsers (`browser.standby = N`): up to N slots' Chromium
//! launched and calibrated before a call needs them, on the slots the
//! router picks next for browser work, so the first browser call of a
//! daemon is a warm one.
//!
//! The standby is refilled at start and after browser calls (a call that
//! used a standby browser leaves one fewer), never after an idle close: a
//! pool nobody uses lets its browsers go after `idle_close_secs` as
//! before. A launch waits while the host's available memory is under one
//! browser's cap (`max_rss_mb`, at least 512 MiB).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::upkeep::{interval, tick};
use crate::lease::Leases;

/// How often the standby looks for browser calls since its last fill.
const EVERY: Duration = Duration::from_secs(1);

/// Keep `want` standby browsers; ends at shutdown or once the pool is gone.
pub fn spawn(leases: &Arc<Leases>, stop: &CancellationToken, want: usize, cap_mb: u64) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if want == 0 {
        return;
    }
    let weak = Arc::downgrade(leases);
    let stop = stop.clone();
    rt.spawn(async move {
        let mut interval = interval(EVERY);
        let mut seen: Option<u64> = None;
        let mut short_of_memory = false;
        while let Some(leases) = tick(&mut interval, &stop, &weak).await {
            let uses = leases.identities().browser_uses();
            if seen == Some(uses) {
                continue;
            }
            seen = Some(uses);
            let short = !fill(&leases, want, cap_mb, &stop).await;
            if short && !short_of_memory {
                tracing::warn!(
                    "browser.standby: the host's available memory is under one browser's cap; no standby launch until it is back"
                );
            }
            if short {
                // Try again at the next tick, calls or not.
                seen = None;
            }
            short_of_memory = short;
        }
    });
}

/// Launch standby browsers until `want` of them wait; `false` when memory
/// stopped it.
async fn fill(leases: &Arc<Leases>, want: usize, cap_mb: u64, stop: &CancellationToken) -> bool {
    let mut ready = leases.identities().standby_ready();
    for id in leases.browser_order() {
        if ready >= want || stop.is_cancelled() {
            break;
        }
        let identities = leases.identities();
        if !leases.in_hand(id) || !identities.may_warm(id) {
            continue;
        }
        if !room_for_a_browser(cap_mb) {
            return false;
        }
        match identities.warm_browser(id).await {
            Ok(true) => {
                ready += 1;
                let pid = identities.browser(id).ok().and_then(|b| b.facts().pid);
                leases.events().emit(
                    "browser_standby",
                    Some(id),
                    None,
                    serde_json::json!({"pid": pid}),
                );
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(slot = id, error = %e, "browser.standby: launch failed"),
        }
    }
    true
}

/// Whether the host's available memory holds one more browser of `cap_mb`
/// (`browser.max_rss_mb`; at least 512 MiB); unknown memory holds it.
pub(crate) fn room_for_a_browser(cap_mb: u64) -> bool {
    available_mb().is_none_or(|mb| mb >= cap_mb.max(512))
}

/// The host's available memory (`MemAvailable`), MiB.
fn available_mb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}
