//! The accounts' pages (`/signin`, `/account`) and the account line every
//! shop page gets (see `accounts.rs`).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;

use super::accounts::{COOKIE, EMAIL, NAME, PASSWORD, wall};
use super::state::Shared;

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
