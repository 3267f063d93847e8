//! The MCP HTTP routes: Streamable HTTP at `/mcp` (rmcp's service) and legacy
//! SSE at `/sse` + `/messages` (ours, `sse.rs`), behind one guard layer that
//! checks Host and Origin (403), authenticates the key (401), caps the role, and
//! binds each session to the key that opened it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::bounds::{Held, Transport, to_evict};
use super::dispatch::Core;
use super::gate::{Owner, ROLE_CAP_HEADER, check_host, check_origin, presented_key, reject};
use super::server::McpServer;
use super::sse::SseSessions;
use crate::auth::{Principal, Role};

struct Binding {
    owner: String,
    last_used: Instant,
    /// When it was bound: a binding newer than a look at rmcp's sessions
    /// is not judged by that look.
    bound: Instant,
}

/// State behind the MCP routes.
pub struct McpHttp {
    pub core: Arc<Core>,
    /// Streamable HTTP session id → the key (name and role) that opened it,
    /// and when it was last used.
    bindings: Mutex<HashMap<String, Binding>>,
    /// rmcp's sessions (they expire after 5 idle minutes): bindings of
    /// sessions it no longer knows are pruned.
    sessions: Arc<LocalSessionManager>,
    /// Sessions rmcp holds with no binding, and since when: a request cut
    /// between rmcp's answer and its binding leaves one no bound would end.
    unbound: Mutex<HashMap<String, Instant>>,
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
    // The idle limit is ours (`end_idle`): the thin path answers most of a
    // session's requests without rmcp seeing them.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let sessions = Arc::new(manager);
    let state = Arc::new(McpHttp {
        core: core.clone(),
        bindings: Mutex::new(HashMap::new()),
        sessions: sessions.clone(),
        unbound: Mutex::new(HashMap::new()),
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
    tokio::spawn(sweep_idle(Arc::downgrade(&state), shutdown));
    let router = Router::new()
        .route_service("/mcp", streamable)
        .merge(legacy)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(s.max_body_bytes))
        .with_state(state.clone());
    (router, state)
}

/// How long a session rmcp holds may stay without a binding (it gets one
/// as its `initialize` answer passes; only a cut request leaves it none).
const UNBOUND_GRACE: Duration = Duration::from_secs(60);

/// The sessions in `live` that `bound` does not know and that were first
/// seen so in `seen` at least `grace` before `now`; `seen` keeps the rest
/// of the unbound ones.
fn unbound_past(
    live: &std::collections::HashSet<String>,
    bound: impl Fn(&str) -> bool,
    seen: &mut HashMap<String, Instant>,
    now: Instant,
    grace: Duration,
) -> Vec<String> {
    seen.retain(|id, _| live.contains(id) && !bound(id));
    let mut out = Vec::new();
    for id in live {
        if bound(id) {
            continue;
        }
        let first = *seen.entry(id.clone()).or_insert(now);
        if now.saturating_duration_since(first) >= grace {
            out.push(id.clone());
        }
    }
    for id in &out {
        seen.remove(id);
    }
    out
}

/// A Streamable HTTP session with no traffic this long is ended.
pub const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// End idle sessions once a minute, until shutdown.
async fn sweep_idle(state: std::sync::Weak<McpHttp>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(state) = state.upgrade() else {
            return;
        };
        state.end_idle(SESSION_IDLE).await;
    }
}

impl McpHttp {
    /// Open Streamable HTTP and legacy SSE sessions.
    pub async fn session_counts(&self) -> (usize, usize) {
        (self.count_sessions().await, self.sse.len())
    }

