//! Interactive browser sessions on an identity (the `browser_*` tools): a
//! tab of its own in a slot's Chromium, with the slot's cookies, bound to
//! the caller (API key and MCP session) that opened it. Every operation
//! takes the slot's browser turn (one operation at a time, with the slot's
//! other browser work), every navigation goes through the guard (and
//! robots.txt for hosts no strategy covers) and the slot's egress; the
//! cookies of every site visited go back into the jar when the session
//! closes or idles out.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::identity::browser::tab::{self, Line, RefBook};
use crate::lease::{Leases, Recording, RecordingKind, Subject};
use crate::request::Until;
use crate::routing::Scope;
pub use crate::services::snapshot_view::View;

/// Sessions per slot, and in all.
pub const MAX_PER_SLOT: usize = 2;
pub const MAX_SESSIONS: usize = 16;
/// A session unused this long is closed.
pub const IDLE: Duration = Duration::from_secs(600);

/// Who may use a session: the key that opened it, over the MCP session it
/// was opened in (none for REST callers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub key: Option<String>,
    pub mcp_session: Option<String>,
}

/// One interactive session.
pub struct BrowserSession {
    pub id: String,
    pub slot: usize,
    /// The routing key it was opened for (a strategy, or `web:HOST`).
    pub key: String,
    owner: Owner,
    tab: chromiumoxide::Page,
    /// Its snapshots' refs, its last snapshot, and what was last shown of it.
    seen: parking_lot::Mutex<Seen>,
    /// Hosts visited (their cookies go back to the jar).
    hosts: parking_lot::Mutex<BTreeSet<String>>,
    last_used: parking_lot::Mutex<Instant>,
    /// The session's recording (`[recording]`), filmed from open to close.
    recording: parking_lot::Mutex<Option<Filmed>>,
}

/// What a session's snapshots left.
#[derive(Default)]
struct Seen {
    book: RefBook,
    /// The last snapshot's lines (what `changes_only` compares with).
    last: Option<Vec<Line>>,
    /// What the last step showed (read on in pieces with `start_index`).
    shown: Option<Shown>,
    /// The origin of the page the refs were given on.
    origin: Option<String>,
}

/// What a step shows of the page after it.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    pub url: String,
    pub title: String,
    /// The snapshot as the step's [`View`] shows it.
    pub text: String,
}

/// A session's recording and the filming of its tab.
struct Filmed {
    rec: Recording,
    filming: Option<crate::identity::browser::tape::Filming>,
}

impl BrowserSession {
    /// The id of the session's recording, if it is recorded.
    pub fn recording(&self) -> Option<String> {
        (self.recording.lock().as_ref()).map(|f| f.rec.id().to_string())
    }

    /// Log a step on the recording (typed text never: its length only).
    fn log(&self, kind: &str, detail: impl Into<String>) {
        if let Some(f) = self.recording.lock().as_ref() {
            f.rec.tape.action(kind, detail);
        }
    }
}

/// The interactive sessions open on the pool's slots.
pub struct Browsing {
    leases: Arc<Leases>,
    map: parking_lot::Mutex<HashMap<String, Arc<BrowserSession>>>,
}

/// What one step on a session does.
pub enum Step<'a> {
    Navigate(url::Url),
    Snapshot,
    Click(&'a str),
    Type {
        r#ref: &'a str,
        text: &'a str,
        submit: bool,
    },
    Press(&'a str),
    Select {
        r#ref: &'a str,
        values: &'a [String],
    },
    WaitFor(Until),
    Screenshot {
        full_page: bool,
    },
}

impl Step<'_> {
    /// The step's name in a recording's action log.
    fn kind(&self) -> &'static str {
        match self {
            Step::Navigate(_) => "navigate",
            Step::Snapshot => "snapshot",
            Step::Click(_) => "click",
            Step::Type { .. } => "type",
            Step::Press(_) => "press",
            Step::Select { .. } => "select",
            Step::WaitFor(_) => "wait",
            Step::Screenshot { .. } => "screenshot",
        }
    }

    /// What the action log says of it: never the typed text.
    fn logged(&self) -> String {
        match self {
            Step::Navigate(u) => crate::identity::browser::tape::without_credentials(u.as_str()),
            Step::Snapshot | Step::Screenshot { .. } => String::new(),
            Step::Click(r) => format!("ref {r}"),
            Step::Type {
                r#ref,
                text,
                submit,
            } => format!(
                "ref {}: {} characters typed (not recorded){}",
                r#ref,
                text.chars().count(),
                if *submit { ", then Enter" } else { "" }
            ),
            Step::Press(k) => (*k).to_string(),
            Step::Select { r#ref, values } => format!("ref {}: {} option(s)", r#ref, values.len()),
            Step::WaitFor(u) => format!("{u:?}"),
        }
    }
}

