//! The one dispatcher every transport serves: the authorization gate, the audit
//! record, and the tool run (with progress and cancellation).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::RwLock;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::catalog;
use super::cursors::Cursors;
use super::end::{CallEnd, Failure};
use crate::auth::{AuditLog, AuditRecord, Keys, Principal, authorize};
use crate::config::ServerConfig;
use crate::error::ErrorKind;
use crate::lease::cascade::{Progress, RunOptions};
use crate::pool::Pool;
use crate::routing::grants::Scope;
use crate::tools::{self, Budget, budget};

/// Who is calling and over what, for the gate and the audit line.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub principal: Principal,
    pub session: Option<String>,
    /// The fleet daemon that forwarded this call here (never forwarded again).
    pub hop: Option<String>,
}

/// Shared by every transport and session.
pub struct Core {
    pool: Pool,
    settings: ServerConfig,
    keys: RwLock<Option<Keys>>,
    audit: Option<AuditLog>,
    /// Tool calls running now; `drained` is woken when it drops to zero.
    in_flight: AtomicUsize,
    drained: tokio::sync::Notify,
    /// Set on SIGTERM: new calls are refused.
    draining: AtomicBool,
    /// Cancelled when the shutdown grace is over: running calls end.
    stop_calls: CancellationToken,
    /// Connected MCP clients, told when the tool list changes.
    peers: parking_lot::Mutex<Vec<rmcp::Peer<rmcp::RoleServer>>>,
    /// Answers cut to their caller's budget, for their next pieces.
    cursors: Cursors,
    /// 2026-07-28 clients' `subscriptions/listen` streams, told when the
    /// tool list changes.
    listeners: parking_lot::Mutex<Vec<(u64, rmcp::service::SubscriptionSink)>>,
    /// The next listener's number.
    next_listener: std::sync::atomic::AtomicU64,
    /// Cancelled on SIGTERM: the listen streams end (their clients
    /// subscribe again elsewhere or once the daemon is back).
    closing: CancellationToken,
}

/// Counts a call as in flight while alive.
struct InFlight<'a>(&'a Core);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

/// A call's metrics and audit line, written once: when it ends, or, when
/// its future is dropped first (the client closed the connection on the
/// thin path), as cancelled by the client.
struct Record<'a> {
    core: &'a Core,
    ctx: &'a CallContext,
    tool: &'a str,
    /// The tool's name for metrics (`unknown` for a tool that is none).
    label: &'static str,
    /// The arguments, redacted (taken by the one write).
    args: Option<Value>,
    started: Instant,
    hop: Option<String>,
    /// The recordings the call made.
    recordings: Vec<String>,
    done: bool,
}

impl Record<'_> {
    fn write(&mut self, end: &CallEnd) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let result = match end {
            CallEnd::Ok(_) => "ok",
            CallEnd::Failed(_) => "error",
            CallEnd::InvalidParams(_) | CallEnd::Invalid(_) => "invalid",
            CallEnd::Denied(_) => "denied",
            CallEnd::Cancelled => "cancelled",
        };
        metrics::counter!("idpool_mcp_calls_total", "tool" => self.label, "result" => result)
            .increment(1);
        metrics::histogram!("idpool_mcp_call_duration_seconds", "tool" => self.label)
            .record(self.started.elapsed().as_secs_f64());
        let Some(audit) = &self.core.audit else {
            return;
        };
        let (ok, error) = match end {
            CallEnd::Ok(_) => (true, None),
            CallEnd::Failed(f) | CallEnd::Invalid(f) => {
                (false, Some(crate::auth::audit::redact_text(&f.message)))
            }
            CallEnd::InvalidParams(m) => (false, Some(crate::auth::audit::redact_text(m))),
            CallEnd::Denied(d) => (false, Some(d.to_string())),
            CallEnd::Cancelled => (false, Some("cancelled by the client".into())),
        };
        let by = match end {
            CallEnd::Ok(o) => o.provenance,
            _ => None,
        };
        let ctx = self.ctx;
        audit.record(&AuditRecord {
            ts: crate::events::now_rfc3339(),
            principal: ctx.principal.name.clone(),
            role: ctx.principal.role.to_string(),
            transport: ctx.principal.transport.to_string(),
            session: ctx.session.clone(),
            method: "tools/call".into(),
            tool: Some(self.tool.to_string()),
            args: self.args.take().unwrap_or(Value::Null),
            ok,
            error,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            slot: by.map(|b| b.slot),
            tier: by.map(|b| b.tier),
            attempts: by.map(|b| b.attempts),
            hop: self.hop.take(),
            recordings: std::mem::take(&mut self.recordings),
        });
    }
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        self.write(&CallEnd::Cancelled);
    }
}

