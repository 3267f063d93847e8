//! The REST face of the tools, for callers that do not speak MCP (curl,
//! n8n, scripts): `GET /api/v1/tools` lists the tools the key may call, with
//! their schemas; `POST /api/v1/tools/{name}` with the tool's JSON arguments
//! runs the same dispatcher as MCP (the same keys, roles, audit log and
//! limits) and answers its structured result: 200, or 400 for bad
//! arguments, 401 / 403 for the key, 502 (503 with `Retry-After` when every
//! identity rests) for a failed call, 404 for an unknown tool.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::control::{Control, act, error, gate, refuse};
use crate::auth::Role;

pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/api/v1/tools", get(list))
        .route("/api/v1/tools/{name}", post(call))
        .with_state(control)
}

async fn list(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    match gate(&c, &headers, &uri, false, "GET /api/v1/tools", Role::Viewer) {
        Ok(who) => {
            let tools = crate::mcp::catalog::tools_of(
                c.core.pool(),
                &who,
                c.core.settings().max_answer_chars,
            );
            axum::Json(json!({ "tools": tools })).into_response()
        }
        Err(r) => refuse(r),
    }
}

async fn call(
    State(c): State<Arc<Control>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response {
    if crate::tools::find(&name).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            format!("no tool `{name}` (GET /api/v1/tools lists them)"),
        );
    }
    let args: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the body must be a JSON object of the tool's arguments",
                );
            }
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not JSON: {e}"),
                );
            }
        }
    };
    act(&c, &headers, &uri, &name, args, Role::Viewer).await
}
