//! The cascade: run one operation through tier 1 → 2 → 3 on a slot, remembering
//! which tiers a (slot, strategy) saw hard-blocked, moving to another slot within
//! the retry budget, and recording every attempt.
//!
//! - A challenge jumps straight to tier 3 on the same slot: tier 3 is for
//!   challenges, never for a block or a rate limit.
//! - A block of the identity (`[block]`) ends the slot at once, on every
//!   tier: one breaker failure. A rate limit ends it too: the slot rests.
//! - A block of one tier (`[tier_block]`, a tier's own `block`) moves on to
//!   the next HTTP tier; that tier is skipped on this (slot, strategy) for
//!   `tier_cooldown_secs`, then probed again. A block on every tier tried is
//!   one breaker failure.
//! - A half-open trial is one request on one tier, whatever it brings.
//! - After a slot, the call moves on to another one after a full-jitter
//!   backoff, within the retry budget and the call's request budget.
//! - Network errors, timeouts and 5xx move on to another slot, no breaker failure.
//! - A URL or redirect the SSRF guard refuses ends the run with the guard's
//!   error: no slot may go there (every tier, the browser's included, goes
//!   through [`Lease`], which checks).
//!
//! `tier.rs` runs one tier on one slot: its request, and the judgement of
//! its answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::lease::{Call, Lease};
use crate::strategy::operation::{Operation, Tier};
use crate::strategy::{Outcome, Strategy};

mod login;
mod mask;
mod page;
mod slots;
mod tier;
mod types;
pub use page::{PageMode, PagePlan, Paged, page};
use tier::{TierEnd, run_tier};
pub use types::{Attempt, CascadeResult, Fallback, Progress, Recorded, Recorder, RunOptions};
use types::{failed_on, skipped};

/// Run `op` of `strategy` with already bound `args`. An operation that
/// `requires_login` goes to slots that may be signed in; with none, one
/// signed-out identity asks its page once (what the page shows decides),
/// and a sign-in wall there fails naming the fix, or runs its
/// `fallback_operation` (the result says so).
///
/// The run holds `call`'s identity: it starts on the slot the call holds
/// (its earlier pages'), while that slot is admitted, and the call holds
/// the slot that served it afterwards.
pub async fn run(
    call: &mut Call,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
) -> Result<CascadeResult> {
    let r = run_unmasked(call, strategy, op, args, opts).await?;
    Ok(mask::apply(strategy.as_ref(), op, r, opts))
}

/// [`run`] before personal data is masked.
async fn run_unmasked(
    call: &mut Call,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
) -> Result<CascadeResult> {
    if !op.requires_login {
        return run_op(call, strategy, op, args, opts).await;
    }
    if let Some(why) = login::nobody_signed_in(call.leases(), strategy.as_ref(), op, opts.slot) {
        return signed_out(call, strategy, op, args, opts, why).await;
    }
    match run_op(call, strategy, op, args, opts).await {
        Err(e) => match login::nobody_signed_in(call.leases(), strategy.as_ref(), op, opts.slot) {
            // Every signed-in slot turned out signed out.
            Some(why) => signed_out(call, strategy, op, args, opts, why).await,
            None => Err(e),
        },
        ok => ok,
    }
}

/// Nobody may be signed in, but the page may still show what `op` asks
/// to a signed-out visitor (a marketplace that shows its reviews to all):
/// one signed-out identity asks it, one request, unless the page was the
/// sign-in wall for it lately ([`crate::lease::SIGNED_OUT_WALL_MEMORY`]).
/// What the page shows is the result; a wall runs the fallback, or fails
/// with `why`.
async fn signed_out(
    call: &mut Call,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
    why: Error,
) -> Result<CascadeResult> {
    let mut may = call
        .leases()
        .sites()
        .may_try_signed_out(strategy.name(), &op.name);
    if let Some(pin) = opts.slot {
        may.retain(|s| *s == pin);
    }
    if may.is_empty() {
        return fall_back(call, strategy, op, args, opts, why).await;
    }
    match run_op_on(call, strategy, op, args, opts, Some(may)).await {
        Err(e) if e.kind() == ErrorKind::NeedsPerson => Err(e),
        Err(e) => {
            opts.report(|| format!("{}: signed out: {}", op.name, e.message()));
            fall_back(call, strategy, op, args, opts, why).await
        }
        ok => ok,
    }
}