impl Core {
    /// `keys`: `None` when there is no keys file (loopback-only, anonymous role).
    pub fn new(
        pool: Pool,
        settings: ServerConfig,
        keys: Option<Keys>,
        audit: Option<AuditLog>,
    ) -> Arc<Core> {
        Arc::new(Core {
            pool,
            settings,
            keys: RwLock::new(keys),
            audit,
            in_flight: AtomicUsize::new(0),
            drained: tokio::sync::Notify::new(),
            draining: AtomicBool::new(false),
            stop_calls: CancellationToken::new(),
            peers: parking_lot::Mutex::new(Vec::new()),
            cursors: Cursors::default(),
            listeners: parking_lot::Mutex::new(Vec::new()),
            next_listener: std::sync::atomic::AtomicU64::new(0),
            closing: CancellationToken::new(),
        })
    }

    /// Refuse new calls from now on (SIGTERM).
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.closing.cancel();
    }

    /// Resolves when the daemon begins to shut down.
    pub async fn closing(&self) {
        self.closing.cancelled().await;
    }

    /// Remember a `subscriptions/listen` stream for tool-list changes; its
    /// number, for [`Core::remove_listener`] when the stream ends.
    pub fn add_listener(&self, sink: rmcp::service::SubscriptionSink) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners.lock().push((id, sink));
        id
    }

    /// Forget the stream `id` (it ended).
    pub fn remove_listener(&self, id: u64) {
        self.listeners.lock().retain(|(n, _)| *n != id);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Calls running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Wait until no call runs (or `limit` passes); `true` when drained.
    pub async fn wait_drained(&self, limit: std::time::Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.drained.notified();
                if self.in_flight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }

    /// End every running call with a clear error (the grace is over).
    pub fn cancel_calls(&self) {
        self.stop_calls.cancel();
    }

    /// Remember a connected client for `notifications/tools/list_changed`.
    pub fn add_peer(&self, peer: rmcp::Peer<rmcp::RoleServer>) {
        let mut peers = self.peers.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// Tell every connected client that the tool list changed; returns how many.
    pub async fn notify_tools_changed(&self) -> usize {
        let peers: Vec<_> = {
            let mut peers = self.peers.lock();
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        let mut told = 0;
        for p in peers {
            if tokio::time::timeout(
                std::time::Duration::from_secs(2),
                p.notify_tool_list_changed(),
            )
            .await
            .is_ok_and(|r| r.is_ok())
            {
                told += 1;
            }
        }
        // Each stream removes itself when it ends; one that fails here has
        // ended too.
        let listeners: Vec<_> = self.listeners.lock().clone();
        for (id, l) in listeners {
            let sent = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                l.notify_tool_list_changed(),
            )
            .await;
            match sent {
                Ok(Ok(())) => told += 1,
                Ok(Err(_)) => self.remove_listener(id),
                // Slow to read: told again next time.
                Err(_) => {}
            }
        }
        told
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn settings(&self) -> &ServerConfig {
        &self.settings
    }

    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The keys loaded now (empty without a keys file).
    pub fn key_entries(&self) -> Vec<crate::auth::KeyEntry> {
        self.keys
            .read()
            .as_ref()
            .map(|k| k.entries().to_vec())
            .unwrap_or_default()
    }

    /// Whether callers must present a key.
    pub fn keys_required(&self) -> bool {
        self.keys.read().is_some()
    }

    /// Replace the keys (SIGHUP).
    pub fn set_keys(&self, keys: Option<Keys>) {
        *self.keys.write() = keys;
    }

    /// Whether `who` (a key's name and role, or the anonymous caller) is still
    /// valid under the keys loaded now; long-lived streams end when not.
    pub fn still_valid(&self, who: &Principal) -> bool {
        match self.keys.read().as_ref() {
            None => who.name == "anonymous",
            // A key whose grants changed is a new caller: its streams end.
            Some(k) => k
                .entries()
                .iter()
                .any(|e| e.name == who.name && e.role >= who.role && *e.grant == *who.grants),
        }
    }

    /// The principal a presented key stands for; with no keys file, the
    /// anonymous loopback caller. `Err` carries the 401 message.
    pub fn authenticate(
        &self,
        key: Option<&str>,
        transport: &'static str,
    ) -> Result<Principal, String> {
        let keys = self.keys.read();
        match (keys.as_ref(), key) {
            (None, _) => Ok(Principal::new(
                "anonymous",
                self.settings.anonymous_role,
                transport,
            )),
            (Some(_), None) => {
                Err("an API key is required (Authorization: Bearer KEY or x-api-key: KEY)".into())
            }
            (Some(k), Some(presented)) => k
                .verify(presented)
                .map(|e| {
                    Principal::new(e.name.clone(), e.role, transport).with_grants(e.grant.clone())
                })
                .ok_or_else(|| "the API key is not valid (unknown or revoked)".into()),
        }
    }

    /// Write down a request that is not a tool call: a refusal (401, 403:
    /// `who` is `None` when no key was valid; the key itself is never
    /// written), a `resources/read` or `prompts/get`, a GET of the API.
    pub fn audit_request(
        &self,
        who: Option<&Principal>,
        transport: &str,
        method: &str,
        error: Option<&str>,
    ) {
        let Some(audit) = &self.audit else {
            return;
        };
        audit.record(&AuditRecord {
            ts: crate::events::now_rfc3339(),
            principal: who.map_or_else(|| "unknown".to_string(), |p| p.name.clone()),
            role: who.map_or_else(|| "none".to_string(), |p| p.role.to_string()),
            transport: who.map_or(transport, |p| p.transport).to_string(),
            session: None,
            method: crate::auth::audit::redact_text(method),
            tool: None,
            args: Value::Null,
            ok: error.is_none(),
            error: error.map(crate::auth::audit::redact_text),
            duration_ms: 0,
            slot: None,
            tier: None,
            attempts: None,
            hop: None,
            recordings: Vec::new(),
        });
    }

    /// The tools `role` may call.
    /// The tools `who` may call (its role, and its grants' tools).
    pub fn tools_for(&self, who: &crate::auth::Principal) -> Vec<Value> {
        catalog::tools_of(&self.pool, who, self.settings.max_answer_chars)
    }

    /// Gate, run and audit one tool call.
    pub async fn call_tool(
        &self,
        ctx: &CallContext,
        tool: &str,
        mut args: Value,
        progress: Option<Progress>,
        cancel: CancellationToken,
    ) -> CallEnd {
        let spec = tools::find(tool);
        let mut record = Record {
            core: self,
            ctx,
            tool,
            label: spec.map_or("unknown", |s| s.name),
            args: Some(crate::auth::audit::redact(&args)),
            started: Instant::now(),
            hop: ctx.hop.as_ref().map(|n| format!("from {n}")),
            recordings: Vec::new(),
            done: false,
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let _counted = InFlight(self);
        // The dispatcher's budget arguments, out of the tool's own.
        let (ask, bad_budget) = match spec {
            Some(s) if s.budget == Budget::Items => {
                match budget::take(&mut args, self.answer_chars()) {
                    Ok(a) => (Some(a), None),
                    Err(e) => (None, Some(e)),
                }
            }
            _ => (None, None),
        };
        let end = match spec {
            None => CallEnd::InvalidParams(format!("unknown tool `{tool}`")),
            Some(spec) => match authorize(&ctx.principal, tool, spec.role)
                .and_then(|()| self.grant_scope(ctx, spec, tool, &args))
            {
                Err(d) => CallEnd::Denied(d),
                Ok(_) if let Some(e) = &bad_budget => CallEnd::Invalid(Failure::of(e)),
                Ok(_)
                    if let Some(a) = &ask
                        && let Some(cursor) = &a.cursor =>
                {
                    self.next_piece(ctx, tool, cursor, a.max_chars)
                }
                Ok(_) if self.is_draining() => CallEnd::Failed(Failure::internal(
                    "the daemon is shutting down and takes no new calls; retry once it is back"
                        .into(),
                )),
                Ok(_)
                    if ctx.hop.is_none()
                        && let Some((node, end)) =
                            self.try_forward(ctx, tool, &args, false).await =>
                {
                    record.hop = Some(format!("to {node}"));
                    end
                }
                Ok(scope) => {
                    // In a fleet, a call that waited here past the queue
                    // limit may still be served elsewhere.
                    let keep = (self.pool.leases().fleet().is_some() && ctx.hop.is_none())
                        .then(|| args.clone());
                    let (end, made) = crate::lease::recordings::collecting(
                        self.run_here(ctx, spec, tool, args, scope, progress, cancel),
                    )
                    .await;
                    let end = with_recordings(end, &made);
                    record.recordings = made;
                    match (&end, keep) {
                        // Waited past the queue limit, or none of this
                        // daemon's identities is granted to the key.
                        (CallEnd::Failed(f), Some(args))
                            if queue_full(f) || f.kind == ErrorKind::NotGranted =>
                        {
                            match self.try_forward(ctx, tool, &args, true).await {
                                Some((node, forwarded)) => {
                                    record.hop = Some(format!("to {node}"));
                                    forwarded
                                }
                                None => end,
                            }
                        }
                        _ => end,
                    }
                }
            },
        };
        let end = match (end, ask) {
            // Cut here, where the caller is: a forwarded call's answer is
            // cut by the daemon that forwarded it.
            (CallEnd::Ok(o), Some(ask)) if ctx.hop.is_none() && ask.cursor.is_none() => {
                self.within_budget(ctx, tool, o, ask.max_chars)
            }
            (end, _) => end,
        };
        record.write(&end);
        end
    }

    /// The budget of a call that sets none: `server.max_answer_chars`.
    fn answer_chars(&self) -> usize {
        self.settings.max_answer_chars
    }

    /// `o` within `max` characters: whole, or its first piece with a
    /// cursor for the rest.
    fn within_budget(
        &self,
        ctx: &CallContext,
        tool: &str,
        o: tools::Output,
        max: usize,
    ) -> CallEnd {
        match budget::fit(o.body, max) {
            budget::Fit::Whole { body, text } => CallEnd::Ok(tools::Output {
                body,
                provenance: o.provenance,
                text,
            }),
            budget::Fit::Cut {
                mut piece,
                next,
                whole,
            } => {
                if let Some(at) = next {
                    let bytes = budget::json_chars(&whole);
                    match self.cursors.keep(&owner_of(ctx), tool, whole, bytes, &at) {
                        Some(cursor) => piece["next_cursor"] = Value::String(cursor),
                        None => {
                            piece["piece"]["note"] = Value::String(
                                "the whole answer is too large to keep for a cursor: narrow the call, or raise max_chars".into(),
                            );
                        }
                    }
                }
                metrics::counter!("idpool_answer_pieces_total").increment(1);
                CallEnd::Ok(tools::Output {
                    body: piece,
                    provenance: o.provenance,
                    text: None,
                })
            }
        }
    }

    /// The piece of a kept answer a `cursor` asks for.
    fn next_piece(&self, ctx: &CallContext, tool: &str, cursor: &str, max_chars: usize) -> CallEnd {
        match self.cursors.find(&owner_of(ctx), tool, cursor) {
            Err(u) => CallEnd::Invalid(Failure::of(&crate::error::Error::new(
                ErrorKind::InvalidArgument,
                u.0,
            ))),
            Ok((whole, at)) => {
                let (mut piece, next) = budget::piece(&whole, max_chars, &at);
                if let Some(at) = next {
                    piece["next_cursor"] = Value::String(Cursors::next_token(cursor, &at));
                }
                CallEnd::Ok(tools::Output::plain(piece))
            }
        }
    }
}

/// Whose cursors a call may follow: its key's.
fn owner_of(ctx: &CallContext) -> String {
    format!("{}/{}", ctx.principal.name, ctx.principal.role)
}

impl Core {
    /// In a fleet: when none of this daemon's identities is admitted for the
    /// call's strategy (all resting or held elsewhere; for an operation that
    /// needs a signed-in identity, none signed in), or the call already
    /// waited here past the queue limit (`after_local`), run it on a daemon
    /// that has one (once: the other side never forwards it again). `None`:
    /// run it (or keep its end) here.
    async fn try_forward(
        &self,
        ctx: &CallContext,
        tool: &str,
        args: &Value,
        after_local: bool,
    ) -> Option<(String, CallEnd)> {
        let fleet = self.pool.leases().fleet()?;
        let tools::Route {
            key: strategy,
            login,
        } = tools::route_of(&self.pool, tool, args)?;
        let resting = self.pool.leases().sites().all_resting(&strategy).is_some();
        let signed_out = login
            && self
                .pool
                .leases()
                .sites()
                .may_be_signed_in(&strategy)
                .is_empty();
        if !(resting || signed_out || after_local) {
            return None;
        }
        let sync = self.pool.services().fleet.as_ref()?;
        let target = sync.forward_target(&strategy, login).await?;
        let who = super::forward::OnBehalf {
            principal: &ctx.principal.name,
            role: ctx.principal.role,
            session: ctx.session.as_deref(),
            grants: &ctx.principal.grants,
        };
        let end =
            match super::forward::call(fleet.cluster(), &target.advertise, who, tool, args).await {
                Ok(end) => end.into(),
                Err(m) => CallEnd::Failed(Failure::internal(m)),
            };
        Some((target.node, end))
    }
}

impl Core {
    /// The caller's grants for this call (`None`: it has none), after the
    /// identities the call names are checked against them.
    fn grant_scope(
        &self,
        ctx: &CallContext,
        spec: &tools::Spec,
        tool: &str,
        args: &Value,
    ) -> Result<Option<Arc<Scope>>, crate::auth::Denied> {
        // A call that runs another tool for its caller needs that tool's
        // role and grants too.
        if let Some(other) = spec.also_runs.and_then(|f| f(args))
            && let Some(o) = tools::find(other)
        {
            authorize(&ctx.principal, other, o.role)?;
            crate::auth::scope(&ctx.principal, other, o.role)?;
        }
        let Some(scope) = crate::auth::scope(&ctx.principal, tool, spec.role)? else {
            return Ok(None);
        };
        let caller = super::grants::Caller {
            who: &ctx.principal,
            mcp_session: ctx.session.as_deref(),
        };
        super::grants::check_named(&self.pool, &caller, spec.role, &scope, tool, args)?;
        Ok(Some(Arc::new(scope)))
    }

    /// Run an authorized call on this daemon's own pool.
    #[allow(clippy::too_many_arguments)]
    async fn run_here(
        &self,
        ctx: &CallContext,
        spec: &tools::Spec,
        tool: &str,
        args: Value,
        scope: Option<Arc<Scope>>,
        progress: Option<Progress>,
        cancel: CancellationToken,
    ) -> CallEnd {
        let opts = RunOptions {
            scope,
            progress,
            session: ctx.session.clone(),
            caller: Some(ctx.principal.name.clone()),
            caller_role: Some(ctx.principal.role),
            mask_pii: self
                .pool
                .services()
                .pii
                .mask_for(ctx.principal.role)
                .cloned(),
            answer_chars: self.settings.max_answer_chars,
            ..RunOptions::default()
        };
        tokio::select! {
            r = spec.call(&self.pool, args, &opts) => match r {
                Ok(v) => CallEnd::Ok(v),
                Err(e) if e.kind() == ErrorKind::InvalidArgument => {
                    CallEnd::Invalid(Failure::of(&e))
                }
                Err(e) => CallEnd::Failed(Failure::of(&e)),
            },
            () = cancel.cancelled() => CallEnd::Cancelled,
            () = self.stop_calls.cancelled() => CallEnd::Failed(Failure::internal(format!(
                "cancelled: the daemon shut down before `{tool}` finished \
                 (server.shutdown_grace_secs = {})",
                self.settings.shutdown_grace_secs
            ))),
        }
    }
}

/// The call's recordings in its answer: `recordings` in the result, or in
/// a failure's facts.
fn with_recordings(end: CallEnd, made: &[String]) -> CallEnd {
    if made.is_empty() {
        return end;
    }
    match end {
        CallEnd::Ok(mut o) => {
            if let Some(body) = o.body.as_object_mut() {
                body.insert("recordings".into(), serde_json::json!(made));
            }
            CallEnd::Ok(o)
        }
        CallEnd::Failed(mut f) => {
            f.recordings = made.to_vec();
            CallEnd::Failed(f)
        }
        CallEnd::Invalid(mut f) => {
            f.recordings = made.to_vec();
            CallEnd::Invalid(f)
        }
        other => other,
    }
}

/// A call that waited for a slot here past `http.max_queue_wait_secs`.
fn queue_full(f: &Failure) -> bool {
    f.kind == ErrorKind::Busy
}
