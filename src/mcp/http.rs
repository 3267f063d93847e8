//! The MCP HTTP routes: Streamable HTTP at `/mcp` (rmcp's service) and legacy
//! SSE at `/sse` + `/messages` (ours, `sse.rs`), behind one guard layer that
//! checks Host and Origin (403), authenticates the key (401), caps the role, and
//! binds each session to the key that opened it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::dispatch::Core;
use super::gate::{Owner, ROLE_CAP_HEADER, check_host, check_origin, presented_key, reject};
use super::server::McpServer;
use super::sse::SseSessions;
use crate::auth::{Principal, Role};

/// State behind the MCP routes.
pub struct McpHttp {
    pub core: Arc<Core>,
    /// Streamable HTTP session id → the key (name and role) that opened it.
    bindings: Mutex<HashMap<String, String>>,
    /// rmcp's sessions (they expire after 5 idle minutes): bindings of
    /// sessions it no longer knows are pruned.
    sessions: Arc<LocalSessionManager>,
    pub sse: Arc<SseSessions>,
}

/// The MCP routes, ready to merge into the daemon's router, and their state.
/// `shutdown` ends every session and stream.
pub fn routes(core: Arc<Core>, shutdown: CancellationToken) -> (Router, Arc<McpHttp>) {
    let s = core.settings().clone();
    let sse = SseSessions::new(
        Duration::from_secs(s.sse_ping_secs.max(1)),
        Duration::from_secs(s.sse_idle_secs.max(1)),
        &core,
        shutdown.clone(),
    );
    // rmcp ends a session after 5 idle minutes by default; agents often think
    // longer than that between calls. An hour, then the client re-initializes
    // (the stdio bridge does it by itself).
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = Arc::new(manager);
    let state = Arc::new(McpHttp {
        core: core.clone(),
        bindings: Mutex::new(HashMap::new()),
        sessions: sessions.clone(),
        sse,
    });
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by our guard, for every MCP route alike.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(s.max_body_bytes)
        .with_sse_keep_alive(Some(Duration::from_secs(s.sse_ping_secs.max(1))))
        .with_cancellation_token(shutdown.child_token());
    let factory_core = core.clone();
    let streamable = StreamableHttpService::new(
        move || {
            // Requests carry their own principal (set by the guard); this one
            // is never used for an authenticated request.
            Ok(McpServer::new(
                factory_core.clone(),
                Principal::new("unauthenticated", Role::Viewer, "http"),
                None,
            ))
        },
        sessions,
        config,
    );
    // The legacy SSE handlers see only their sessions.
    let legacy = Router::new()
        .route("/sse", get(super::sse::open))
        .route("/messages", post(super::sse::message))
        .with_state(state.sse.clone());
    let router = Router::new()
        .route_service("/mcp", streamable)
        .merge(legacy)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(s.max_body_bytes))
        .with_state(state.clone());
    (router, state)
}

/// A Streamable HTTP session with no traffic this long is ended.
pub const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// Above this many bindings, those of expired sessions are pruned.
const PRUNE_ABOVE: usize = 256;

impl McpHttp {
    /// Open Streamable HTTP and legacy SSE sessions.
    pub async fn session_counts(&self) -> (usize, usize) {
        (self.sessions.sessions.read().await.len(), self.sse.len())
    }

    /// A Streamable HTTP session is used only with the key that opened it.
    #[allow(clippy::result_large_err)] // the refusal is the response sent, once
    fn check_owner(&self, id: &str, owner: &str) -> Result<(), Response> {
        match self.bindings.lock().get(id) {
            None => Err(reject(
                StatusCode::NOT_FOUND,
                -32600,
                format!("unknown session `{id}`: initialize a new one"),
            )),
            Some(o) if o != owner => Err(reject(
                StatusCode::FORBIDDEN,
                -32001,
                "this session was opened with another API key",
            )),
            Some(_) => Ok(()),
        }
    }

    async fn bind(&self, id: &str, name: String) {
        let full = self.bindings.lock().len() >= PRUNE_ABOVE;
        if full {
            let live: std::collections::HashSet<String> = self
                .sessions
                .sessions
                .read()
                .await
                .keys()
                .map(|k| k.to_string())
                .collect();
            self.bindings.lock().retain(|k, _| live.contains(k));
        }
        self.bindings.lock().insert(id.to_string(), name);
    }
}

async fn guard(State(state): State<Arc<McpHttp>>, req: Request, next: Next) -> Response {
    match admit(&state, req).await {
        Ok((req, admitted)) => serve(&state, req, admitted, next).await,
        Err(refusal) => refusal,
    }
}

