//! The legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp no longer
//! ships: `GET /sse` opens a stream whose first event is `endpoint` with a
//! relative `/messages?session_id=…`; `POST /messages` answers 202 and the
//! JSON-RPC response arrives on the stream as `event: message`. Each session is
//! one rmcp service over a Sink/Stream pair, bound to the key that opened it. A
//! `:` ping goes out every `sse_ping_secs`; a session with no open stream and no
//! traffic for `sse_idle_secs` is dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::channel::mpsc;
use parking_lot::Mutex;
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::bounds::{Held, Transport};
use super::gate::{Owner, reject};
use super::server::McpServer;
use crate::auth::Principal;

/// Every open legacy session.
pub struct SseSessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    ping: Duration,
    idle: Duration,
    /// Sessions of keys revoked (or changed) since are ended.
    core: std::sync::Weak<super::dispatch::Core>,
}

struct Session {
    principal: Principal,
    owner: Owner,
    /// Opened with `GET /sse?key=…` (a client that cannot set headers):
    /// its `/messages` POSTs are the session's, bound to that key.
    by_query: bool,
    to_server: mpsc::UnboundedSender<ClientJsonRpcMessage>,
    last_activity: Mutex<Instant>,
    stream_open: AtomicBool,
    cancel: CancellationToken,
}

impl Session {
    fn touch(&self) {
        *self.last_activity.lock() = Instant::now();
    }
}

