//! What the daemon's listener and MCP transports hold open, counted where it
//! happens and shown by `pool_status` and `/metrics`: connections against
//! their cap, and MCP sessions per transport against theirs.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde_json::{Value, json};

/// Counters the listener and the MCP transports keep.
#[derive(Debug, Default)]
pub struct Serving {
    connections: AtomicUsize,
    connection_cap: AtomicUsize,
    http_sessions: AtomicUsize,
    sse_sessions: AtomicUsize,
    session_cap: AtomicUsize,
    evicted: AtomicU64,
}

impl Serving {
    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn set_connection_cap(&self, cap: usize) {
        self.connection_cap.store(cap, Ordering::Relaxed);
    }

    pub fn set_sessions(&self, http: usize, sse: usize, cap: usize) {
        self.http_sessions.store(http, Ordering::Relaxed);
        self.sse_sessions.store(sse, Ordering::Relaxed);
        self.session_cap.store(cap, Ordering::Relaxed);
    }

    /// A session was ended to make room for a new one.
    pub fn session_evicted(&self) {
        self.evicted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connections(&self) -> (usize, usize) {
        (
            self.connections.load(Ordering::Relaxed),
            self.connection_cap.load(Ordering::Relaxed),
        )
    }

    /// Streamable HTTP and legacy SSE sessions open, and their total cap.
    pub fn sessions(&self) -> (usize, usize, usize) {
        (
            self.http_sessions.load(Ordering::Relaxed),
            self.sse_sessions.load(Ordering::Relaxed),
            self.session_cap.load(Ordering::Relaxed),
        )
    }

    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// As `pool_status` shows it.
    pub fn to_json(&self) -> Value {
        let (open, cap) = self.connections();
        let (http, sse, max) = self.sessions();
        json!({
            "connections": {"open": open, "max": cap},
            "sessions": {"http": http, "sse": sse, "max": max, "evicted": self.evicted()},
        })
    }
}