/// What the gate learnt of an admitted request.
struct Admitted {
    path: String,
    session: Option<String>,
    /// The key's name and role: what its sessions are bound to.
    owner: String,
    /// Answer with one JSON body instead of a stream.
    json_reply: bool,
}

/// Host, Origin, key, role cap, session owner and (for a POST to `/mcp`) a
/// body that parses: the request with its principal, or the refusal.
async fn admit(state: &McpHttp, mut req: Request) -> Result<(Request, Admitted), Response> {
    let settings = state.core.settings();
    let path = req.uri().path().to_string();
    let transport = if path == "/mcp" { "http" } else { "sse" };
    let method = format!("{} {path}", req.method());
    // Refusals are written down (the key never is).
    let refused = |status: StatusCode, m: &str| {
        state.core.audit_request(
            None,
            transport,
            &method,
            Some(&format!("{}: {m}", status.as_u16())),
        );
    };
    check_host(req.headers(), &settings.allowed_hosts, settings.listen)
        .and_then(|()| {
            check_origin(
                req.headers(),
                &settings.allowed_origins,
                &settings.allowed_hosts,
            )
        })
        .map_err(|m| {
            refused(StatusCode::FORBIDDEN, &m);
            reject(StatusCode::FORBIDDEN, -32600, m)
        })?;
    let key = presented_key(&req, req.method() == Method::GET && path == "/sse");
    let mut principal = state
        .core
        .authenticate(key.as_deref(), transport)
        .map_err(|m| {
            refused(StatusCode::UNAUTHORIZED, &m);
            reject(StatusCode::UNAUTHORIZED, -32001, m)
        })?;
    // Sessions belong to the key (its name and role), whatever cap a request sets.
    let owner = format!("{}/{}", principal.name, principal.role);
    if let Some(cap) = req.headers().get(ROLE_CAP_HEADER) {
        let Some(Ok(r)) = cap.to_str().ok().map(str::parse::<Role>) else {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("{ROLE_CAP_HEADER} must be viewer, operator or admin"),
            ));
        };
        principal.role = principal.role.min(r);
    }
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if path == "/mcp"
        && let Some(id) = &session
    {
        state.check_owner(id, &owner)?;
    }
    let mut json_reply = false;
    if path == "/mcp" && req.method() == Method::POST {
        let (r, json) = read_body(req, settings.max_body_bytes).await?;
        (req, json_reply) = (r, json);
    }
    req.extensions_mut().insert(principal);
    req.extensions_mut().insert(Owner(owner.clone()));
    Ok((
        req,
        Admitted {
            path,
            session,
            owner,
            json_reply,
        },
    ))
}

/// Read a POST's body here so malformed JSON gets a JSON-RPC parse error
/// (rmcp would answer 415 in plain text) and oversize bodies a 413; whether
/// it wants one JSON reply (a single message without a progress token).
async fn read_body(req: Request, limit: usize) -> Result<(Request, bool), Response> {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return Err(reject(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            format!("request body exceeds {limit} bytes (server.max_body_bytes)"),
        ));
    };
    // One pass for a single message; a batch (or anything unusual) is
    // only checked for JSON, and keeps rmcp's stream.
    let json_reply = match serde_json::from_slice::<super::reply::Peek>(&bytes) {
        Ok(p) => p.wants_json(),
        Err(_) => {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
                return Err(reject(
                    StatusCode::BAD_REQUEST,
                    -32700,
                    format!("parse error: {e}"),
                ));
            }
            false
        }
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), json_reply))
}

/// Run an admitted request; bind a new Streamable HTTP session to its key,
/// forget one that was deleted.
async fn serve(state: &McpHttp, req: Request, a: Admitted, next: Next) -> Response {
    let is_delete = req.method() == Method::DELETE;
    let mut response = next.run(req).await;
    if a.json_reply {
        response = super::reply::to_json(response).await;
    }
    if a.path == "/mcp" {
        match (&a.session, response.headers().get("mcp-session-id")) {
            (None, Some(new)) => {
                if let Ok(id) = new.to_str() {
                    state.bind(id, a.owner).await;
                }
            }
            (Some(id), _) if is_delete && response.status().is_success() => {
                state.bindings.lock().remove(id);
                // rmcp answers 202; clients (the Python SDK) expect 200 or
                // 204 for a terminated session and log anything else.
                if response.status() == StatusCode::ACCEPTED {
                    *response.status_mut() = StatusCode::OK;
                }
            }
            _ => {}
        }
    }
    response
}
