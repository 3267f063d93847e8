//! Logging a slot in by hand: a person signs the identity in on the site,
//! in the slot's own browser, while the daemon watches for the strategy's
//! `[session.logged_in]` markers.
//!
//! [`Logins::start`] leases the slot for the strategy and holds the lease
//! and the slot's browser (its turn) for the whole session: the strategy's
//! `login_url` opens through [`crate::lease::Lease::hold_browser`] (the
//! guard, robots, pacing, metrics, like every navigation), the person's
//! later navigations leave through the slot's guarded egress. It starts
//! the tab's screencast and waits: frames go to every live-view watcher,
//! their clicks, scrolls and keys come back into the tab, and every half
//! second the page is judged. It ends when the page shows the identity
//! signed in, at the timeout, after `idle` without input, or when
//! cancelled; whatever the end, the browser's cookies for the strategy go
//! back into the jar, which is saved. A person solves what a site asks of a
//! person (a one-off CAPTCHA, a consent dialog) here; the daemon never
//! does.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};
use crate::identity::browser::live::{self, Input};
use crate::lease::Leases;
use crate::strategy::{Body, LoginState, Outcome, Strategy};

/// One screencast frame.
#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    /// base64 JPEG.
    pub data: String,
    /// The page's size in CSS pixels (input coordinates are in these).
    pub width: f64,
    pub height: f64,
}

/// Where a login session stands.
#[derive(Debug, Clone, Serialize)]
pub struct LiveStatus {
    /// `starting`, `waiting`, then `logged_in`, `timed_out`, `idle`,
    /// `cancelled` or `failed`.
    pub state: &'static str,
    pub done: bool,
    pub error: Option<String>,
    pub frames: u64,
    pub inputs: u64,
    /// Seconds since it started (at the last change).
    pub seconds: u64,
}

/// Limits of one login session.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimits {
    pub timeout: Duration,
    pub idle: Duration,
}

impl Default for LoginLimits {
    fn default() -> Self {
        LoginLimits {
            timeout: Duration::from_secs(600),
            idle: Duration::from_secs(180),
        }
    }
}

/// What a person is asked to do in a live session.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Purpose {
    /// Sign the identity in (an operator opened the session).
    Login,
    /// Clear what the site asks of a person (a captcha, a sign-in wall, a
    /// second factor) for a call that waits (`[handoff]`).
    Handoff {
        /// What the site showed.
        why: String,
    },
}

/// A login session with its live view.
pub struct LiveSession {
    pub id: String,
    pub slot: usize,
    pub strategy: String,
    pub purpose: Purpose,
    pub login_url: String,
    pub started: Instant,
    frames: broadcast::Sender<Arc<Frame>>,
    last: parking_lot::Mutex<Option<Arc<Frame>>>,
    input: mpsc::Sender<Input>,
    status: watch::Sender<LiveStatus>,
    cancel: CancellationToken,
    counts: (AtomicU64, AtomicU64),
    /// The session's recording (`[recording]`), until it is written.
    recording: parking_lot::Mutex<Option<crate::lease::Recording>>,
    /// Its id.
    pub recording_id: Option<String>,
    /// A page the person landed on was one the strategy reads as a block of
    /// the identity (its breaker hears of it when the session ends).
    blocked: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession")
            .field("slot", &self.slot)
            .field("strategy", &self.strategy)
            .finish()
    }
}

impl LiveSession {
    /// Frames from now on, and the latest one so far.
    pub fn watch(&self) -> (broadcast::Receiver<Arc<Frame>>, Option<Arc<Frame>>) {
        (self.frames.subscribe(), self.last.lock().clone())
    }

    /// Hand one input to the tab (dropped when the session is over).
    pub async fn send(&self, input: Input) {
        let _ = self.input.send(input).await;
    }

    pub fn status(&self) -> LiveStatus {
        self.status.borrow().clone()
    }

