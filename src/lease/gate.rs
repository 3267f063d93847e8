//! The checks a request of the lease passes before it leaves, in order:
//! written once here, run by every road ([`Lease::pass`](super::Lease));
//! reading `robots.txt` itself is guarded and paced only (`Lease::robots`).
//! A request's latency is counted from the moment they pass; a check that
//! refuses ends the request before it reaches the site. Each hop after the
//! first (a redirect, the page a step led to) is judged again by the lease
//! (the guard, the caller's grants, robots) and paced.

/// One check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// The SSRF guard on the URL and its resolved addresses.
    Guard,
    /// `robots.txt`, for hosts no strategy covers (`web.respect_robots`).
    Robots,
    /// The site's pacing and budget: waits for this request's turn.
    Pace,
}

/// An HTTP request (tier 1 or 2): the client runs the SSRF guard on every
/// address it connects to, so the lease adds robots and pacing.
pub(super) const HTTP: &[Check] = &[Check::Robots, Check::Pace];

/// A browser navigation (a call's page, a session's tab, a person's page):
/// the guard first (the egress checks every connection again), robots,
/// pacing.
pub(super) const BROWSER: &[Check] = &[Check::Guard, Check::Robots, Check::Pace];

/// A step on a page already open (a click, a submit): its turn; where it
/// leads is judged as a hop.
pub(super) const STEP: &[Check] = &[Check::Pace];
