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

use super::control::{Control, admit, error};
use crate::config::Role;
use crate::error::ErrorKind;

pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/api/v1/recordings", get(list))
        .route("/api/v1/recordings/{id}", get(one))
        .route("/api/v1/recordings/{id}/frames/{n}", get(frame))
        .with_state(control)
}

/// Whether `who` may see a recording of slot `slot` for `strategy` (the
/// key's grants; a key without them sees every one).
fn seen_by(c: &Control, who: &crate::auth::Principal, slot: usize, strategy: &str) -> bool {
    crate::mcp::grants::may_see(c.core.pool(), who, slot, Some(strategy))
}

fn not_yours(id: &str) -> Response {
    error(
        StatusCode::FORBIDDEN,
        format!("recording `{id}` is of an identity no grant of this key covers"),
    )
}

async fn list(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    let who = admit!(&c, &headers, &uri, "GET /api/v1/recordings", Role::Admin);
    let store = c.core.pool().leases().recordings().clone();
    let mut all = tokio::task::spawn_blocking(move || store.list())
        .await
        .unwrap_or_default();
    all.retain(|m| seen_by(&c, &who, m.subject.slot, &m.subject.strategy));
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
    let who = admit!(
        &c,
        &headers,
        &uri,
        "GET /api/v1/recordings/{id}",
        Role::Admin
    );
    let store = c.core.pool().leases().recordings().clone();
    let read = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || store.get(&id)).await
    };
    match read {
        Ok(Ok(v)) => {
            let slot = v["meta"]["slot"]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok());
            let strategy = v["meta"]["strategy"].as_str().unwrap_or_default();
            match slot {
                Some(slot) if seen_by(&c, &who, slot, strategy) => axum::Json(v).into_response(),
                _ => not_yours(&id),
            }
        }
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
    let who = admit!(
        &c,
        &headers,
        &uri,
        "GET /api/v1/recordings/{id}/frames/{n}",
        Role::Admin
    );
    let Ok(n) = n.parse::<usize>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("frame `{n}` is not a number (frames count from 1)"),
        );
    };
    let store = c.core.pool().leases().recordings().clone();
    // Whose the recording is, read only for a key with grants.
    let ask = !who.grants.is_empty();
    let read = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || {
            let of = if ask {
                Some(store.meta(&id)?.subject)
            } else {
                None
            };
            Ok::<_, crate::Error>((of, store.frame(&id, n)?))
        })
        .await
    };
    match read {
        Ok(Ok((Some(of), _))) if !seen_by(&c, &who, of.slot, &of.strategy) => not_yours(&id),
        Ok(Ok((_, jpeg))) => (
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
