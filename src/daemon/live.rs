//! Logging a slot in by hand through the daemon, with a live view (admin
//! only): `POST /api/v1/slots/{n}/login` starts a login session
//! (`services::Logins::start`), `GET`/`DELETE /api/v1/live/{id}` read and end it,
//! `GET /api/v1/live/{id}/ws` is its live view (screencast frames out as
//! JSON text, clicks, scrolls and keys in), and `/live/{id}` is the page a
//! person opens, on a phone if need be. Every session is one audit line
//! when it ends: who, which slot and strategy, how long, how it ended;
//! never what was typed.
//!
//! An open live view re-checks its key as the event stream does: every
//! second and before each input it applies. A key revoked (and the keys
//! reloaded) or no longer admin closes the socket with a policy-violation
//! close frame (1008); nothing it sends afterwards reaches the page.

use std::sync::Arc;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::control::{Control, Refusal, admit, error, gate, refuse};
use crate::auth::{AuditRecord, Principal, Role};
use crate::identity::browser::live::Input;
use crate::mcp::Core;
use crate::services::{LiveSession, LoginLimits};

pub fn routes(control: Arc<Control>) -> Router {
    Router::new()
        .route("/api/v1/slots/{n}/login", axum::routing::post(start))
        .route("/api/v1/live/{id}", get(status).delete(cancel))
        .route("/api/v1/live/{id}/ws", get(view))
        .route(
            "/live/{id}",
            get(|| async { Html(include_str!("live.html")) }),
        )
        .with_state(control)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartArgs {
    strategy: String,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    idle_secs: Option<u64>,
}

fn describe(s: &LiveSession) -> serde_json::Value {
    json!({
        "id": s.id, "slot": s.slot, "strategy": s.strategy, "login_url": s.login_url,
        "live_url": format!("/live/{}", s.id), "ws_url": format!("/api/v1/live/{}/ws", s.id),
        "status": s.status(), "recording": s.recording_id, "purpose": s.purpose,
    })
}

async fn start(
    State(c): State<Arc<Control>>,
    Path(n): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response {
    let who = admit!(
        &c,
        &headers,
        &uri,
        "POST /api/v1/slots/{n}/login",
        Role::Admin
    );
    let Some(slot) =
        (n.parse::<usize>().ok()).filter(|s| c.core.pool().leases().identities().check(*s).is_ok())
    else {
        return error(StatusCode::NOT_FOUND, format!("no slot `{n}`"));
    };
    let args: StartArgs = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the body must be {{\"strategy\": \"…\"}}: {e}"),
            );
        }
    };
    // A key with grants signs in only as an identity they cover for `login`.
    if let Err(d) =
        crate::mcp::grants::check_action(c.core.pool(), &who, "login", slot, &args.strategy)
    {
        let msg = d.to_string();
        c.core.audit_request(
            Some(&who),
            "http",
            &format!("POST /api/v1/slots/{slot}/login"),
            Some(&msg),
        );
        return error(StatusCode::FORBIDDEN, msg);
    }
    let mut limits = LoginLimits::default();
    if let Some(t) = args.timeout_secs {
        limits.timeout = std::time::Duration::from_secs(t.clamp(10, 3600));
    }
    if let Some(t) = args.idle_secs {
        limits.idle = std::time::Duration::from_secs(t.clamp(10, 3600));
    }
    let session = match c
        .core
        .pool()
        .services()
        .logins
        .start(slot, &args.strategy, limits)
    {
        Ok(s) => s,
        Err(e) => {
            let status = match e.kind() {
                crate::ErrorKind::NotFound => StatusCode::NOT_FOUND,
                crate::ErrorKind::Unavailable => StatusCode::CONFLICT,
                _ => StatusCode::BAD_REQUEST,
            };
            return error(status, e.to_string());
        }
    };
    tracing::info!(key = %who.name, slot, strategy = %args.strategy, "login session opened");
    tokio::spawn(audit_when_done(c.clone(), session.clone(), who));
    axum::Json(describe(&session)).into_response()
}

