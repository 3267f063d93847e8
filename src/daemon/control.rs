//! The operator's HTTP surface besides MCP: `/healthz`, `/readyz`, `/metrics`,
//! the control API under `/api/v1` (a viewer key reads, an admin key acts), the
//! live event stream (`/api/v1/events`, WebSocket) and the status page (`/`).
//! Keys and roles are the MCP ones; actions run through the dispatcher (the same
//! gate and the same audit log as MCP calls).

use std::sync::Arc;

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::auth::{Principal, Role, authorize};
use crate::mcp::gate::{check_host, check_origin, key_from};
use crate::mcp::http::McpHttp;
use crate::mcp::{CallContext, CallEnd, Core};
use crate::routing::BreakerState;

/// State behind the control routes.
pub struct Control {
    pub core: Arc<Core>,
    pub mcp: Arc<McpHttp>,
    /// Ends event streams at shutdown.
    pub stop: CancellationToken,
}

pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/slots", get(slots))
        .route("/api/v1/slots/{n}", get(slot))
        .route("/api/v1/slots/{n}/{action}", post(slot_action))
        .route("/api/v1/events", get(events))
        .route("/api/v1/events/recent", get(recent))
        .route("/api/v1/rates", get(rates))
        .route("/api/v1/whoami", get(whoami))
        .route("/api/v1/grants", get(grants))
        .with_state(control)
}

/// A failed tool call: 503 with `Retry-After` when every identity rests,
/// else 502; the body carries the same as MCP's structured content.
fn failed(f: &crate::mcp::Failure) -> Response {
    let mut body = f.to_json();
    body["error"] = json!(f.message);
    // Not the caller's to use: refused, whenever its own identity is back.
    let status = if f.kind == crate::error::ErrorKind::NotGranted {
        StatusCode::FORBIDDEN
    } else if f.retry_after.is_some() || f.kind == crate::error::ErrorKind::Busy {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::BAD_GATEWAY
    };
    let mut r = (status, axum::Json(body)).into_response();
    if let Some(secs) = f.retry_after
        && let Ok(v) = header::HeaderValue::from_str(&format!("{}", secs.ceil() as u64))
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let mut r = (status, axum::Json(json!({"error": message.into()}))).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"idpool\""),
        );
    }
    r
}

/// Why a request is refused: its status and message.
pub(super) type Refusal = (StatusCode, String);

pub(super) fn refuse((status, message): Refusal) -> Response {
    error(status, message)
}

/// [`gate`] in a handler: the caller it admits, or the handler answers
/// with the refusal.
/// Without `query_key`, the key is never read from the query.
macro_rules! admit {
    ($c:expr, $headers:expr, $uri:expr, $action:expr, $role:expr $(,)?) => {
        admit!($c, $headers, $uri, false, $action, $role)
    };
    ($c:expr, $headers:expr, $uri:expr, $query_key:expr, $action:expr, $role:expr $(,)?) => {
        match $crate::daemon::control::gate($c, $headers, $uri, $query_key, $action, $role) {
            Ok(who) => who,
            Err(r) => return $crate::daemon::control::refuse(r),
        }
    };
}
pub(super) use admit;