    /// Wait until the session is over; its last status.
    pub async fn done(&self) -> LiveStatus {
        let mut rx = self.status.subscribe();
        let _ = rx.wait_for(|s| s.done).await;
        self.status()
    }

    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// The pool's login sessions (finished ones are kept a while for their status).
pub struct Logins {
    leases: Arc<Leases>,
    map: parking_lot::Mutex<HashMap<String, Arc<LiveSession>>>,
    stop: CancellationToken,
}

const KEEP_FINISHED: Duration = Duration::from_secs(600);

impl Logins {
    pub fn new(leases: Arc<Leases>, stop: CancellationToken) -> Arc<Self> {
        Arc::new(Logins {
            leases,
            map: Default::default(),
            stop,
        })
    }

    /// Start logging slot `slot` in on `strategy` by hand.
    pub fn start(
        self: &Arc<Self>,
        slot: usize,
        strategy: &str,
        limits: LoginLimits,
    ) -> Result<Arc<LiveSession>> {
        self.leases.identities().check(slot)?;
        let rules = self.leases.strategy(strategy).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("unknown strategy `{strategy}`"),
            )
            .retryable(false)
        })?;
        let url = rules
            .login()
            .and_then(|l| l.login_url.clone())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("strategy `{strategy}` has no [session] login_url"),
                )
                .retryable(false)
            })?;
        let (session, input_rx) = self.register(slot, strategy, &url, Purpose::Login)?;
        // The person's hold, from now: the cascade sends no browser work to
        // this slot while the session is open.
        let person = self.leases.identities().hold_for_person(slot)?;
        let (logins, me) = (self.clone(), session.clone());
        tokio::spawn(async move {
            let end = logins.run(slot, &rules, url, &me, input_rx, limits).await;
            drop(person);
            logins.ended(&me, end).await;
        });
        Ok(session)
    }

    /// A live session of `purpose` on `slot`, registered (its watchers
    /// find it by id) with its recording begun; the person's input comes
    /// out of the receiver. Refused while the slot has one open. A
    /// hand-off's session is then driven by [`Logins::clear`].
    pub fn register(
        &self,
        slot: usize,
        strategy: &str,
        url: &url::Url,
        purpose: Purpose,
    ) -> Result<(Arc<LiveSession>, mpsc::Receiver<Input>)> {
        let mut sessions = self.map.lock();
        sessions.retain(|_, v| !v.status().done || v.started.elapsed() < KEEP_FINISHED);
        if sessions
            .values()
            .any(|v| v.slot == slot && !v.status().done)
        {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("slot {slot} has a live session open already (a person signing in, or another hand-off)"),
            )
            .retryable(false));
        }
        let (status, _) = watch::channel(LiveStatus {
            state: "starting",
            done: false,
            error: None,
            frames: 0,
            inputs: 0,
            seconds: 0,
        });
        let (input_tx, input_rx) = mpsc::channel(64);
        let store = self.leases.recordings();
        // A person signing an identity in is recorded unless `when = "never"`.
        let recording = store.wants(true).then(|| {
            store.begin(crate::lease::Subject {
                kind: crate::lease::RecordingKind::Live,
                slot,
                strategy: strategy.to_string(),
                key: None,
            })
        });
        let recording_id = recording.as_ref().map(|r| r.id().to_string());
        let session = Arc::new(LiveSession {
            id: format!("{:032x}", rand::random::<u128>()),
            slot,
            strategy: strategy.to_string(),
            purpose,
            login_url: url.to_string(),
            started: Instant::now(),
            frames: broadcast::channel(8).0,
            last: parking_lot::Mutex::new(None),
            input: input_tx,
            status,
            cancel: self.stop.child_token(),
            counts: (AtomicU64::new(0), AtomicU64::new(0)),
            blocked: std::sync::atomic::AtomicBool::new(false),
            recording: parking_lot::Mutex::new(recording),
            recording_id,
        });
        sessions.insert(session.id.clone(), session.clone());
        Ok((session, input_rx))
    }

    /// End `me` at once as `cancelled` (the call that waited for it went
    /// away): its status, and its recording written in the background.
    pub fn abandon(&self, me: &LiveSession) {
        if me.status().done {
            return;
        }
        me.cancel();
        let rec = me.recording.lock().take();
        if let Some(rec) = rec {
            rec.tape
                .action("end", "cancelled: the call that waited went away");
            let store = self.leases.recordings().clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Err(e) = store.finish(rec).await {
                        tracing::warn!(error = %e, "cannot write the live view's recording");
                    }
                });
            }
        }
        me.set(
            "cancelled",
            true,
            Some("the call that waited for a person went away".into()),
        );
    }

    /// A session's end: its recording written, the event, its status.
    async fn ended(&self, me: &LiveSession, end: Result<&'static str>) {
        let logins = self;
        {
            let rec = me.recording.lock().take();
            if let Some(rec) = rec {
                rec.tape.action(
                    "end",
                    match &end {
                        Ok(state) => (*state).to_string(),
                        Err(e) => format!("failed: {}", e.message()),
                    },
                );
                if let Err(e) = logins.leases.recordings().finish(rec).await {
                    tracing::warn!(slot = me.slot, error = %e, "cannot write the live view's recording");
                }
            }
            let (state, error) = match end {
                Ok(state) => (state, None),
                Err(e) => ("failed", Some(e.to_string())),
            };
            tracing::info!(slot = me.slot, strategy = %me.strategy, state, purpose = ?me.purpose, error = error.as_deref().unwrap_or(""), "live session ended");
            if matches!(me.purpose, Purpose::Login) {
                logins.leases.events().emit(
                    "login_session",
                    Some(me.slot),
                    Some(&me.strategy),
                    serde_json::json!({"state": state, "seconds": me.started.elapsed().as_secs(), "error": error}),
                );
            }
            me.set(state, true, error);
        }
    }

    /// A hand-off: the page at `url`, which showed what `session` asks a
    /// person to clear, opens in the slot's browser through `lease` (the
    /// call's own); the session's watchers see it and act in it until the
    /// page reads clear, or, with `sign_in` (a sign-in wall; `url` is where
    /// the strategy signs in), shows the identity signed in (or `limits`
    /// end it). Whatever the end, the browser's cookies for the strategy go
    /// into the jar. `cleared`, `logged_in`, `timed_out`, `idle` or
    /// `cancelled`.
    pub async fn clear(
        &self,
        lease: &dyn crate::lease::HeldLease,
        session: &Arc<LiveSession>,
        mut input: mpsc::Receiver<Input>,
        (url, sign_in): (url::Url, bool),
        limits: LoginLimits,
    ) -> Result<&'static str> {
        let end = self
            .clearing(lease, session, &mut input, (url, sign_in), limits)
            .await;
        let state = match &end {
            Ok(s) => Ok(*s),
            Err(e) => Err(Error::new(e.kind(), e.message().to_string())),
        };
        self.ended(session, state).await;
        end
    }

    async fn clearing(
        &self,
        lease: &dyn crate::lease::HeldLease,
        me: &LiveSession,
        input: &mut mpsc::Receiver<Input>,
        (url, sign_in): (url::Url, bool),
        limits: LoginLimits,
    ) -> Result<&'static str> {
        let identities = self.leases.identities();
        let slot = identities.check(me.slot)?;
        let strategy = self.leases.strategy(&me.strategy).ok_or_else(|| {
            Error::not_found(format!(
                "strategy `{}` is gone (reloaded away)",
                me.strategy
            ))
        })?;
        let person = identities.hold_for_person(slot)?;
        let (mut turn, tab, outcome) = lease.open_for_person(url).await?;
        let end = if sign_in {
            self.watch(slot, &strategy, me, input, limits, &tab, Goal::SignIn)
                .await
        } else if wants_person(outcome) {
            self.watch(slot, &strategy, me, input, limits, &tab, Goal::Clear)
                .await
        } else {
            // Clear already (the wall lifted meanwhile).
            Ok("cleared")
        };
        live::stop(&tab).await;
        let cookies = match turn.running().await {
            Ok((browser, _)) => {
                crate::identity::browser::page::pull_cookies(browser, strategy.cookie_domain())
                    .await
            }
            Err(e) => Err(e),
        };
        drop(turn);
        drop(person);
        let jar = identities.jar(slot)?;
        jar.import(&cookies?);
        jar.save()?;
        end
    }

    /// Whether slot `slot` has a login session open.
    pub fn open_on(&self, slot: usize) -> bool {
        self.map
            .lock()
            .values()
            .any(|s| s.slot == slot && !s.status().done)
    }

    /// A login session by its id.
    pub fn get(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.map.lock().get(id).cloned()
    }

    async fn run(
        &self,
        slot: usize,
        strategy: &Arc<dyn Strategy>,
        url: url::Url,
        me: &LiveSession,
        mut input: mpsc::Receiver<Input>,
        limits: LoginLimits,
    ) -> Result<&'static str> {
        let lease = self
            .leases
            .next_slot(strategy.name(), Some(slot), None)
            .await?;
        let (end, cookies) = match lease.hold_browser(url).await {
            Ok((mut turn, tab, fetched)) => {
                drop(fetched);
                let end =
                    (self.watch(slot, strategy, me, &mut input, limits, &tab, Goal::SignIn)).await;
                live::stop(&tab).await;
                // Whatever the end, what the site set goes into the jar.
                let cookies = match turn.running().await {
                    Ok((browser, _)) => {
                        let domain = strategy.cookie_domain();
                        crate::identity::browser::page::pull_cookies(browser, domain).await
                    }
                    Err(e) => Err(e),
                };
                (end, Some(cookies))
            }
            Err(e) => (Err(e), None),
        };
        let outcome = match &end {
            Ok("logged_in") => Outcome::Ok,
            // The site blocked the identity on a page the person reached.
            _ if me.blocked.load(Ordering::Relaxed) => Outcome::HardBlock,
            Ok(_) => Outcome::Skipped,
            Err(_) => Outcome::Failed,
        };
        lease.finish(outcome);
        let Some(cookies) = cookies else {
            return end;
        };
        let jar = self.leases.identities().jar(slot)?.clone();
        jar.import(&cookies?);
        jar.save()?;
        end
    }

    /// The session's loop: frames out, input in, the page judged twice a second.
    #[allow(clippy::too_many_arguments)]
    async fn watch(
        &self,
        slot: usize,
        strategy: &Arc<dyn Strategy>,
        me: &LiveSession,
        input: &mut mpsc::Receiver<Input>,
        limits: LoginLimits,
        tab: &chromiumoxide::Page,
        goal: Goal,
    ) -> Result<&'static str> {
        let tape = me.recording.lock().as_ref().map(|r| r.tape.clone());
        let listening = match &tape {
            Some(t) => {
                t.action(
                    "navigate",
                    crate::identity::browser::tape::without_credentials(&me.login_url),
                );
                crate::identity::browser::tape::listen(tab, t.clone())
                    .await
                    .ok()
            }
            None => None,
        };
        let end = self
            .watch_frames(
                slot,
                strategy,
                me,
                input,
                limits,
                tab,
                (tape.as_deref(), goal),
            )
            .await;
        if let Some(l) = listening {
            l.stop().await;
        }
        end
    }

    #[allow(clippy::too_many_arguments)]
    async fn watch_frames(
        &self,
        slot: usize,
        strategy: &Arc<dyn Strategy>,
        me: &LiveSession,
        input: &mut mpsc::Receiver<Input>,
        limits: LoginLimits,
        tab: &chromiumoxide::Page,
        (tape, goal): (Option<&crate::identity::browser::tape::Tape>, Goal),
    ) -> Result<&'static str> {
        let page_limit = self.leases.identities().browser(slot)?.page_limit();
        let mut frames = live::start(tab, 1280).await?;
        me.set("waiting", false, None);
        let deadline = Instant::now() + limits.timeout;
        let mut last_input = Instant::now();
        let mut check = tokio::time::interval(Duration::from_millis(500));
        // The page last judged: each new one the person reaches is the
        // slot's request, on the recording, and judged (not paced: a
        // person sets their own pace).
        let mut judged: Option<String> = None;
        loop {
            tokio::select! {
                f = frames.next() => match f {
                    Some(f) => {
                        live::ack(tab, f.session_id).await;
                        // Chromium sends the JPEG base64-encoded: passed on as it is.
                        let frame = Arc::new(Frame {
                            data: f.data.clone().into(),
                            width: f.metadata.device_width,
                            height: f.metadata.device_height,
                        });
                        if let Some(t) = tape {
                            let b64: &str = f.data.as_ref();
                            if let Ok(jpeg) = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64) {
                                t.frame(jpeg.into());
                            }
                        }
                        *me.last.lock() = Some(frame.clone());
                        let _ = me.frames.send(frame);
                        me.counts.0.fetch_add(1, Ordering::Relaxed);
                    }
                    None => break Err(Error::new(ErrorKind::Network, "the tab went away")),
                },
                i = input.recv() => if let Some(i) = i {
                    if let Some(t) = tape {
                        t.action("input", i.logged());
                    }
                    live::dispatch(tab, &i).await?;
                    last_input = Instant::now();
                    me.counts.1.fetch_add(1, Ordering::Relaxed);
                },
                _ = check.tick() => {
                    let html = crate::identity::browser::page::content(tab, page_limit)
                        .await
                        .map(|(html, _)| html)
                        .unwrap_or_default();
                    let at = tab.url().await.ok().flatten().unwrap_or_default();
                    let body = Body::html_page(&html);
                    if at.starts_with("http") && judged.as_deref() != Some(at.as_str()) && !html.is_empty() {
                        self.leases.identities().count_page(slot);
                        if let Some(t) = tape {
                            t.action("loaded", crate::identity::browser::tape::without_credentials(&at));
                        }
                        if strategy.classify(200, &at, &body) == Outcome::HardBlock {
                            me.blocked.store(true, Ordering::Relaxed);
                        }
                        judged = Some(at.clone());
                    }
                    match goal {
                        Goal::SignIn => if let Some((LoginState::LoggedIn, why)) = strategy.login_state(200, &at, &body) {
                            self.leases.sites().set_login(slot, strategy.name(), LoginState::LoggedIn, &why);
                            break Ok("logged_in");
                        },
                        Goal::Clear => if !html.is_empty() && !wants_person(strategy.classify(200, &at, &body)) {
                            break Ok("cleared");
                        },
                    }
                    if Instant::now() >= deadline {
                        break Ok("timed_out");
                    }
                    if last_input.elapsed() >= limits.idle {
                        break Ok("idle");
                    }
                    me.set("waiting", false, None);
                },
                () = me.cancel.cancelled() => break Ok("cancelled"),
            }
        }
    }
}

/// What ends a live session's watch.
#[derive(Debug, Clone, Copy)]
enum Goal {
    /// The page shows the identity signed in.
    SignIn,
    /// The page no longer shows what wanted a person.
    Clear,
}

/// What a person is wanted for: a block page (captcha, robot check), a
/// sign-in wall, or a challenge that did not pass by itself.
fn wants_person(o: Outcome) -> bool {
    matches!(
        o,
        Outcome::HardBlock | Outcome::LoginRequired | Outcome::Challenge
    )
}

impl LiveSession {
    /// Publish where the session stands.
    fn set(&self, state: &'static str, done: bool, error: Option<String>) {
        self.status.send_replace(self.snapshot(state, done, error));
    }

    fn snapshot(&self, state: &'static str, done: bool, error: Option<String>) -> LiveStatus {
        LiveStatus {
            state,
            done,
            error,
            frames: self.counts.0.load(Ordering::Relaxed),
            inputs: self.counts.1.load(Ordering::Relaxed),
            seconds: self.started.elapsed().as_secs(),
        }
    }
}