impl SseSessions {
    /// Start the idle reaper; it stops with `shutdown`.
    pub fn new(
        ping: Duration,
        idle: Duration,
        core: &Arc<super::dispatch::Core>,
        shutdown: CancellationToken,
    ) -> Arc<SseSessions> {
        let sessions = Arc::new(SseSessions {
            map: Mutex::new(HashMap::new()),
            ping,
            idle,
            core: Arc::downgrade(core),
        });
        let weak = Arc::downgrade(&sessions);
        let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(tick) => {}
                }
                let Some(s) = weak.upgrade() else { break };
                s.reap();
            }
            if let Some(s) = weak.upgrade() {
                for (_, session) in s.map.lock().drain() {
                    session.cancel.cancel();
                }
            }
        });
        sessions
    }

    /// Drop sessions with no stream and no traffic for the idle limit, and
    /// sessions whose key was revoked or changed.
    fn reap(&self) {
        let idle = self.idle;
        let core = self.core.upgrade();
        let mut map = self.map.lock();
        map.retain(|id, s| {
            let idle_out =
                !s.stream_open.load(Ordering::SeqCst) && s.last_activity.lock().elapsed() >= idle;
            let revoked = core.as_ref().is_some_and(|c| !c.still_valid(&s.principal));
            if idle_out {
                tracing::info!(session = %id, "legacy SSE session idle: dropped");
            } else if revoked {
                tracing::info!(session = %id, key = %s.principal.name, "legacy SSE session of a revoked key: ended");
            }
            if idle_out || revoked {
                s.cancel.cancel();
            }
            !(idle_out || revoked)
        });
    }

    /// Every session, for the session bounds.
    pub fn held(&self) -> Vec<Held> {
        self.map
            .lock()
            .iter()
            .map(|(id, s)| Held {
                id: id.clone(),
                transport: Transport::Sse,
                owner: s.owner.0.clone(),
                last_used: *s.last_activity.lock(),
                streaming: s.stream_open.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// End a session (its stream closes; its messages get 404).
    pub fn end(&self, id: &str) {
        if let Some(s) = self.map.lock().remove(id) {
            s.cancel.cancel();
        }
    }

    /// Number of live sessions.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Marks the session's stream closed when the client goes away.
struct StreamGuard(Arc<Session>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.stream_open.store(false, Ordering::SeqCst);
        self.0.touch();
    }
}

/// Messages buffered for one client's stream.
const CLIENT_BUFFER: usize = 256;

impl SseSessions {
    /// Who a `POST /messages?session_id=ID` without a key of its own
    /// speaks as: the key that opened session `ID` with `?key=` (while that
    /// key still holds); `None` for a session opened with a header (its
    /// client sends the header again) or one that does not exist. The id
    /// is unguessable (UUID v4) and handed only to the stream's reader;
    /// the key itself is never in the URL the stream hands back.
    pub fn query_keyed(&self, id: &str) -> Option<(Principal, Owner)> {
        let s = self.map.lock().get(id).cloned()?;
        let core = self.core.upgrade()?;
        (s.by_query && core.still_valid(&s.principal))
            .then(|| (s.principal.clone(), s.owner.clone()))
    }
}

/// `GET /sse`.
pub async fn open(
    State(sessions): State<Arc<SseSessions>>,
    Extension(principal): Extension<Principal>,
    Extension(owner): Extension<Owner>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let by_query = super::gate::key_from(&headers, &uri, false).is_none()
        && super::gate::key_from(&headers, &uri, true).is_some();
    let id = uuid::Uuid::new_v4().to_string();
    let (to_server, from_client) = mpsc::unbounded::<ClientJsonRpcMessage>();
    // Bounded: a client that stops reading slows its own session down instead
    // of filling memory.
    let (to_client, from_server) = mpsc::channel::<ServerJsonRpcMessage>(CLIENT_BUFFER);
    let cancel = CancellationToken::new();
    let session = Arc::new(Session {
        principal: principal.clone(),
        owner,
        by_query,
        to_server,
        last_activity: Mutex::new(Instant::now()),
        stream_open: AtomicBool::new(true),
        cancel: cancel.clone(),
    });
    let Some(core) = sessions.core.upgrade() else {
        return reject(
            StatusCode::SERVICE_UNAVAILABLE,
            -32600,
            "the daemon is shutting down",
        );
    };
    sessions.map.lock().insert(id.clone(), session.clone());
    let handler = McpServer::new(core, principal, Some(id.clone()));
    let ping = sessions.ping;
    let task_sessions = sessions.clone();
    let task_id = id.clone();
    let task_cancel = cancel.clone();
    tokio::spawn(async move {
        match handler
            .serve_with_ct((to_client, from_client), task_cancel.clone())
            .await
        {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => {
                tracing::debug!(session = %task_id, "legacy SSE session ended before initialize: {e}")
            }
        }
        task_sessions.map.lock().remove(&task_id);
    });
    let guard = StreamGuard(session);
    let endpoint = futures::stream::once(async move {
        Ok::<_, Infallible>(
            Event::default()
                .event("endpoint")
                .data(format!("/messages?session_id={id}")),
        )
    });
    let messages = from_server
        .map(|m| {
            let data = serde_json::to_string(&m).unwrap_or_default();
            Ok::<_, Infallible>(Event::default().event("message").data(data))
        })
        .take_until(cancel.cancelled_owned())
        .map(move |e| {
            // Keep the guard alive exactly as long as the stream.
            let _ = &guard;
            e
        });
    Sse::new(endpoint.chain(messages))
        .keep_alive(KeepAlive::new().interval(ping).text("ping"))
        .into_response()
}

#[derive(Debug, Deserialize)]
pub struct MessageQuery {
    session_id: Option<String>,
}

/// `POST /messages?session_id=…`.
pub async fn message(
    State(sessions): State<Arc<SseSessions>>,
    Extension(owner): Extension<Owner>,
    Query(q): Query<MessageQuery>,
    body: Bytes,
) -> Response {
    let Some(id) = q.session_id else {
        return reject(StatusCode::BAD_REQUEST, -32600, "missing ?session_id=");
    };
    let Some(session) = sessions.map.lock().get(&id).cloned() else {
        return reject(
            StatusCode::NOT_FOUND,
            -32600,
            format!("unknown session `{id}`"),
        );
    };
    if session.owner != owner {
        return reject(
            StatusCode::FORBIDDEN,
            -32001,
            "this session was opened with another API key",
        );
    }
    session.touch();
    let value: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return reject(StatusCode::BAD_REQUEST, -32700, format!("parse error: {e}"));
        }
    };
    let msg: ClientJsonRpcMessage = match serde_json::from_value(value) {
        Ok(m) => m,
        Err(e) => {
            return reject(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("not a JSON-RPC request, notification or response: {e}"),
            );
        }
    };
    if session.to_server.unbounded_send(msg).is_err() {
        return reject(
            StatusCode::NOT_FOUND,
            -32600,
            format!("session `{id}` has ended"),
        );
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}
