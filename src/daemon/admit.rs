//! The key before the body: every request that carries a body to the
//! control API (`/api/v1/…`) is authenticated from its headers first, then
//! its body is read within `server.body_timeout_secs` and
//! `server.max_body_bytes`. A caller without a key, or one trickling a body
//! a byte at a time, holds a connection for a header timeout at most, never
//! for as long as it likes. Handlers still gate each action by role.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::control::{Control, error, gate, refuse};
use crate::auth::Role;

/// Whether `req` is one this layer admits (a body-carrying call to the
/// control API).
fn guarded(req: &Request) -> bool {
    !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        && req.uri().path().starts_with("/api/v1/")
}

pub async fn key_first(State(c): State<Arc<Control>>, req: Request, next: Next) -> Response {
    if !guarded(&req) {
        return next.run(req).await;
    }
    let path = req.uri().path().to_string();
    if path.starts_with("/api/v1/fleet/call/") {
        // Daemon to daemon: the cluster key, checked again by the handler.
        if let Err(r) = super::fleet::cluster_key(&c, req.headers()) {
            return refuse(r);
        }
    } else {
        // Audited under the action's own name where it has one, as the
        // handler would (`reset_slot`), else as the request.
        let action = (path.strip_prefix("/api/v1/slots/"))
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(_, action)| super::control::slot_tool(action))
            .map_or_else(|| format!("{} {path}", req.method()), str::to_string);
        if let Err(r) = gate(&c, req.headers(), req.uri(), false, &action, Role::Viewer) {
            return refuse(r);
        }
    }
    let s = c.core.settings();
    let (limit, deadline) = (
        s.max_body_bytes,
        Duration::from_secs(s.body_timeout_secs.max(1)),
    );
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            let too_big = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            return if too_big {
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body exceeds {limit} bytes (server.max_body_bytes)"),
                )
            } else {
                error(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                )
            };
        }
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s (server.body_timeout_secs)",
                    deadline.as_secs()
                ),
            );
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