/// What a step leaves: the page's snapshot after it (a screenshot instead
/// for `Screenshot`), and what a select chose.
pub struct Stepped {
    /// The session's slot, which the step acted as.
    pub slot: usize,
    pub snapshot: Option<Shown>,
    pub png: Option<Vec<u8>>,
    pub selected: Vec<String>,
}

impl Browsing {
    pub fn new(leases: Arc<Leases>) -> Self {
        Browsing {
            leases,
            map: Default::default(),
        }
    }

    /// Open a session on `slot` (or a slot the router admits for `url`'s
    /// strategy), at `url` if given.
    pub async fn open(
        &self,
        url: Option<url::Url>,
        strategy: Option<&str>,
        slot: Option<usize>,
        owner: Owner,
        scope: Option<&Scope>,
        view: &View,
    ) -> Result<(Arc<BrowserSession>, Option<Shown>)> {
        // Refused before a browser is taken (each hop is judged again).
        if let Some(u) = &url {
            self.leases.guard().check_static(u)?;
        }
        let key = match (&url, strategy) {
            (_, Some(s)) => {
                self.leases
                    .registry()
                    .get(s)
                    .ok_or_else(|| Error::not_found(format!("unknown strategy `{s}`")))?;
                s.to_string()
            }
            (Some(u), None) => match self.leases.strategy_for(u) {
                Some(s) => s.name().to_string(),
                None => crate::routing::web_key(u.host_str().unwrap_or_default()),
            },
            (None, None) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "give `url` or `strategy`",
                ));
            }
        };
        // The router picks an admitted identity (breakers, proxies); the
        // lease itself is handed back at once.
        let slot = self.leases.next_slot(&key, slot, scope).await?.slot();
        {
            let map = self.map.lock();
            if map.len() >= MAX_SESSIONS
                || map.values().filter(|s| s.slot == slot).count() >= MAX_PER_SLOT
            {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "slot {slot} has {MAX_PER_SLOT} browser sessions open (or the pool {MAX_SESSIONS}): close one first"
                    ),
                ));
            }
        }
        let browser = self.leases.identities().browser(slot)?;
        let tab = browser.turn().await?.open_tab().await?;
        let store = self.leases.recordings();
        let recording = match store.wants(self.leases.sites().signed_in(slot, &key)) {
            true => {
                let rec = store.begin(Subject {
                    kind: RecordingKind::Session,
                    slot,
                    strategy: key.clone(),
                    key: owner.key.clone(),
                });
                rec.tape
                    .action("open", format!("browser session on slot {slot}"));
                let filming =
                    match crate::identity::browser::tape::film(&tab, rec.tape.clone()).await {
                        Ok(f) => Some(f),
                        Err(e) => {
                            rec.tape
                                .action("error", format!("cannot film the tab: {}", e.message()));
                            None
                        }
                    };
                crate::lease::recordings::note(rec.id());
                Some(Filmed { rec, filming })
            }
            false => None,
        };
        let session = Arc::new(BrowserSession {
            id: uuid::Uuid::new_v4().simple().to_string(),
            slot,
            key,
            owner,
            tab,
            seen: Default::default(),
            hosts: Default::default(),
            last_used: parking_lot::Mutex::new(Instant::now()),
            recording: parking_lot::Mutex::new(recording),
        });
        self.map.lock().insert(session.id.clone(), session.clone());
        let first = match url {
            Some(u) => match self
                .step(&session.id, &session.owner, Step::Navigate(u), scope, view)
                .await
            {
                Ok(s) => s.snapshot,
                Err(e) => {
                    let _ = self.close(&session.id, &session.owner).await;
                    return Err(e);
                }
            },
            None => None,
        };
        Ok((session, first))
    }

    /// The session `id` if `owner` may use it (to anyone else it does not exist).
    fn session(&self, id: &str, owner: &Owner) -> Result<Arc<BrowserSession>> {
        let map = self.map.lock();
        match map.get(id) {
            Some(s) if s.owner == *owner => Ok(s.clone()),
            _ => Err(Error::not_found(format!(
                "no browser session `{id}` for this caller (it closed, idled out after {} s, or belongs to another key or MCP session)",
                IDLE.as_secs()
            ))),
        }
    }

    /// One step on a session, in the slot's browser turn.
    /// `scope`: the caller's grants for the step's tool (a navigation goes
    /// only where they cover the session's identity).
    pub async fn step(
        &self,
        id: &str,
        owner: &Owner,
        step: Step<'_>,
        scope: Option<&Scope>,
        view: &View,
    ) -> Result<Stepped> {
        let session = self.session(id, owner)?;
        *session.last_used.lock() = Instant::now();
        if let Some(rec) = session.recording() {
            crate::lease::recordings::note(&rec);
        }
        session.log(step.kind(), step.logged());
        let identities = self.leases.identities();
        let browser = identities.browser(session.slot)?;
        let t = &session.tab;
        // What may load a page goes through a lease on the session's slot,
        // taken before the browser's turn (as every call takes them): the
        // guard, the grants, robots, pacing, the judgement and the breaker.
        let here = (t.url().await.ok().flatten())
            .and_then(|u| url::Url::parse(&u).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"));
        let lease = match (&step, &here) {
            (Step::Navigate(url), _) => Some(
                self.leases
                    .lease_for(url, Some(session.slot), scope)
                    .await?,
            ),
            (
                Step::Click(_) | Step::Type { .. } | Step::Press(_) | Step::Select { .. },
                Some(u),
            ) => Some(self.leases.lease_for(u, Some(session.slot), scope).await?),
            (Step::Click(_) | Step::Type { .. } | Step::Press(_) | Step::Select { .. }, None) => {
                Some(
                    self.leases
                        .next_slot(&session.key, Some(session.slot), scope)
                        .await?,
                )
            }
            // A step that only reads the page: the page must be one the
            // caller may see (a script may have moved the tab since).
            (_, Some(u)) => {
                if let Err(e) = self.leases.granted(u, session.slot, scope) {
                    tab::blank(t).await;
                    return Err(e);
                }
                None
            }
            (_, None) => None,
        };
        let deadline = Instant::now() + Duration::from_secs(browser.op_timeout_secs());
        let mut turn = browser.turn().await?;
        // Focus, keys and rendering follow the tab in front (the working
        // tab may have been recycled in front of it meanwhile).
        t.bring_to_front().await.map_err(|_| {
            Error::new(
                ErrorKind::NotFound,
                format!("the tab of browser session `{id}` is gone (its browser restarted); open a new session"),
            )
        })?;
        let node = |r: &str| {
            session.seen.lock().book.get(r).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "no element `{r}` in this session's snapshots; take a snapshot and use its refs"
                    ),
                )
            })
        };
        let mut out = Stepped {
            slot: session.slot,
            snapshot: None,
            png: None,
            selected: Vec::new(),
        };
        match step {
            Step::Navigate(url) => {
                let lease = lease.ok_or_else(|| {
                    Error::new(ErrorKind::Internal, "a navigation without its lease")
                })?;
                let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
                let cookies = identities.jar(session.slot)?.export_for_domain(&host);
                turn.push_cookies(t, &cookies).await?;
                session.hosts.lock().insert(host);
                let fetched = lease.navigate_tab(t, url, deadline).await;
                let here = lease.close(fetched)?.response.final_url;
                session
                    .hosts
                    .lock()
                    .insert(here.host_str().unwrap_or_default().to_ascii_lowercase());
            }
            Step::Snapshot => {}
            Step::Click(r) => {
                let n = node(r)?;
                self.acted(&session, lease, here.as_ref(), deadline, tab::click(t, n))
                    .await?;
            }
            Step::Type {
                r#ref,
                text,
                submit,
            } => {
                let n = node(r#ref)?;
                let typed = tab::type_into(t, n, text, submit);
                self.acted(&session, lease, here.as_ref(), deadline, typed)
                    .await?;
            }
            Step::Press(key) => {
                self.acted(&session, lease, here.as_ref(), deadline, tab::press(t, key))
                    .await?;
            }
            Step::Select { r#ref, values } => {
                let n = node(r#ref)?;
                let chosen = tab::select(t, n, values);
                out.selected = self
                    .acted(&session, lease, here.as_ref(), deadline, chosen)
                    .await?;
            }
            Step::WaitFor(until) => tab::wait_for(t, &until, deadline).await?,
            Step::Screenshot { full_page } => {
                let shot = crate::identity::browser::actions::capture(
                    t,
                    crate::request::Capture {
                        screenshot: Some(full_page),
                        pdf: false,
                    },
                )
                .await?;
                out.png = shot.png;
                return Ok(out);
            }
        }
        // The page the step led to has settled (`Lease::act`, the
        // navigation's own wait); its body is there to read.
        let _ = tab::wait_for(t, &Until::Selector("body".into()), deadline).await;
        let tree = tab::read_tree(t, view.selector.as_deref()).await?;
        let mut seen = session.seen.lock();
        // Another site's page (maybe another renderer, whose node ids mean
        // other elements): the old refs become unknown.
        let origin = url::Url::parse(&tree.url)
            .ok()
            .map(|u| u.origin().ascii_serialization());
        if seen.origin != origin {
            seen.book.forget();
            seen.origin = origin;
        }
        let snap = tab::render_tree(&tree, &mut seen.book);
        let text = crate::services::snapshot_view::show(view, seen.last.as_deref(), &snap.lines);
        let shown = Shown {
            url: snap.url,
            title: snap.title,
            text,
        };
        // A part of the page is no baseline for the next whole one.
        if view.selector.is_none() {
            seen.last = Some(snap.lines);
        }
        seen.shown = Some(shown.clone());
        out.snapshot = Some(shown);
        Ok(out)
    }

    /// Run `step` on the session's tab under `lease` ([`Lease::act`]): a
    /// page it loads is judged and counted, the lease closed with it (the
    /// breaker hears), its host's cookies come back at close.
    async fn acted<T>(
        &self,
        session: &BrowserSession,
        lease: Option<crate::lease::Lease>,
        here: Option<&url::Url>,
        deadline: Instant,
        step: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let lease =
            lease.ok_or_else(|| Error::new(ErrorKind::Internal, "a step without its lease"))?;
        let blank = url::Url::parse("about:blank")
            .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        let from = here.unwrap_or(&blank);
        match lease.act(&session.tab, from, deadline, step).await {
            Ok((out, Some(page))) => {
                let host = page
                    .response
                    .final_url
                    .host_str()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                session.log(
                    "loaded",
                    crate::identity::browser::tape::without_credentials(
                        page.response.final_url.as_str(),
                    ),
                );
                session.hosts.lock().insert(host);
                lease.close(Ok(page))?;
                Ok(out)
            }
            // Nothing loaded: the lease goes back as it was taken.
            Ok((out, None)) => Ok(out),
            Err(e) => {
                lease.finish(crate::strategy::Outcome::Failed);
                Err(e)
            }
        }
    }

    /// What the session's last step showed (its later pieces are read
    /// from it, without a new snapshot).
    pub fn last_shown(&self, id: &str, owner: &Owner) -> Result<Shown> {
        let session = self.session(id, owner)?;
        *session.last_used.lock() = Instant::now();
        let shown = session.seen.lock().shown.clone();
        shown.ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                "this session has no snapshot to read on from yet: take one (without `start_index`)",
            )
        })
    }

    /// Close a session: its sites' cookies go back into the jar (saved),
    /// its tab is closed. Returns how many cookies came back.
    pub async fn close(&self, id: &str, owner: &Owner) -> Result<usize> {
        let session = self.session(id, owner)?;
        self.map.lock().remove(id);
        self.end_session(&session).await
    }

    async fn end_session(&self, session: &BrowserSession) -> Result<usize> {
        let filmed = session.recording.lock().take();
        if let Some(Filmed { rec, filming }) = filmed {
            rec.tape.action("close", "");
            if let Some(f) = filming {
                f.stop().await;
            }
            if let Err(e) = self.leases.recordings().finish(rec).await {
                tracing::warn!(session = %session.id, error = %e, "cannot write the session's recording");
            }
        }
        let identities = self.leases.identities();
        let (browser, jar) = (
            identities.browser(session.slot)?,
            identities.jar(session.slot)?,
        );
        let mut turn = browser.turn().await?;
        let mut n = 0;
        let hosts: Vec<String> = session.hosts.lock().iter().cloned().collect();
        for h in hosts {
            let cookies = turn.cookies(&h).await?;
            n += cookies.len();
            jar.import(&cookies);
        }
        turn.close_tab(session.tab.clone()).await;
        drop(turn);
        identities.save_jar(session.slot).await;
        Ok(n)
    }

    /// Close the sessions of keys that are gone (`revoked(key)`: the keys
    /// were reloaded without it): a session lives no longer than its key.
    /// How many were closed.
    pub async fn end_revoked(&self, revoked: impl Fn(&str) -> bool) -> usize {
        let gone: Vec<Arc<BrowserSession>> = {
            let mut map = self.map.lock();
            let ids: Vec<String> = (map.iter())
                .filter(|(_, s)| s.owner.key.as_deref().is_some_and(&revoked))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for s in &gone {
            if let Err(e) = self.end_session(s).await {
                tracing::warn!(session = %s.id, error = %e, "closing a revoked key's browser session");
            }
        }
        gone.len()
    }

    /// Close the sessions nobody used for [`IDLE`] (and, at shutdown, all).
    pub async fn reap(&self, all: bool) {
        let idle: Vec<Arc<BrowserSession>> = {
            let mut map = self.map.lock();
            let ids: Vec<String> = (map.iter())
                .filter(|(_, s)| all || s.last_used.lock().elapsed() >= IDLE)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for s in idle {
            if let Err(e) = self.end_session(&s).await {
                tracing::warn!(session = %s.id, error = %e, "closing an idle browser session");
            }
        }
    }

    /// The slot and site of session `id`, when the caller (its key and
    /// MCP session) holds it: a caller learns nothing of another's session.
    pub fn identity_of(
        &self,
        id: &str,
        key: Option<&str>,
        mcp_session: Option<&str>,
    ) -> Option<(usize, String)> {
        (self.map.lock().get(id))
            .filter(|s| {
                s.owner.key.as_deref() == key && s.owner.mcp_session.as_deref() == mcp_session
            })
            .map(|s| (s.slot, s.key.clone()))
    }

    pub fn list(&self) -> Vec<(String, usize)> {
        (self.map.lock().values())
            .map(|s| (s.id.clone(), s.slot))
            .collect()
    }
}

impl Browsing {
    /// Every 10 s, close the sessions idle for [`IDLE`]; ends at `stop`.
    pub fn spawn_reaper(self: &Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        rt.spawn(async move {
            let mut clock = super::upkeep::interval(Duration::from_secs(10));
            while let Some(me) = super::upkeep::tick(&mut clock, &stop, &weak).await {
                me.reap(false).await;
            }
        });
    }
}