/// One audit line per session, when it ends.
async fn audit_when_done(c: Arc<Control>, s: Arc<LiveSession>, who: Principal) {
    let end = s.done().await;
    if let Some(audit) = c.core.audit() {
        audit.record(&AuditRecord {
            ts: crate::events::now_rfc3339(),
            principal: who.name.clone(),
            role: who.role.as_str().into(),
            transport: "api".into(),
            session: None,
            method: "live/login".into(),
            tool: Some("login".into()),
            args: json!({"slot": s.slot, "strategy": s.strategy, "inputs": end.inputs, "end": end.state}),
            ok: end.state == "logged_in",
            error: (end.state != "logged_in").then(|| end.error.clone().unwrap_or_else(|| end.state.to_string())),
            duration_ms: u64::try_from(s.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            slot: Some(s.slot),
            tier: None,
            attempts: None,
            hop: None,
            recordings: s.recording_id.iter().cloned().collect(),
        });
    }
}

fn session_of(
    c: &Control,
    headers: &HeaderMap,
    uri: &Uri,
    id: &str,
    query_key: bool,
) -> Result<(Principal, Arc<LiveSession>), Refusal> {
    let who = gate(c, headers, uri, query_key, "live view", Role::Admin)?;
    let s = c
        .core
        .pool()
        .services()
        .logins
        .get(id)
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no login session `{id}`")))?;
    // A key with grants sees and drives only the identities they cover.
    crate::mcp::grants::check_action(c.core.pool(), &who, "login", s.slot, &s.strategy)
        .map_err(|d| (StatusCode::FORBIDDEN, d.to_string()))?;
    Ok((who, s))
}

async fn status(
    State(c): State<Arc<Control>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match session_of(&c, &headers, &uri, &id, false) {
        Ok((_, s)) => axum::Json(describe(&s)).into_response(),
        Err(r) => refuse(r),
    }
}

async fn cancel(
    State(c): State<Arc<Control>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match session_of(&c, &headers, &uri, &id, false) {
        Ok((_, s)) => {
            s.cancel();
            let end = s.done().await;
            axum::Json(json!({"id": s.id, "status": end})).into_response()
        }
        Err(r) => refuse(r),
    }
}

/// The live view: the key may come as `?key=` (a browser's WebSocket cannot
/// send headers).
async fn view(
    State(c): State<Arc<Control>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    ws: WebSocketUpgrade,
) -> Response {
    match session_of(&c, &headers, &uri, &id, true) {
        Ok((who, s)) => {
            let (stop, core) = (c.stop.clone(), c.core.clone());
            ws.on_upgrade(move |socket| serve_view(socket, s, stop, Watcher { core, who }))
        }
        Err(r) => refuse(r),
    }
}

const SEND_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The key a live view was opened with, checked again while it is open.
struct Watcher {
    core: Arc<Core>,
    who: Principal,
}

impl Watcher {
    /// Whether the key still exists with the admin role (the keys file as
    /// last reloaded).
    fn still_admin(&self) -> bool {
        self.who.role >= Role::Admin && self.core.still_valid(&self.who)
    }

    /// Close `socket` for a key that is gone: a policy-violation close frame.
    async fn close_revoked(&self, socket: &mut WebSocket) {
        tracing::info!(key = %self.who.name, "live view of a revoked key: closed");
        let frame = CloseFrame {
            code: close_code::POLICY,
            reason: "the key of this live view was revoked".into(),
        };
        let _ = tokio::time::timeout(SEND_WAIT, socket.send(Message::Close(Some(frame)))).await;
    }
}

async fn serve_view(
    mut socket: WebSocket,
    s: Arc<LiveSession>,
    stop: tokio_util::sync::CancellationToken,
    watcher: Watcher,
) {
    use tokio::sync::broadcast::error::RecvError;
    let (mut frames, last) = s.watch();
    let send = |v: serde_json::Value| Message::Text(v.to_string().into());
    let frame_msg = |f: &crate::services::Frame| {
        send(json!({"type": "frame", "data": f.data, "width": f.width, "height": f.height}))
    };
    if let Some(f) = last
        && socket.send(frame_msg(&f)).await.is_err()
    {
        return;
    }
    let mut ticks = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            f = frames.recv() => match f {
                Ok(f) => {
                    let sent = tokio::time::timeout(SEND_WAIT, socket.send(frame_msg(&f))).await;
                    if !matches!(sent, Ok(Ok(()))) {
                        return;
                    }
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            },
            m = socket.recv() => match m {
                Some(Ok(Message::Text(t))) => match serde_json::from_str::<Input>(&t) {
                    Ok(_) if !watcher.still_admin() => {
                        watcher.close_revoked(&mut socket).await;
                        return;
                    }
                    Ok(input) => s.send(input).await,
                    Err(e) => {
                        let _ = socket.send(send(json!({"type": "error", "error": format!("not an input: {e}")}))).await;
                    }
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
            _ = ticks.tick() => {
                if !watcher.still_admin() {
                    watcher.close_revoked(&mut socket).await;
                    return;
                }
                let st = s.status();
                if socket.send(send(json!({"type": "status", "status": st}))).await.is_err() {
                    return;
                }
                if st.done {
                    break;
                }
            },
            () = stop.cancelled() => break,
        }
    }
    let _ = socket
        .send(send(json!({"type": "status", "status": s.status()})))
        .await;
    let _ = socket.send(Message::Close(None)).await;
}
