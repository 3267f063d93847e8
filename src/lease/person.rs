//! When a site wants a person: the lease layer's side of a hand-off. A
//! strategy with `[handoff]` that meets what it names (a captcha, a
//! sign-in wall) on a slot asks the pool's [`PersonDesk`] (the daemon's
//! live views, in `services/`) to have a person clear it on that slot's
//! browser, through the lease the call holds; the call then goes on on
//! that identity with the cookies the person earned, or fails
//! `needs_person` when nobody came in time.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::Result;
use crate::identity::browser::Turn;
use crate::strategy::Outcome;

/// What the person is asked to clear.
pub struct PersonAsk<'a> {
    /// The page that showed it (a person opens it in the slot's browser).
    pub url: url::Url,
    /// What the site showed (`hard_block` for a captcha, `login_required`).
    pub outcome: Outcome,
    /// Why the page read so (the marker that matched).
    pub why: String,
    /// How long the call waits.
    pub wait: Duration,
    /// Told what the call waits for (MCP progress).
    pub tell: &'a (dyn Fn(String) + Send + Sync),
}

/// Boxed, so the desk can live behind a trait object.
pub type Asked<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

/// Who finds a person for a slot (the live views).
pub trait PersonDesk: Send + Sync {
    /// Have a person clear `ask` on `lease`'s slot, through `lease`; `Ok`
    /// once the page reads clear (its cookies in the slot's jar), else the
    /// reason (`needs_person` with `retry_after` when nobody came in time).
    fn ask<'a>(&'a self, lease: &'a dyn HeldLease, ask: PersonAsk<'a>) -> Asked<'a>;
}

/// The page opened for a person: the browser's turn (held until dropped),
/// the tab showing it, and how the page read.
pub type Opened<'a> = (Turn<'a>, chromiumoxide::Page, Outcome);

/// What the desk may do with the lease a call holds (a
/// [`super::Lease`]): name its slot and strategy, and open a page for a
/// person in the slot's browser through it.
pub trait HeldLease: Send + Sync {
    fn slot(&self) -> usize;
    fn strategy(&self) -> &str;
    /// [`super::Lease::hold_browser`]: guarded, paced, counted and judged.
    fn open_for_person<'a>(
        &'a self,
        url: url::Url,
    ) -> Pin<Box<dyn Future<Output = Result<Opened<'a>>> + Send + 'a>>;
}
