//! Retirement: a burned identity gets a fresh one and keeps its slot number.
//!
//! [`Leases::retire`] closes the slot's browser, moves its jar, Chromium
//! profile and calibration to `<slot>/retired/<generation>/` (the newest
//! `pool.retire.retired_keep` generations are kept, older ones deleted),
//! gives it a new session (so a `{session}` proxy gives it a new IP),
//! closes its breakers, and says so: an event, a metric, and an audit line
//! (the tool's, or the daemon's for the policy's own retirements).
//!
//! The policy (`[pool.retire]`, all off by default) retires a slot after
//! `after_hard_blocks` hard blocks on one strategy, after `max_uses`
//! requests, or once it is `max_age_secs` old: Crawlee's `maxErrorScore`,
//! `maxUsageCount` and `maxAgeSecs`.

use std::path::Path;
use std::sync::atomic::Ordering;

use serde::Serialize;

use std::sync::Arc;

use super::Leases;
use crate::error::{Error, ErrorKind, Result};
use crate::identity::slot::Slot;

/// What a retirement did.
#[derive(Debug, Clone, Serialize)]
pub struct Retirement {
    pub slot: usize,
    /// `manual`, `hard_blocks`, `max_uses` or `max_age`.
    pub reason: String,
    pub old_generation: u64,
    pub generation: u64,
    /// The new session (the `{session}` of the slot's proxy).
    pub session: String,
    /// Where the old jar, Chromium profile and calibration went.
    pub retired_to: String,
}

impl Leases {
    /// Give slot `slot` a fresh identity now.
    pub async fn retire(self: &Arc<Self>, slot: usize, reason: &str) -> Result<Retirement> {
        let s = self.slots()[self.identities().check(slot)?].clone();
        if s.wear.retiring.swap(true, Ordering::AcqRel) {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("slot {slot} is being retired already"),
            )
            .retryable(true));
        }
        let old = s.identity();
        let renewed = s.renew().await;
        s.wear.retiring.store(false, Ordering::Release);
        let (new, aside) = renewed?;
        self.sites().reset_breakers(slot, None);
        self.sites().forget_logins(slot);
        prune(&s.dir.join("retired"), self.cfg.retire.retired_keep);
        let r = Retirement {
            slot,
            reason: reason.to_string(),
            old_generation: old.generation,
            generation: new.generation,
            session: new.session.clone(),
            retired_to: aside.display().to_string(),
        };
        tracing::info!(
            slot,
            reason,
            generation = new.generation,
            "slot retired: a fresh identity"
        );
        metrics::counter!("idpool_slot_retirements_total",
            "slot" => slot.to_string(), "reason" => reason.to_string())
        .increment(1);
        self.events.emit(
            "slot_retired",
            Some(slot),
            None,
            serde_json::json!({"reason": reason, "old_generation": old.generation,
                "generation": new.generation}),
        );
        Ok(r)
    }

    /// After a lease of `slot` finished: what the policy says. A retirement
    /// it calls for runs in the background.
    pub(super) fn after_use(self: &Arc<Self>, slot: &Slot, strategy: &str, hard_block: bool) {
        let cfg = self.cfg.retire;
        let reason = if hard_block
            && cfg.after_hard_blocks > 0
            && slot.wear.hard_block(strategy) >= cfg.after_hard_blocks
        {
            Some("hard_blocks")
        } else if cfg.max_uses > 0 && slot.wear.uses() >= cfg.max_uses {
            Some("max_uses")
        } else {
            None
        };
        if let Some(reason) = reason {
            self.retire_in_background(slot.id, reason);
        }
    }

    /// Retire slots older than `max_age_secs` (the pool's maintenance task).
    pub fn retire_aged(self: &Arc<Self>) {
        let max = self.cfg.retire.max_age_secs;
        if max == 0 {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        for s in self.slots() {
            if now.saturating_sub(s.identity().born) >= max {
                self.retire_in_background(s.id, "max_age");
            }
        }
    }

    fn retire_in_background(self: &Arc<Self>, slot: usize, reason: &'static str) {
        let Some(s) = self.slots().get(slot) else {
            return;
        };
        if s.wear.retiring.load(Ordering::Acquire) {
            return;
        }
        let leases = self.clone();
        tokio::spawn(async move {
            if let Err(e) = leases.retire(slot, reason).await
                && e.kind() != ErrorKind::Unavailable
            {
                tracing::warn!(slot, reason, error = %e, "automatic retirement failed");
            }
        });
    }
}

/// Keep the newest `keep` generations in `retired/`, delete the rest.
fn prune(dir: &Path, keep: usize) {
    let mut gens: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    gens.sort_unstable();
    let drop_n = gens.len().saturating_sub(keep);
    for g in &gens[..drop_n] {
        let p = dir.join(g.to_string());
        if let Err(e) = std::fs::remove_dir_all(&p) {
            tracing::warn!(dir = %p.display(), error = %e, "cannot delete a retired generation");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_keeps_the_newest() {
        let d = tempfile::tempdir().unwrap();
        for g in [0, 1, 2, 10] {
            std::fs::create_dir_all(d.path().join(g.to_string())).unwrap();
        }
        prune(d.path(), 2);
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["10", "2"]);
    }
}
