//! Recordings of browser work over HTTP (admin): `GET /api/v1/recordings`
//! lists them newest first, `GET /api/v1/recordings/{id}` is one (its
//! meta, the frames' times, the action log and the network summary), and
//! `GET /api/v1/recordings/{id}/frames/{n}` one frame as JPEG. The status
//! page's player reads these.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::control::{Control, error, gate, refuse};
use crate::config::Role;
use crate::error::ErrorKind;

pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/api/v1/recordings", get(list))
        .route("/api/v1/recordings/{id}", get(one))
        .route("/api/v1/recordings/{id}/frames/{n}", get(frame))
        .with_state(control)
}

/// Whether `who` may see recording `id` (its slot and site under the key's
/// grants); a recording that cannot be read is left to the reader's error.
fn seen_by(c: &Control, who: &crate::auth::Principal, id: &str) -> bool {
    let store = c.core.pool().leases().recordings();
    match store.meta(id) {
        Ok(m) => crate::mcp::grants::may_see(
            c.core.pool(),
            who,
            m.subject.slot,
            Some(&m.subject.strategy),
        ),
        Err(_) => true,
    }
}

fn not_yours(id: &str) -> Response {
    error(
        StatusCode::FORBIDDEN,
        format!("recording `{id}` is of an identity no grant of this key covers"),
    )
}

async fn list(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    let who = match gate(
        &c,
        &headers,
        &uri,
        false,
        "GET /api/v1/recordings",
        Role::Admin,
    ) {
        Ok(who) => who,
        Err(r) => return refuse(r),
    };
    let store = c.core.pool().leases().recordings().clone();
    let mut all = tokio::task::spawn_blocking(move || store.list())
        .await
        .unwrap_or_default();
    all.retain(|m| {
        crate::mcp::grants::may_see(
            c.core.pool(),
            &who,
            m.subject.slot,
            Some(&m.subject.strategy),
        )
    });
    let cfg = c.core.pool().leases().recordings().config().clone();
    axum::Json(json!({
        "recordings": all,
        "when": cfg.when,
        "limits": {"fps": cfg.fps, "max_recording_mb": cfg.max_recording_mb,
                   "max_total_mb": cfg.max_total_mb, "max_age_days": cfg.max_age_days},
    }))
    .into_response()
}

fn failed(e: &crate::Error) -> Response {
    let status = match e.kind() {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.message().to_string())
}

async fn one(
    State(c): State<Arc<Control>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let who = match gate(
        &c,
        &headers,
        &uri,
        false,
        "GET /api/v1/recordings/{id}",
        Role::Admin,
    ) {
        Ok(who) => who,
        Err(r) => return refuse(r),
    };
    if !seen_by(&c, &who, &id) {
        return not_yours(&id);
    }
    let store = c.core.pool().leases().recordings().clone();
    match tokio::task::spawn_blocking(move || store.get(&id)).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => failed(&e),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "recording reader failed"),
    }
}

async fn frame(
    State(c): State<Arc<Control>>,
    Path((id, n)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let who = match gate(
        &c,
        &headers,
        &uri,
        false,
        "GET /api/v1/recordings/{id}/frames/{n}",
        Role::Admin,
    ) {
        Ok(who) => who,
        Err(r) => return refuse(r),
    };
    if !seen_by(&c, &who, &id) {
        return not_yours(&id);
    }
    let Ok(n) = n.parse::<usize>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("frame `{n}` is not a number (frames count from 1)"),
        );
    };
    let store = c.core.pool().leases().recordings().clone();
    match tokio::task::spawn_blocking(move || store.frame(&id, n)).await {
        Ok(Ok(jpeg)) => (
            [
                (header::CONTENT_TYPE, "image/jpeg"),
                (header::CACHE_CONTROL, "private, max-age=3600"),
            ],
            jpeg,
        )
            .into_response(),
        Ok(Err(e)) => failed(&e),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "recording reader failed"),
    }
}