    /// End the sessions nobody used for `idle` (a request of any kind, on
    /// either path, counts as use).
    pub async fn end_idle(&self, idle: Duration) -> usize {
        let mut stale: Vec<String> = self
            .bindings
            .lock()
            .iter()
            .filter(|(_, b)| b.last_used.elapsed() >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        // And the sessions nobody can use: unbound past a grace.
        let live: std::collections::HashSet<String> = (self.sessions.sessions.read().await)
            .keys()
            .map(|k| k.to_string())
            .collect();
        let orphans = {
            let bindings = self.bindings.lock();
            unbound_past(
                &live,
                |id| bindings.contains_key(id),
                &mut self.unbound.lock(),
                Instant::now(),
                idle.min(UNBOUND_GRACE),
            )
        };
        stale.extend(orphans);
        for id in &stale {
            self.bindings.lock().remove(id);
            let sid: rmcp::transport::common::server_side_http::SessionId = id.as_str().into();
            if let Err(e) = self.sessions.close_session(&sid).await {
                tracing::debug!("closing idle session {id}: {e}");
            }
            tracing::info!(session = %id, "session ended after {} s without a request", idle.as_secs());
        }
        if !stale.is_empty() {
            self.count_sessions().await;
        }
        stale.len()
    }

    /// Whether rmcp still holds session `id` (it ends one whose client
    /// went away).
    async fn rmcp_has(&self, id: &str) -> bool {
        self.sessions.sessions.read().await.contains_key(id)
    }

    /// A Streamable HTTP session is used only with the key that opened it.
    #[allow(clippy::result_large_err)] // the refusal is the response sent, once
    fn check_owner(&self, id: &str, owner: &str) -> Result<(), Response> {
        match self.bindings.lock().get_mut(id) {
            None => Err(reject(
                StatusCode::NOT_FOUND,
                -32600,
                format!("unknown session `{id}`: initialize a new one"),
            )),
            Some(b) if b.owner != owner => Err(reject(
                StatusCode::FORBIDDEN,
                -32001,
                "this session was opened with another API key",
            )),
            Some(b) => {
                b.last_used = Instant::now();
                Ok(())
            }
        }
    }

    async fn bind(&self, id: &str, owner: String) {
        let binding = Binding {
            owner,
            last_used: Instant::now(),
            bound: Instant::now(),
        };
        self.bindings.lock().insert(id.to_string(), binding);
        self.count_sessions().await;
    }

    /// Forget bindings of sessions rmcp has ended (idle, closed), and tell
    /// `pool_status` how many are open.
    async fn count_sessions(&self) -> usize {
        // A session bound while rmcp's list is read (another request's
        // `initialize`) is missing from the list but alive: kept. Dropping
        // it left rmcp a session no bound could end (issue 57's CI:
        // hundreds under a flood of `initialize`).
        let looked = Instant::now();
        let live: std::collections::HashSet<String> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut bindings = self.bindings.lock();
        bindings.retain(|k, b| live.contains(k) || b.bound >= looked);
        let s = self.core.settings();
        // What rmcp holds is what is open (a session it holds unbound would
        // hold memory unseen).
        let http = live.len().max(bindings.len());
        self.core
            .pool()
            .services()
            .serving
            .set_sessions(http, self.sse.len(), s.max_sessions);
        http
    }

    /// End sessions so `owner` can open one more within the session bounds.
    async fn make_room(&self, owner: &str) {
        self.count_sessions().await;
        let mut held: Vec<Held> = self
            .bindings
            .lock()
            .iter()
            .map(|(id, b)| Held {
                id: id.clone(),
                transport: Transport::Http,
                owner: b.owner.clone(),
                last_used: b.last_used,
                streaming: false,
            })
            .collect();
        held.extend(self.sse.held());
        let s = self.core.settings();
        for victim in to_evict(&held, owner, s.max_sessions_per_key, s.max_sessions) {
            tracing::info!(
                session = %victim.id,
                owner = %victim.owner,
                "session ended to make room (server.max_sessions_per_key / max_sessions)"
            );
            match victim.transport {
                Transport::Sse => self.sse.end(&victim.id),
                Transport::Http => {
                    self.bindings.lock().remove(&victim.id);
                    let id: rmcp::transport::common::server_side_http::SessionId =
                        victim.id.as_str().into();
                    if let Err(e) = self.sessions.close_session(&id).await {
                        tracing::debug!("closing session {}: {e}", victim.id);
                    }
                }
            }
            self.core.pool().services().serving.session_evicted();
        }
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
    /// The request opens a session (an `initialize` without a session id, or
    /// a legacy `GET /sse`).
    opens_session: bool,
    /// A request the thin path answers itself, and who asks.
    thin: Option<(super::thin::Thin, Principal)>,
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
    // A legacy session opened with `?key=`: its messages carry only its id.
    let by_session = (key.is_none() && path == "/messages" && req.method() == Method::POST)
        .then(|| {
            let q = req.uri().query().unwrap_or("");
            let id = url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "session_id")
                .map(|(_, v)| v.into_owned())?;
            state.sse.query_keyed(&id)
        })
        .flatten();
    let mut principal = match by_session {
        Some((p, _)) => p,
        None => state
            .core
            .authenticate(key.as_deref(), transport)
            .map_err(|m| {
                refused(StatusCode::UNAUTHORIZED, &m);
                reject(StatusCode::UNAUTHORIZED, -32001, m)
            })?,
    };
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
    let mut opens_session = path == "/sse" && req.method() == Method::GET;
    let mut thin = None;
    if path == "/mcp" && req.method() == Method::POST {
        let (r, message) = read_body(req, settings.max_body_bytes).await?;
        req = r;
        if let Some(m) = message {
            json_reply = m.wants_json();
            opens_session = m.is_initialize() && session.is_none();
            thin = m
                .into_thin(req.headers(), session.is_some())
                .map(|t| (t, principal.clone()));
        }
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
            opens_session,
            thin,
        },
    ))
}

