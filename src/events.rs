//! The slots' events for operators: breaker transitions, tier blocks, browser launch /
//! recycle / crash / close, cookie refreshes and reloads. Broadcast to live
//! subscribers (`/api/v1/events`, `idpool slots --watch`) and kept in a short
//! ring for the status page.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// How many recent events are kept.
pub const RECENT: usize = 200;

/// One event.
#[derive(Debug, Clone, Serialize)]
pub struct SlotEvent {
    /// RFC 3339 UTC.
    pub ts: String,
    /// `breaker`, `tier_blocked`, `browser_launch`, `browser_recycle`,
    /// `browser_crash`, `browser_restart_rss`, `browser_closed`,
    /// `cookie_refresh`, `breaker_reset`, `reload`, `budget`, `proxy_down`,
    /// `proxy_up`, `slot_retired`, `session_imported`, `session_exported`,
    /// `session_import_failed`.
    pub kind: String,
    pub slot: Option<usize>,
    pub strategy: Option<String>,
    /// Kind-specific facts, e.g. `{"from": "closed", "to": "open"}`.
    pub detail: Value,
}

/// The event hub of a pool.
pub struct Events {
    tx: broadcast::Sender<SlotEvent>,
    recent: Mutex<VecDeque<SlotEvent>>,
    /// Events emitted so far: what changed since a report was built.
    seq: AtomicU64,
}

impl Default for Events {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(1024);
        Events {
            tx,
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
            seq: AtomicU64::new(0),
        }
    }
}

impl Events {
    /// Record and broadcast an event. Viewers read events: every string in
    /// `detail` is redacted like an audit line (URLs' credentials, secret
    /// query values).
    pub fn emit(&self, kind: &str, slot: Option<usize>, strategy: Option<&str>, detail: Value) {
        let detail = crate::diag::redact_json(&detail);
        let ev = SlotEvent {
            ts: now_rfc3339(),
            kind: kind.to_string(),
            slot,
            strategy: strategy.map(str::to_string),
            detail,
        };
        tracing::info!(
            kind,
            slot,
            strategy,
            detail = %ev.detail,
            "slot event"
        );
        {
            let mut r = self.recent.lock();
            if r.len() == RECENT {
                r.pop_front();
            }
            r.push_back(ev.clone());
        }
        self.seq.fetch_add(1, Ordering::Release);
        // No subscriber is fine.
        let _ = self.tx.send(ev);
    }

    /// How many events were emitted so far: a report built at one count is
    /// out of date once it moves.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SlotEvent> {
        self.tx.subscribe()
    }

    /// Oldest first.
    pub fn recent(&self) -> Vec<SlotEvent> {
        self.recent.lock().iter().cloned().collect()
    }
}

/// Now as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| now.unix_timestamp().to_string())
}
