//! Operations that need a signed-in identity (`requires_login`): routed
//! only to slots `logged_in` (or `unknown`, asked first when the strategy has
//! a `probe_url`) for the strategy; when none is, the call fails at once
//! naming the fix, or runs the operation's `fallback_operation`, labelled.

use std::sync::Arc;

use super::Attempt;
use crate::error::{Error, ErrorKind};
use crate::lease::{Lease, Leases};
use crate::request::FetchRequest;
use crate::strategy::operation::Operation;
use crate::strategy::{LoginState, Outcome, Strategy};

/// `None` when some slot (the pinned one, if any) may be signed in for the
/// strategy; else the error that says so and how to fix it.
pub(super) fn nobody_signed_in(
    leases: &Arc<Leases>,
    strategy: &dyn Strategy,
    op: &Operation,
    pin: Option<usize>,
) -> Option<Error> {
    let name = strategy.name();
    let eligible = leases.sites().may_be_signed_in(name);
    let ok = match pin {
        Some(p) => eligible.contains(&p),
        None => !eligible.is_empty(),
    };
    if ok {
        return None;
    }
    let states: Vec<String> = (0..leases.slots().len())
        .filter(|s| pin.is_none_or(|p| p == *s))
        .map(|s| format!("slot {s}: {}", leases.sites().login(s, name).state.as_str()))
        .collect();
    Some(
        Error::new(
            ErrorKind::Refused,
            format!(
                "`{}` of `{name}` needs a signed-in identity and no slot is signed in ({}); sign one in with `idpool login --slot N --strategy {name}` or import its session with `idpool session import --slot N FILE`",
                op.name,
                states.join(", ")
            ),
        )
        .retryable(false),
    )
}

/// Slots a `requires_login` call may take now: those that may be signed in,
/// not in `avoid`, else not in `refused`.
pub(super) fn candidates(
    leases: &Arc<Leases>,
    strategy: &str,
    avoid: &[usize],
    refused: &[usize],
) -> Vec<usize> {
    let eligible = leases.sites().may_be_signed_in(strategy);
    let fresh: Vec<usize> = eligible
        .iter()
        .copied()
        .filter(|s| !avoid.contains(s))
        .collect();
    if !fresh.is_empty() {
        return fresh;
    }
    eligible
        .into_iter()
        .filter(|s| !refused.contains(s))
        .collect()
}

/// A slot of `unknown` state asks the strategy's `probe_url` first: the
/// probe's attempt (tier 0), `login_required` when the answer shows it
/// signed out (the slot is done for this call); `None` when nothing was sent.
pub(super) async fn probe(lease: &Lease, op: &Operation) -> Option<Attempt> {
    if !op.requires_login || lease.login() != LoginState::Unknown {
        return None;
    }
    let url = lease.rules()?.login()?.probe_url.clone()?;
    let started = std::time::Instant::now();
    let seen = lease
        .http(FetchRequest::get(url.clone()), |f, _| {
            (f.response.status, f.login.clone())
        })
        .await;
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (outcome, status, error, why) = match seen {
        Ok((_, (status, Some((LoginState::LoggedOut, why))))) => {
            (Outcome::LoginRequired, Some(status), None, Some(why))
        }
        Ok((_, (status, login))) => (Outcome::Ok, Some(status), None, login.map(|(_, why)| why)),
        Err(e) => (Outcome::Failed, None, Some(e.to_string()), None),
    };
    Some(Attempt {
        slot: lease.slot(),
        tier: 0,
        outcome,
        status,
        ms,
        error,
        detail: Some(format!(
            "probe {url}{}",
            why.map(|w| format!(": {w}")).unwrap_or_default()
        )),
        refused: Vec::new(),
    })
}