/// Host/Origin checks, the key, and the role gate for one action.
pub(super) fn gate(
    c: &Control,
    headers: &HeaderMap,
    uri: &Uri,
    query_key: bool,
    action: &str,
    needed: Role,
) -> Result<Principal, Refusal> {
    let s = c.core.settings();
    // Every refusal is written down (key guessing and role probing show).
    let refused = |who: Option<&Principal>, r: Refusal| {
        c.core.audit_request(
            who,
            "api",
            action,
            Some(&format!("{}: {}", r.0.as_u16(), r.1)),
        );
        r
    };
    check_host(headers, &s.allowed_hosts, s.listen)
        .map_err(|m| refused(None, (StatusCode::FORBIDDEN, m)))?;
    check_origin(headers, &s.allowed_origins, &s.allowed_hosts)
        .map_err(|m| refused(None, (StatusCode::FORBIDDEN, m)))?;
    let key = key_from(headers, uri, query_key);
    let who = c
        .core
        .authenticate(key.as_deref(), "api")
        .map_err(|m| refused(None, (StatusCode::UNAUTHORIZED, m)))?;
    authorize(&who, action, needed)
        .map_err(|d| refused(Some(&who), (StatusCode::FORBIDDEN, d.to_string())))?;
    // Reads of the API are written down too (tool calls are, by the
    // dispatcher); Prometheus's scrapes of /metrics are not.
    if action.starts_with("GET ") && action != "GET /metrics" {
        c.core.audit_request(Some(&who), "api", action, None);
    }
    Ok(who)
}

async fn status_page() -> Html<&'static str> {
    Html(include_str!("status.html"))
}

/// Ready while not shutting down and some slot admits traffic for some strategy.
async fn readyz(State(c): State<Arc<Control>>) -> Response {
    if c.core.is_draining() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down\n",
        )
            .into_response();
    }
    let pool = c.core.pool();
    let registry = pool.registry();
    let names: Vec<&str> = registry.iter().map(|s| s.name()).collect();
    let slots = pool.leases().identities().len();
    let serving = (0..slots)
        .filter(|id| pool.leases().in_hand(*id))
        .any(|id| {
            names.is_empty()
                || names
                    .iter()
                    .any(|n| pool.breaker(id, n).state != BreakerState::Open)
        });
    if slots == 0 || !serving {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no slot can serve (every breaker is open)\n",
        )
            .into_response();
    }
    match pool.leases().fleet().map(|f| f.cluster().report()) {
        Some(r) if r.state != "up" => (
            StatusCode::OK,
            format!(
                "ready (cluster: degraded for {} s: {}; serving this daemon's identities from local state)\n",
                r.for_secs,
                r.last_error.unwrap_or_default()
            ),
        )
            .into_response(),
        Some(r) => (StatusCode::OK, format!("ready (cluster: up, node {})\n", r.node)).into_response(),
        None => (StatusCode::OK, "ready\n").into_response(),
    }
}

async fn metrics(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = gate(&c, &headers, &uri, false, "GET /metrics", Role::Viewer) {
        return refuse(r);
    }
    let (http, sse) = c.mcp.session_counts().await;
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        super::metrics::render(&c.core, http, sse),
    )
        .into_response()
}

/// The pool's status as `who` may see it (`pool_status`'s snapshot, less
/// what slots no grant of the key covers did).
fn seen_status(c: &Control, who: &Principal) -> Arc<Value> {
    let all = c.core.pool().reports().status();
    if who.grants.is_empty() {
        return all;
    }
    let mut v = Value::clone(&all);
    crate::pool::Reports::hide_unseen(&mut v, |slot| {
        crate::mcp::grants::may_see(c.core.pool(), who, slot, None)
    });
    Arc::new(v)
}

async fn slots(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    let who = admit!(&c, &headers, &uri, "GET /api/v1/slots", Role::Viewer);
    axum::Json(&*seen_status(&c, &who)).into_response()
}

async fn slot(
    State(c): State<Arc<Control>>,
    Path(n): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let who = admit!(&c, &headers, &uri, "GET /api/v1/slots/{n}", Role::Viewer);
    let all = seen_status(&c, &who);
    let found = n.parse::<u64>().ok().and_then(|n| {
        all["slots"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["slot"] == n).cloned())
    });
    match found {
        Some(s) => axum::Json(s).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no slot `{n}`")),
    }
}

