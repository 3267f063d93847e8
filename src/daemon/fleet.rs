//! The fleet's daemon-to-daemon surface: `POST /api/v1/fleet/call/{tool}`
//! runs a call another daemon forwarded (cluster key required; the
//! caller's name, role and session come along; never forwarded again).
//!
//! The cluster key is not an admin key: it calls only what a fleet forwards
//! ([`FORWARDED_TOOLS`]), and whatever role the body claims, the call runs
//! as an operator at most (the key travels to other machines; a stolen one
//! must not export sessions or retire identities).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::control::{Control, Refusal, error, gate, refuse};
use crate::auth::{Principal, Role};
use crate::cluster::{FORWARDED_TOOLS, is_forwarded};
use crate::mcp::CallContext;
use crate::mcp::forward::{Forwarded, HOP_HEADER, KEY_HEADER, MAX_FORWARDED_ROLE};

pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/api/v1/fleet", get(view))
        .route("/api/v1/fleet/call/{tool}", post(call))
        .with_state(control)
}

/// `GET /api/v1/fleet` (viewer): this daemon's link to the fleet and the
/// fleet as Redis has it (every daemon, every identity with its owner and
/// breakers).
async fn view(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = gate(&c, &headers, &uri, false, "GET /api/v1/fleet", Role::Viewer) {
        return refuse(r);
    }
    let pool = c.core.pool();
    let Some(f) = pool.leases().fleet() else {
        return error(
            StatusCode::NOT_FOUND,
            "this daemon is not part of a fleet (no [cluster] redis_url)",
        );
    };
    let fleet = match pool.services().fleet.as_ref() {
        Some(sync) => match sync.view().await {
            Ok(v) => v,
            Err(e) => serde_json::json!({"error": e.to_string()}),
        },
        None => Value::Null,
    };
    axum::Json(serde_json::json!({"cluster": f.cluster().report(), "fleet": fleet})).into_response()
}

/// Equal in constant time (the key is a secret).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The cluster key of a forwarded call, from its headers alone (the
/// admission layer checks it before the body is read; the handler again).
pub(super) fn cluster_key(c: &Control, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(key) = c
        .core
        .pool()
        .leases()
        .fleet()
        .and_then(|f| f.cluster().key())
    else {
        return Err((
            StatusCode::NOT_FOUND,
            "this daemon takes no forwarded calls (no [cluster] key_file)".into(),
        ));
    };
    let presented = headers.get(KEY_HEADER).map(|v| v.as_bytes()).unwrap_or(b"");
    if !same(presented, key.as_bytes()) {
        c.core.audit_request(
            None,
            "fleet",
            "POST /api/v1/fleet/call",
            Some("bad cluster key"),
        );
        return Err((
            StatusCode::UNAUTHORIZED,
            "the cluster key is missing or wrong".into(),
        ));
    }
    Ok(())
}

async fn call(
    State(c): State<Arc<Control>>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = cluster_key(&c, &headers) {
        return refuse(r);
    }
    if !is_forwarded(&tool) {
        let tool = crate::diag::one_line(&tool, 64);
        let why = format!(
            "the cluster key may call only {} (not `{tool}`)",
            FORWARDED_TOOLS.join(", ")
        );
        c.core.audit_request(
            None,
            "fleet",
            &format!("POST /api/v1/fleet/call/{tool}"),
            Some(&format!("403: {why}")),
        );
        return error(StatusCode::FORBIDDEN, why);
    }
    let from = crate::diag::one_line(
        headers
            .get(HOP_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("unknown"),
        64,
    );
    let v: Forwarded = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the forwarded call is not readable: {e}"),
            );
        }
    };
    // Whatever the body says: the key is a fleet's, not an admin's.
    let claimed = v.role;
    let role = claimed.min(MAX_FORWARDED_ROLE);
    let name = crate::diag::one_line(&v.principal, 64);
    if role != claimed {
        tracing::info!(principal = %name, from = %from, claimed = %claimed, "a forwarded call claimed a role above operator: it runs as operator");
    }
    let ctx = CallContext {
        // The key's grants hold here as where the call came in.
        principal: Principal::new(name, role, "fleet").with_grants(v.grants),
        session: v.session,
        hop: Some(from),
    };
    let args = match v.args {
        a @ Value::Object(_) => a,
        _ => serde_json::json!({}),
    };
    let end = c
        .core
        .call_tool(&ctx, &tool, args, None, CancellationToken::new())
        .await;
    axum::Json(end.to_fleet()).into_response()
}
