//! The testbed's control endpoint (`/__control/`): modes, stats, the
//! request log, reset, expiring the accounts' sessions.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};

use super::state::{Modes, Shared};

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/__control/state", get(control_state))
        .route("/__control/mode", post(control_mode))
        .route("/__control/stats", get(control_stats))
        .route("/__control/log", get(control_log))
        .route("/__control/reset", post(control_reset))
        .route("/__control/truth/{item}", get(control_truth))
        .route("/__control/arrivals", get(control_arrivals))
        .route(
            "/__control/expire-sessions",
            post(|State(s): State<Arc<Shared>>| async move {
                Json(json!({"expired": s.accounts.expire_all()}))
            }),
        )
}

async fn control_state(State(shared): State<Arc<Shared>>) -> Json<Modes> {
    Json(shared.modes.lock().clone())
}

/// `POST /__control/mode` with any of `gate`, `challenge`, `consistency`,
/// `rate_limit`, `site_limit`, `fault` (`null` switches the last three off).
/// Answers with the new modes.
async fn control_mode(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let patch: Value = match serde_json::from_slice(&body) {
        Ok(Value::Object(m)) => Value::Object(m),
        Ok(_) => return (StatusCode::BAD_REQUEST, "expected a JSON object").into_response(),
        Err(e) => return (StatusCode::BAD_REQUEST, format!("invalid JSON: {e}")).into_response(),
    };
    let mut modes = shared.modes.lock().clone();
    let mut current = match serde_json::to_value(&modes) {
        Ok(Value::Object(m)) => m,
        _ => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    if let Value::Object(p) = patch {
        for (k, v) in p {
            if !current.contains_key(&k) {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("unknown mode `{k}` (expected gate, challenge, consistency, layout_change, probe, robot_check, engines_blocked, rate_limit, site_limit, fault)"),
                )
                    .into_response();
            }
            current.insert(k, v);
        }
    }
    match serde_json::from_value::<Modes>(Value::Object(current)) {
        Ok(m) => modes = m,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("invalid mode: {e}")).into_response(),
    }
    *shared.modes.lock() = modes.clone();
    Json(modes).into_response()
}

async fn control_stats(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(serde_json::to_value(&*shared.stats.lock()).unwrap_or(Value::Null))
}

/// The per-request log, oldest first (the last 5000 shop requests).
async fn control_log(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(serde_json::to_value(&*shared.log.lock()).unwrap_or(Value::Null))
}

/// `GET /__control/truth/{item}`: what the shop holds for an item, as the
/// testshop strategy extracts it (the load script's ground truth).
async fn control_truth(axum::extract::Path(item): axum::extract::Path<String>) -> Response {
    use super::data;
    if !data::valid_item(&item) {
        return (StatusCode::BAD_REQUEST, "not an item id").into_response();
    }
    let reviews: Vec<Value> = (0..data::review_count(&item))
        .map(|i| {
            let r = data::review(&item, i);
            json!({"id": r.id, "author": r.author, "rating": r.rating, "title": r.title,
                   "body": r.body, "date": r.date, "verified": r.verified, "helpful": r.helpful})
        })
        .collect();
    Json(json!({"item": item, "title": data::product_name(&item), "reviews": reviews}))
        .into_response()
}

/// `GET /__control/arrivals?prefix=/p`: requests per second of the
/// testbed's life, for paths under `prefix` (default all).
async fn control_arrivals(
    State(shared): State<Arc<Shared>>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Json<Value> {
    let prefix = q.get("prefix").map_or("/", String::as_str);
    let per_sec = super::state::arrivals(&shared.log.lock(), prefix);
    Json(json!({
        "prefix": prefix,
        "max_per_second": per_sec.values().max().copied().unwrap_or(0),
        "per_second": per_sec.iter().map(|(s, n)| json!([s, n])).collect::<Vec<_>>(),
    }))
}

async fn control_reset(State(shared): State<Arc<Shared>>) -> Result<Json<Value>, Infallible> {
    shared.reset();
    Ok(Json(json!({"ok": true})))
}