/// Run a tool through the dispatcher (gate + audit) and answer; the key
/// needs at least `needed` to be let in (the tool's own role is the
/// dispatcher's to check, and a refusal is audited there).
pub(super) async fn act(
    c: &Control,
    headers: &HeaderMap,
    uri: &Uri,
    tool: &str,
    args: Value,
    needed: Role,
) -> Response {
    let who = admit!(c, headers, uri, false, tool, needed);
    let ctx = CallContext {
        principal: who,
        session: None,
        hop: None,
    };
    match c
        .core
        .call_tool(&ctx, tool, args, None, CancellationToken::new())
        .await
    {
        CallEnd::Ok(o) => axum::Json(o.body).into_response(),
        CallEnd::InvalidParams(m) => error(StatusCode::BAD_REQUEST, m),
        CallEnd::Invalid(f) => error(StatusCode::BAD_REQUEST, f.message),
        CallEnd::Denied(d) => error(StatusCode::FORBIDDEN, d.to_string()),
        CallEnd::Failed(f) => failed(&f),
        CallEnd::Cancelled => error(StatusCode::SERVICE_UNAVAILABLE, "cancelled"),
    }
}

fn slot_args(n: &str, body: &[u8]) -> Result<Value, Refusal> {
    let slot: u64 = n
        .parse()
        .map_err(|_| (StatusCode::NOT_FOUND, format!("no slot `{n}`")))?;
    let mut args = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| {
            (
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
        })?
    };
    let Some(obj) = args.as_object_mut() else {
        return Err((
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object".into(),
        ));
    };
    obj.insert("slot".into(), json!(slot));
    Ok(args)
}

/// The tool a slot action of the control API calls (`reset` → `reset_slot`).
pub(super) fn slot_tool(action: &str) -> Option<&'static str> {
    Some(match action {
        "refresh-cookies" => "refresh_cookies",
        "reset" => "reset_slot",
        "calibrate" => "calibrate",
        "retire" => "retire_slot",
        "session-import" => "import_session",
        "session-export" => "export_session",
        "identity-export" => "export_identity",
        "identity-import" => "import_identity",
        _ => return None,
    })
}