/// Run `op`'s fallback instead, labelled, or fail with `why`.
async fn fall_back(
    call: &mut crate::lease::Call,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
    why: Error,
) -> Result<CascadeResult> {
    let Some(name) = &op.fallback else {
        return Err(why);
    };
    let Some(fb) = strategy.operations().get(name) else {
        return Err(why);
    };
    let own: Map<String, Value> = args
        .iter()
        .filter(|(k, _)| fb.params.iter().any(|p| &p.name == *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let bound = fb.bind(own)?;
    opts.report(|| format!("{}: {}; running `{name}` instead", op.name, why.message()));
    let mut r = run_op(call, strategy, fb, &bound, opts).await?;
    r.fallback = Some(Fallback {
        operation: name.clone(),
        instead_of: op.name.clone(),
        reason: why.message().to_string(),
    });
    Ok(r)
}

/// [`run`] without the login checks.
async fn run_op(
    call: &mut Call,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
) -> Result<CascadeResult> {
    run_op_on(call, strategy, op, args, opts, None).await
}

/// [`run_op`]; with `signed_out`, only on those (signed-out) slots, one
/// request, whatever the operation's `requires_login`.
async fn run_op_on(
    call: &mut Call,
    strategy: &Arc<dyn Strategy>,
    op: &Operation,
    args: &Map<String, Value>,
    opts: &RunOptions,
    signed_out: Option<Vec<usize>>,
) -> Result<CascadeResult> {
    let cfg = call.leases().config().cascade;
    let mut vars = args.clone();
    vars.remove("base_url"); // the strategy's alone, never a caller's
    if let Some(b) = &strategy.base_url() {
        vars.insert("base_url".into(), Value::String(b.to_string()));
    }
    let tiers: Vec<&Tier> = op
        .tiers
        .iter()
        .filter(|t| {
            opts.only_tiers
                .as_ref()
                .is_none_or(|only| only.contains(&t.number))
        })
        .collect();
    if tiers.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("operation `{}` has none of the requested tiers", op.name),
        )
        .retryable(false));
    }
    let run = OpRun {
        strategy: strategy.as_ref(),
        op,
        vars,
        tiers,
        opts,
        budget: match signed_out {
            Some(_) => 1,
            None => cfg.max_requests_per_call.max(1),
        },
        spent: AtomicUsize::new(0),
        signed_out,
    };
    slots::on_slots(&run, call, cfg).await
}

/// One operation's cascade run: what stays the same from slot to slot.
struct OpRun<'a> {
    strategy: &'a dyn Strategy,
    op: &'a Operation,
    vars: Map<String, Value>,
    /// The tiers asked for, cheapest first.
    tiers: Vec<&'a Tier>,
    opts: &'a RunOptions,
    /// Requests the call may send to the site, and those sent so far.
    budget: usize,
    spent: AtomicUsize,
    /// A `requires_login` operation tried signed out, on these slots only.
    signed_out: Option<Vec<usize>>,
}

