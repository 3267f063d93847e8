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

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use parking_lot::Mutex;
use serde::Deserialize;

use super::state::Shared;

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

    fn open(&self) -> String {
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

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/signin", get(form).post(sign_in))
        .route("/account", get(account))
}

#[derive(Deserialize)]
struct FormQuery {
    return_to: Option<String>,
    failed: Option<String>,
}

async fn form(Query(q): Query<FormQuery>) -> Html<String> {
    Html(super::html::account_form(
        q.return_to.as_deref().unwrap_or("/account"),
        q.failed.is_some(),
    ))
}

async fn sign_in(State(shared): State<Arc<Shared>>, body: axum::body::Bytes) -> Response {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    // Only a path on this site: no open redirect.
    let back = get("return_to")
        .filter(|r| r.starts_with('/') && !r.starts_with("//"))
        .unwrap_or("/account")
        .to_string();
    if get("email") != Some(EMAIL) || get("password") != Some(PASSWORD) {
        return Redirect::to(&format!("/signin?failed=1&return_to={back}")).into_response();
    }
    let token = shared.accounts.open();
    let mut resp = Redirect::to(&back).into_response();
    if let Ok(v) = format!("{COOKIE}={token}; Path=/; HttpOnly; Max-Age=86400").parse() {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

async fn account(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !shared.accounts.signed_in(&headers) {
        return wall("/account");
    }
    Html(super::html::account_page(NAME)).into_response()
}

/// Middleware: the account line after `<body>` of every HTML page.
pub async fn nav(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let signed_in = shared.accounts.signed_in(req.headers());
    let resp = next.run(req).await;
    let html = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if !html {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 16 << 20).await else {
        return super::html::error(500).into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    let line = if signed_in {
        format!("<div id=\"nav-account\" data-signed-in=\"true\">Hello, {NAME}</div>")
    } else {
        "<div id=\"nav-account\"><a href=\"/signin\">Hello, sign in</a></div>".to_string()
    };
    let out = text.replacen("<body>", &format!("<body>\n{line}"), 1);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(out))
}