/// Read a POST's body here so malformed JSON gets a JSON-RPC parse error
/// (rmcp would answer 415 in plain text) and oversize bodies a 413; the
/// message, read once, when it is a single one.
async fn read_body(
    req: Request,
    limit: usize,
) -> Result<(Request, Option<super::thin::Message>), Response> {
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
    let message = match serde_json::from_slice::<super::thin::Message>(&bytes) {
        Ok(m) => Some(m),
        Err(_) => {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
                return Err(reject(
                    StatusCode::BAD_REQUEST,
                    -32700,
                    format!("parse error: {e}"),
                ));
            }
            None
        }
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), message))
}

/// Run an admitted request; bind a new Streamable HTTP session to its key,
/// forget one that was deleted.
async fn serve(state: &McpHttp, req: Request, mut a: Admitted, next: Next) -> Response {
    if let Some((thin, principal)) = a.thin.take() {
        // A session's request: rmcp must still hold the session (stateless
        // ones have none).
        let live = match &a.session {
            Some(id) => state.rmcp_has(id).await,
            None => true,
        };
        if live {
            let ctx = super::dispatch::CallContext {
                principal,
                session: a.session,
                hop: None,
            };
            return super::thin::answer(&state.core, ctx, thin).await;
        }
    }
    let is_delete = req.method() == Method::DELETE;
    if a.opens_session {
        state.make_room(&a.owner).await;
    }
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
                state.count_sessions().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_left_unbound_past_the_grace_is_ended_and_a_new_one_waits() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(60);
        let live: std::collections::HashSet<String> =
            ["bound", "new", "cut"].map(String::from).into();
        let bound = |id: &str| id == "bound";
        let mut seen = HashMap::from([("cut".to_string(), t0), ("gone".to_string(), t0)]);
        let later = t0 + Duration::from_secs(61);
        // `cut` was seen unbound a minute ago; `new` only now.
        let ended = unbound_past(&live, bound, &mut seen, later, grace);
        assert_eq!(ended, ["cut"]);
        // `new` is remembered, `gone` (rmcp ended it) forgotten.
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["new"]);
        // `cut` ended by then; `new` bound meanwhile: never ended.
        let live: std::collections::HashSet<String> = ["bound", "new"].map(String::from).into();
        let ended = unbound_past(&live, |_| true, &mut seen, later + grace, grace);
        assert!(ended.is_empty(), "{ended:?}");
        assert!(seen.is_empty());
    }
}