impl OpRun<'_> {
    fn spent(&self) -> usize {
        self.spent.load(Ordering::Relaxed)
    }

    /// Try the tiers on the lease's slot; the result, or what the slot came
    /// to (the lease finished with it) to move on to another slot.
    /// Probe the slot's login state when the operation needs it; whether
    /// the slot turned out signed out (the probe is a request of this call).
    async fn probe_login(&self, lease: &Lease, attempts: &mut Vec<Attempt>) -> bool {
        let Some(a) = login::probe(lease, self.op).await else {
            return false;
        };
        self.spent.fetch_add(1, Ordering::Relaxed);
        self.report(&a);
        let walled = a.outcome == Outcome::LoginRequired;
        attempts.push(a);
        walled
    }

    async fn on_slot(
        &self,
        lease: Lease,
        attempts: &mut Vec<Attempt>,
    ) -> Result<Result<CascadeResult, Outcome>> {
        // A person was asked on this slot already (once per slot).
        let mut asked = false;
        if self.probe_login(&lease, attempts).await {
            let walled = Outcome::LoginRequired;
            if !self.strategy.handoff().is_some_and(|h| h.wants(walled)) {
                lease.finish(walled);
                return Ok(Err(walled));
            }
            // `[handoff] on = ["login"]`: a person signs the slot in first.
            asked = true;
            let why = (attempts.last())
                .and_then(|a| a.detail.clone())
                .unwrap_or_else(|| "signed out".into());
            match self.ask_person(&lease, None, walled, why).await {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NeedsPerson => {
                    lease.finish(walled);
                    return Err(e);
                }
                // No person could be asked here: the slot is signed out.
                Err(_) => {
                    lease.finish(walled);
                    return Ok(Err(walled));
                }
            }
        }
        let plan = self.plan(&lease, attempts);
        let (mut tried_tiers, mut blocks) = (0usize, 0usize);
        let (mut browser_only, mut no_browser) = (false, false);
        // What the slot came to when it ends before its last tier.
        let mut ended: Option<Outcome> = None;
        'tiers: for tier in plan {
            if (browser_only && tier.number != 3) || (no_browser && tier.number == 3) {
                continue;
            }
            // A tier runs again once a person cleared what it met.
            let mut again = false;
            loop {
                if self.spent() >= self.budget {
                    ended = Some(Outcome::Failed); // the call is over: no breaker verdict
                    break 'tiers;
                }
                if !again {
                    tried_tiers += 1;
                }
                let started = Instant::now();
                let record = self.opts.record.as_ref();
                let ran = run_tier(&lease, self.strategy, self.op, tier, &self.vars, record).await;
                if ran.sent {
                    self.spent.fetch_add(1, Ordering::Relaxed);
                }
                let attempt = Attempt {
                    slot: lease.slot(),
                    tier: tier.number,
                    outcome: ran.outcome(),
                    status: ran.status,
                    ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    error: ran.error,
                    detail: ran.detail,
                    refused: ran.refused,
                };
                let outcome = attempt.outcome;
                self.report(&attempt);
                attempts.push(attempt);
                if ran.unextracted {
                    lease.observe_page(self.op, None);
                }
                let page = ran.page.clone();
                match ran.end {
                    TierEnd::HardBlock | TierEnd::LoginRequired
                        if !asked
                            && self.signed_out.is_none()
                            && self.strategy.handoff().is_some_and(|h| h.wants(outcome)) =>
                    {
                        asked = true;
                        let why = (attempts.last())
                            .and_then(|a| a.detail.clone().or(a.error.clone()))
                            .unwrap_or_else(|| outcome.as_str().to_string());
                        match self.ask_person(&lease, page, outcome, why).await {
                            // Cleared: the same tier again, with what the person earned.
                            Ok(()) => {
                                again = true;
                                continue;
                            }
                            // Nobody came in time: the call waited long enough.
                            Err(e) if e.kind() == ErrorKind::NeedsPerson => {
                                lease.finish(outcome);
                                return Err(e);
                            }
                            // No person could be asked here: a block as any other.
                            Err(_) => {
                                ended = Some(outcome);
                                break 'tiers;
                            }
                        }
                    }
                    TierEnd::Done(extracted, status, final_url) => {
                        // A genuinely empty page is a result too, and changes no breaker.
                        let warnings = lease.observe_page(self.op, Some(&extracted.items));
                        let (slot, trial) = (lease.slot(), lease.is_trial());
                        lease.finish(outcome);
                        return Ok(Ok(CascadeResult {
                            slot,
                            tier: tier.number,
                            trial,
                            attempts: std::mem::take(attempts),
                            requests: self.spent(),
                            extracted,
                            status,
                            final_url,
                            fallback: None,
                            masked: Vec::new(),
                            warnings,
                        }));
                    }
                    TierEnd::LoginRequired => {
                        if self.op.requires_login {
                            // Not sent here signed out again for a while.
                            lease.note_walled(&self.op.name);
                        }
                        ended = Some(outcome);
                        break 'tiers;
                    }
                    TierEnd::HardBlock | TierEnd::RateLimited => {
                        ended = Some(outcome);
                        break 'tiers;
                    }
                    TierEnd::TierBlock => {
                        blocks += 1;
                        no_browser = !browser_only;
                        let why = attempts.last().and_then(|a| a.detail.as_deref());
                        lease.mark_tier_blocked(tier.number, why);
                    }
                    // The challenge is what tier 3 is for, whatever came before.
                    TierEnd::Challenge => (browser_only, no_browser) = (true, false),
                    TierEnd::NextTier => {}
                    TierEnd::NextSlot => {
                        ended = Some(Outcome::Failed);
                        break 'tiers;
                    }
                    TierEnd::Refused(e) => {
                        lease.finish(Outcome::Failed);
                        return Err(e);
                    }
                }
                if lease.is_trial() && ran.sent {
                    ended = Some(outcome); // one request on one tier
                    break 'tiers;
                }
                break;
            }
        }
        let all_blocked = tried_tiers > 0 && blocks == tried_tiers;
        let verdict = match ended {
            Some(o) => o,
            None if all_blocked => Outcome::HardBlock,
            None => Outcome::Failed,
        };
        lease.finish(verdict);
        Ok(Err(verdict))
    }

    /// The tiers to try on this slot: those it was not hard-blocked on
    /// lately (recorded as skipped), or all of them when that leaves none;
    /// never its browser while a person signs the slot in there (the live
    /// view holds it).
    fn plan(&self, lease: &Lease, attempts: &mut Vec<Attempt>) -> Vec<&Tier> {
        let fresh: Vec<&Tier> = self
            .tiers
            .iter()
            .copied()
            .filter(|t| !lease.tier_blocked(t.number))
            .collect();
        let mut plan = if fresh.is_empty() {
            self.tiers.clone()
        } else {
            for t in self
                .tiers
                .iter()
                .filter(|t| !fresh.iter().any(|f| f.number == t.number))
            {
                attempts.push(skipped(
                    lease,
                    t.number,
                    "this tier was blocked lately on this slot",
                ));
            }
            fresh
        };
        if lease.signing_in() && plan.iter().any(|t| t.number == 3) {
            plan.retain(|t| t.number != 3);
            attempts.push(skipped(
                lease,
                3,
                "a person is signing this slot in (live view)",
            ));
        }
        plan
    }

    /// Ask the pool's desk for a person to clear what `outcome` met on
    /// the lease's slot (`[handoff]`); `Ok` once cleared (the page the
    /// person's browser loaded counts as one of the call's requests);
    /// `needs_person` when nobody came in time; another kind when no
    /// person could be asked (the attempt's progress line says why).
    async fn ask_person(
        &self,
        lease: &Lease,
        page: Option<url::Url>,
        outcome: Outcome,
        why: String,
    ) -> Result<()> {
        let wait = self.strategy.handoff().map(|h| h.wait).unwrap_or_default();
        // A sign-in wall is cleared where the strategy signs in.
        let page = match outcome {
            Outcome::LoginRequired => (self.strategy.login())
                .and_then(|l| l.login_url.clone())
                .or(page),
            _ => page,
        };
        let (Some(desk), Some(url)) = (lease.leases.person_desk(), page) else {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "no live view to ask a person in",
            ));
        };
        let tell = |m: String| self.opts.report(|| m);
        let ask = crate::lease::PersonAsk {
            url,
            outcome,
            why: why.clone(),
            wait,
            tell: &tell,
        };
        self.spent.fetch_add(1, Ordering::Relaxed);
        let asked = desk.ask(lease, ask).await;
        if let Err(e) = &asked
            && e.kind() != ErrorKind::NeedsPerson
        {
            self.opts.report(|| {
                format!(
                    "{} of {}: slot {}: no person asked: {}",
                    self.op.name,
                    self.strategy.name(),
                    lease.slot(),
                    e.message()
                )
            });
        }
        asked
    }

    /// One attempt as a progress line.
    fn report(&self, a: &Attempt) {
        self.opts.report(|| {
            format!(
                "{} of {}: slot {} tier {}: {}{}{}",
                self.op.name,
                self.strategy.name(),
                a.slot,
                a.tier,
                a.outcome.as_str(),
                a.status.map(|s| format!(" (HTTP {s})")).unwrap_or_default(),
                match (&a.error, &a.detail) {
                    (Some(why), _) | (None, Some(why)) => format!(": {why}"),
                    _ => String::new(),
                }
            )
        });
    }
}

/// Every slot of the budget failed: the error lists each attempt.
fn exhausted(call: &OpRun<'_>, tried: &[usize], attempts: &[Attempt]) -> Error {
    let what = format!("`{}` of `{}`", call.op.name, call.strategy.name());
    failed_on(&what, tried, attempts, call.spent(), call.budget)
}

impl slots::Work for OpRun<'_> {
    type Done = CascadeResult;

    fn name(&self) -> &str {
        self.strategy.name()
    }
    fn opts(&self) -> &RunOptions {
        self.opts
    }
    fn needs_login(&self) -> bool {
        self.op.requires_login && self.signed_out.is_none()
    }
    fn only(&self) -> Option<&[usize]> {
        self.signed_out.as_deref()
    }
    fn spent(&self) -> usize {
        OpRun::spent(self)
    }
    fn budget(&self) -> usize {
        self.budget
    }
    async fn on_slot(
        &self,
        lease: Lease,
        attempts: &mut Vec<Attempt>,
    ) -> Result<Result<CascadeResult, Outcome>> {
        OpRun::on_slot(self, lease, attempts).await
    }
    fn exhausted(&self, tried: &[usize], attempts: &[Attempt]) -> Error {
        exhausted(self, tried, attempts)
    }
}
