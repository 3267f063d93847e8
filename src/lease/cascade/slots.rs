//! The cascade's walk over slots, whatever it runs on each: slot after
//! slot within the retry budget (`cascade.retry_slots`) and the call's
//! request budget, with a full-jitter backoff between them; the first
//! round on the slot the call holds (or its MCP session's last), while
//! that slot is admitted. An operation's tiers (`mod.rs`) and a page's
//! escalation (`page.rs`) are its two kinds of work.

use std::sync::Arc;
use std::time::Duration;

use super::{Attempt, RunOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::{Call, Lease, Leases};
use crate::strategy::Outcome;

/// What one cascade does on one slot.
pub(super) trait Work {
    type Done;
    /// The strategy (or open-web host) the slots are leased for.
    fn name(&self) -> &str;
    fn opts(&self) -> &RunOptions;
    /// Only slots that may be signed in.
    fn needs_login(&self) -> bool;
    /// Only these slots, when set.
    fn only(&self) -> Option<&[usize]> {
        None
    }
    /// Requests sent so far, and the most the call may send.
    fn spent(&self) -> usize;
    fn budget(&self) -> usize;
    /// The work on the lease's slot: done, or what the slot came to (the
    /// lease finished with it) to move on to another slot.
    async fn on_slot(
        &self,
        lease: Lease,
        attempts: &mut Vec<Attempt>,
    ) -> Result<Result<Self::Done, Outcome>>;
    /// Every slot of the budget failed: the error that lists each attempt.
    fn exhausted(&self, tried: &[usize], attempts: &[Attempt]) -> Error;
}

/// Slot after slot within the retry budget and the request budget. A
/// slot the site refused or rate-limited is not asked again in this
/// call; one that failed on the network may be, when no other is left.
pub(super) async fn on_slots<W: Work>(
    work: &W,
    call: &mut Call,
    cfg: crate::config::CascadeConfig,
) -> Result<W::Done> {
    let leases = call.leases().clone();
    let name = work.name();
    let opts = work.opts();
    let slots = leases.slots().len();
    let mut attempts: Vec<Attempt> = Vec::new();
    let (mut tried, mut refused): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for round in 0..cfg.retry_slots.max(1) {
        let all_tried = (0..slots).all(|s| tried.contains(&s));
        let avoid = if all_tried { &refused } else { &tried };
        let left = match opts.slot {
            Some(p) => !refused.contains(&p),
            None => (0..slots).any(|s| !refused.contains(&s)),
        };
        if round > 0 {
            if !left {
                break;
            }
            backoff(cfg, round).await;
        }
        let held = call.held();
        let lease = match next_lease(work, &leases, held, round, avoid, &refused).await {
            Ok(lease) => lease,
            // What this call already tried is worth telling too.
            Err(e) if round > 0 && e.kind() == ErrorKind::Unavailable => break,
            Err(e) => return Err(e),
        };
        let slot = lease.slot();
        tried.push(slot);
        match work.on_slot(lease, &mut attempts).await? {
            Ok(done) => {
                if let Some(session) = &opts.session
                    && !opts.rotate
                {
                    leases.sites().remember(session, name, slot);
                }
                call.hold(slot);
                return Ok(done);
            }
            Err(Outcome::HardBlock | Outcome::RateLimited | Outcome::LoginRequired) => {
                refused.push(slot)
            }
            Err(_) => {}
        }
        if work.spent() >= work.budget() {
            break;
        }
    }
    let e = work.exhausted(&tried, &attempts);
    Err(match leases.sites().all_resting(name) {
        Some(after) => e
            .context(format!(
                "every identity for `{name}` is resting now, retry after {:.1} s",
                after.as_secs_f64()
            ))
            .with_retry_after(after),
        None => e,
    })
}

/// The first round stays on the slot the call holds (its earlier pages'),
/// or its MCP session's last call's, while that slot is admitted; a later
/// round, or a slot no longer admitted, goes round-robin.
async fn next_lease<W: Work>(
    work: &W,
    leases: &Arc<Leases>,
    held: Option<usize>,
    round: usize,
    avoid: &[usize],
    refused: &[usize],
) -> Result<Lease> {
    let name = work.name();
    let opts = work.opts();
    let only: Vec<usize>;
    let avoid = match work.only() {
        Some(ok) => {
            only = (0..leases.slots().len())
                .filter(|s| !ok.contains(s) || avoid.contains(s))
                .collect();
            &only[..]
        }
        None => avoid,
    };
    // Only slots that may be signed in, for an operation that needs it.
    let strict: Vec<usize>;
    let avoid = if work.needs_login() && opts.slot.is_none() {
        let ok = super::login::candidates(leases, name, avoid, refused);
        if ok.is_empty() {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "no signed-in slot is left",
            ));
        }
        strict = (0..leases.slots().len())
            .filter(|s| !ok.contains(s))
            .collect();
        &strict[..]
    } else {
        avoid
    };
    if opts.slot.is_none() && round == 0 && !opts.rotate {
        let sticky = held.or_else(|| {
            let session = opts.session.as_deref()?;
            leases.sites().remembered(session, name)
        });
        if let Some(s) = sticky.filter(|s| leases.sites().admits(*s, name) && !avoid.contains(s)) {
            match leases
                .next_slot_avoiding(name, Some(s), avoid, opts.scope.as_deref())
                .await
            {
                // Stopped admitting meanwhile, or not this caller's to use:
                // take another.
                Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::NotGranted) => {}
                other => return other,
            }
        }
    }
    leases
        .next_slot_avoiding(name, opts.slot, avoid, opts.scope.as_deref())
        .await
}

/// Full-jitter backoff before the `round`th slot.
async fn backoff(cfg: crate::config::CascadeConfig, round: usize) {
    let cap = cfg
        .backoff_max_ms
        .min(cfg.backoff_base_ms.saturating_mul(1 << round.min(16)));
    if cap > 0 {
        tokio::time::sleep(Duration::from_millis(rand::random_range(0..cap))).await;
    }
}
