//! Accounts on the testbed shop: one test account, a sign-in form, a session
//! cookie, a nav line on every page saying who is signed in, items whose
//! reviews need a session (`ACCT…`), and session expiry on demand.
//!
//! - `GET /signin?return_to=/x`: the form (`#email`, `#password`,
//!   `#signin-submit`); `POST /signin` with the test credentials sets
//!   `tb_account` (HttpOnly) and goes back to `return_to`; wrong ones go back
//!   to the form with `?failed=1`.
//! - `GET /account`: the account page, or the form when signed out.
//! - Every HTML page of the shop gets `<div id="nav-account">` after
//!   `<body>`: `data-signed-in="true"` and "Hello, Tess" when signed in,
//!   a "Hello, sign in" link when not (Amazon's account line).
//! - `POST /__control/expire-sessions` (or [`super::Testbed::expire_sessions`])
//!   ends every session: the cookie stays, the shop no longer knows it.
//!
//! The pages and the middleware are in `signin.rs`.

use std::collections::HashSet;

use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Redirect, Response};
use parking_lot::Mutex;

/// The one test account.
pub const EMAIL: &str = "tess@shop.test";
pub const PASSWORD: &str = "open sesame 42";
pub const NAME: &str = "Tess";
/// The session cookie.
pub const COOKIE: &str = "tb_account";

/// Sessions the shop knows.
#[derive(Debug, Default)]
pub struct Accounts {
    sessions: Mutex<HashSet<String>>,
    signins: std::sync::atomic::AtomicU64,
}

impl Accounts {
    /// Whether the request carries a session the shop knows.
    pub fn signed_in(&self, headers: &HeaderMap) -> bool {
        let sessions = self.sessions.lock();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .any(|(k, v)| k == COOKIE && sessions.contains(v))
    }

    /// Forget every session; how many there were.
    pub fn expire_all(&self) -> usize {
        let mut s = self.sessions.lock();
        let n = s.len();
        s.clear();
        n
    }

    /// Successful sign-ins so far.
    pub fn signins(&self) -> u64 {
        self.signins.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn open(&self) -> String {
        let token = format!("{:032x}", rand::random::<u128>());
        self.sessions.lock().insert(token.clone());
        self.signins
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        token
    }
}

/// Whether an item's review pages need a signed-in visitor.
pub fn needs_account(item: &str) -> bool {
    item.starts_with("ACCT")
}

/// Where a signed-out visitor of `path` is sent.
pub fn wall(path: &str) -> Response {
    Redirect::to(&format!("/signin?return_to={path}")).into_response()
}
