//! What the retirement policy counts of a slot's current identity: its
//! requests, its hard blocks per strategy, and whether a retirement runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// What the policy counts for the current identity.
#[derive(Debug, Default)]
pub(crate) struct Wear {
    uses: AtomicU64,
    hard_blocks: Mutex<HashMap<String, u32>>,
    /// A retirement is going (one at a time per slot).
    pub(crate) retiring: AtomicBool,
}

impl Wear {
    pub(crate) fn reset(&self) {
        self.uses.store(0, Ordering::Relaxed);
        self.hard_blocks.lock().clear();
    }

    /// One more request by this identity; the count so far.
    pub(crate) fn used(&self) -> u64 {
        self.uses.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn uses(&self) -> u64 {
        self.uses.load(Ordering::Relaxed)
    }

    /// One more hard block on `strategy`; the count so far.
    pub(crate) fn hard_block(&self, strategy: &str) -> u32 {
        let mut m = self.hard_blocks.lock();
        let n = m.entry(strategy.to_string()).or_insert(0);
        *n += 1;
        *n
    }
}