/// `POST /api/v1/slots/{n}/refresh-cookies`, `/reset`, `/calibrate`, `/retire`,
/// `/session-import`, `/session-export`, `/identity-export` and
/// `/identity-import`.
async fn slot_action(
    State(c): State<Arc<Control>>,
    Path((n, action)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response {
    let Some(tool) = slot_tool(&action) else {
        return error(StatusCode::NOT_FOUND, format!("no action `{action}`"));
    };
    // The role gate first: a refused caller learns nothing of the body's parse.
    if let Err(r) = gate(&c, &headers, &uri, false, tool, Role::Admin) {
        return refuse(r);
    }
    match slot_args(&n, &body) {
        Ok(args) => act(&c, &headers, &uri, tool, args, Role::Admin).await,
        Err(r) => refuse(r),
    }
}

/// Outcomes per strategy per minute over the last hour (the status page's charts).
async fn rates(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = gate(&c, &headers, &uri, false, "GET /api/v1/rates", Role::Viewer) {
        return refuse(r);
    }
    axum::Json(c.core.pool().leases().rates().report()).into_response()
}

/// The caller's key name and role (the status page shows actions by it; the
/// actions themselves are gated again).
async fn whoami(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    match gate(
        &c,
        &headers,
        &uri,
        false,
        "GET /api/v1/whoami",
        Role::Viewer,
    ) {
        Ok(who) => axum::Json(json!({
            "name": who.name,
            "role": who.role.as_str(),
            "grants": who.grants.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(r) => refuse(r),
    }
}

/// Who may use which identity: every key's grants, and each slot's keys
/// (admin: it names every key).
async fn grants(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = gate(&c, &headers, &uri, false, "GET /api/v1/grants", Role::Admin) {
        return refuse(r);
    }
    axum::Json(crate::mcp::grants::report(
        c.core.pool(),
        &c.core.key_entries(),
    ))
    .into_response()
}

/// Whether `who` may see `ev`: an event of a slot no grant of the key
/// covers (its errors, its sites) is left out; the pool's own events stay.
fn event_seen_by(pool: &crate::pool::Pool, who: &Principal, ev: &crate::events::SlotEvent) -> bool {
    ev.slot
        .is_none_or(|slot| crate::mcp::grants::may_see(pool, who, slot, ev.strategy.as_deref()))
}

async fn recent(State(c): State<Arc<Control>>, headers: HeaderMap, uri: Uri) -> Response {
    let who = admit!(&c, &headers, &uri, "GET /api/v1/events", Role::Viewer);
    let mut events = c.core.pool().events().recent();
    events.retain(|e| event_seen_by(c.core.pool(), &who, e));
    axum::Json(json!({"events": events})).into_response()
}

/// The live event stream; the key may come as `?key=` (browsers cannot set
/// headers on a WebSocket).
async fn events(
    State(c): State<Arc<Control>>,
    headers: HeaderMap,
    uri: Uri,
    ws: WebSocketUpgrade,
) -> Response {
    let who = admit!(&c, &headers, &uri, true, "GET /api/v1/events", Role::Viewer);
    let rx = c.core.pool().events().subscribe();
    // `?fleet=1`: the other daemons' events too.
    let fleet = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "fleet=1" || kv == "fleet=true"));
    let remote = c
        .core
        .pool()
        .leases()
        .fleet()
        .filter(|_| fleet)
        .map(|f| (f.subscribe_remote(), f.cluster().node().to_string()));
    let (stop, core) = (c.stop.clone(), c.core.clone());
    ws.on_upgrade(move |socket| stream(socket, rx, remote, stop, core, who))
}

/// The next event of another daemon (never, without `?fleet=1`).
async fn next_remote(
    remote: &mut Option<(tokio::sync::broadcast::Receiver<String>, String)>,
) -> Option<String> {
    let Some((rx, me)) = remote else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(text) => {
                let own = serde_json::from_str::<Value>(&text)
                    .is_ok_and(|v| v["node"].as_str() == Some(me.as_str()));
                if !own {
                    return Some(text);
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(_) => return None,
        }
    }
}

/// How long one event may take to reach a WebSocket client.
const SEND_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

async fn stream(
    mut socket: WebSocket,
    mut rx: tokio::sync::broadcast::Receiver<crate::events::SlotEvent>,
    mut remote: Option<(tokio::sync::broadcast::Receiver<String>, String)>,
    stop: CancellationToken,
    core: Arc<Core>,
    who: Principal,
) {
    use tokio::sync::broadcast::error::RecvError;
    // A key revoked (and reloaded) meanwhile ends the stream within seconds.
    let mut check = tokio::time::interval(std::time::Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = check.tick() => if !core.still_valid(&who) {
                tracing::info!(key = %who.name, "event stream of a revoked key: ended");
                break;
            },
            ev = rx.recv() => {
                let text = match ev {
                    Ok(ev) if !event_seen_by(core.pool(), &who, &ev) => continue,
                    Ok(ev) => serde_json::to_string(&ev).unwrap_or_default(),
                    Err(RecvError::Lagged(n)) => json!({"kind": "lagged", "missed": n}).to_string(),
                    Err(RecvError::Closed) => break,
                };
                // A client that stops reading is dropped, not waited for.
                let sent = tokio::time::timeout(SEND_WAIT, socket.send(Message::Text(text.into()))).await;
                if !matches!(sent, Ok(Ok(()))) {
                    return;
                }
            }
            text = next_remote(&mut remote) => {
                let Some(text) = text else { break };
                let sent = tokio::time::timeout(SEND_WAIT, socket.send(Message::Text(text.into()))).await;
                if !matches!(sent, Ok(Ok(()))) {
                    return;
                }
            }
            msg = socket.recv() => match msg {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
            () = stop.cancelled() => break,
        }
    }
    let _ = tokio::time::timeout(SEND_WAIT, socket.send(Message::Close(None))).await;
}
