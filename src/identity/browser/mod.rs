//! The browser tier: one lazily launched, supervised Chromium per slot.
//!
//! - `launcher`: argument list, port check, spawn (killed and reaped if a
//!   later launch step fails), stale processes of earlier runs.
//! - `process`: `/proc` reading, process groups, kill-and-reap, liveness,
//!   process-tree memory (PSS).
//! - `supervisor`: the task that polls the CDP handler and reaps Chromium.
//! - `attach`: chromiumoxide on a started Chromium, through `relay`, the
//!   DevTools connection with a cap on Chromium's messages.
//! - `world`: where every script idpool runs in a page runs (the utility
//!   world, never the page's own).
//! - `page`: one operation on a tab: identity overrides, cookie sync, navigation
//!   with the main document's real status, waiting for selectors and challenges.
//! - `request` (what one navigation asks for), `load` (one navigation of the
//!   working tab), `actions` (steps and captures on it), `hang` (a dead or
//!   hung Chromium), `facts` (what operators see).
//! - `tab`: what a person does on a tab (snapshot, click, type, press,
//!   select, wait); `kept_tabs`: a turn's own tabs for interactive sessions.
//! - `tape`: a recording in progress (screencast frames, the action log, a
//!   network summary) and the filming of a tab onto it.
//!
//! [`SlotBrowser`] holds it together: one operation at a time per slot (an async
//! lock with a bounded wait), relaunch after a crash, tab recycling, idle close and
//! restart on memory growth.

pub mod actions;
mod attach;

mod device;
pub mod display;
mod facts;
mod hang;
pub mod isolation;
mod kept_tabs;
pub mod launcher;
pub mod live;
mod load;
pub mod page;
pub mod process;
mod relay;
mod request;
pub mod settle;
mod storage;
mod supervisor;
pub mod tab;
pub mod tape;
mod trust;
mod world;

pub use device::Device;
pub use facts::BrowserFacts;
pub use launcher::LaunchSpec;
pub use page::{ClientHints, Identity, PageResult, PageState, Probe};
pub use request::BrowserRequest;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chromiumoxide::{Browser, Page};
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::BrowserConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::identity::jar::Jar;
use supervisor::Flags;

struct Running {
    browser: Browser,
    /// The working tab; `None` only during launch.
    page: Option<Page>,
    pid: u32,
    flags: Arc<Flags>,
    stop: Option<oneshot::Sender<()>>,
    supervisor: JoinHandle<()>,
    last_used: Instant,
}

/// One slot's Chromium.
pub struct SlotBrowser {
    spec: LaunchSpec,
    identity: Identity,
    /// The device it launches as next (the spec's, until the slot's
    /// identity is renewed: [`SlotBrowser::set_device`]).
    device: Mutex<Device>,
    cfg: BrowserConfig,
    /// The most of a page's HTML read out of the browser (UTF-16 units;
    /// the pool sets `http.max_body_bytes`).
    page_limit: usize,
    configured_exe: Option<std::path::PathBuf>,
    state: tokio::sync::Mutex<Option<Running>>,
    facts: Arc<Mutex<BrowserFacts>>,
    /// The last memory sample.
    rss_cache: Mutex<Option<MemorySample>>,
    /// Interactive sessions' tabs (`tab.rs`): recycling leaves them open,
    /// and the browser is not closed for idleness while there are any.
    kept_tabs:
        Mutex<std::collections::HashSet<chromiumoxide::cdp::browser_protocol::target::TargetId>>,
    /// Closed for good ([`SlotBrowser::close_for_good`]): nothing launches
    /// it again.
    ended: std::sync::atomic::AtomicBool,
}

/// When, of which pid, (RSS, PSS) in MiB.
type MemorySample = (Instant, u32, (u64, u64));

/// An RSS sample younger than this is reused. Reading `smaps_rollup` of a
/// Chromium tree costs the kernel about 15 ms (its address spaces are
/// large): once a second that was the daemon's largest cost per warm browser
/// call (`perf`: 15 % of its CPU at 12 calls/s). A new browser (pid) is
/// always sampled afresh, so `max_rss_mb` still acts after its first page.
const RSS_FRESH: Duration = Duration::from_secs(10);

impl std::fmt::Debug for SlotBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotBrowser")
            .field("slot", &self.spec.slot)
            .field("port", &self.spec.port)
            .finish()
    }
}

impl SlotBrowser {
    /// Nothing starts here: Chromium launches on the first operation.
    /// The most of a page's HTML read out of the browser.
    pub fn page_limit(&self) -> usize {
        self.page_limit
    }

    /// Read at most `bytes` of a page's HTML out of the browser.
    pub fn with_page_limit(mut self, bytes: usize) -> Self {
        self.page_limit = bytes.max(1);
        self
    }

    pub fn new(spec: LaunchSpec, identity: Identity, cfg: BrowserConfig) -> Self {
        let facts = BrowserFacts {
            port: spec.port,
            ..Default::default()
        };
        SlotBrowser {
            configured_exe: cfg.executable.clone(),
            device: Mutex::new(spec.device.clone()),
            spec,
            identity,
            cfg,
            page_limit: 16 << 20,
            state: tokio::sync::Mutex::new(None),
            facts: Arc::new(Mutex::new(facts)),
            rss_cache: Mutex::new(None),
            kept_tabs: Mutex::default(),
            ended: Default::default(),
        }
    }

    /// Current facts, RSS measured at most a second ago (measuring walks
    /// every process in /proc: milliseconds, too much for each status read).
    pub fn facts(&self) -> BrowserFacts {
        let mut f = self.facts.lock().clone();
        let mem = f.pid.map(|pid| self.memory_mb(pid));
        f.rss_mb = mem.map(|m| m.0);
        f.pss_mb = mem.map(|m| m.1);
        f
    }

    /// The process tree's (RSS, PSS), sampled at most once per [`RSS_FRESH`].
    fn memory_mb(&self, pid: u32) -> (u64, u64) {
        let mut cache = self.rss_cache.lock();
        match *cache {
            Some((at, p, mb)) if p == pid && at.elapsed() < RSS_FRESH => mb,
            _ => {
                let mb = process::tree_memory_mb(pid);
                *cache = Some((Instant::now(), pid, mb));
                mb
            }
        }
    }

    /// `browser.op_timeout_secs`: one browser operation's bound.
    pub fn op_timeout_secs(&self) -> u64 {
        self.cfg.op_timeout_secs
    }

    /// The device the browser runs (or next launches) as.
    pub fn device(&self) -> Device {
        self.device.lock().clone()
    }

    /// Launch as `device` from now on (a renewed identity's persona; the
    /// browser is closed first by whoever renews it).
    pub fn set_device(&self, device: Device) {
        *self.device.lock() = device;
    }

    /// How many times this browser launched (the count
    /// [`SlotBrowser::turn_on_launch`] takes).
    pub(crate) fn launches(&self) -> u64 {
        self.facts.lock().launches
    }

    pub fn spec(&self) -> &LaunchSpec {
        &self.spec
    }

    /// End Chromium left behind by an earlier run of this slot (at pool start).
    pub async fn end_stale(&self) -> Option<u32> {
        launcher::end_stale(&self.spec).await
    }

    /// This slot's turn at its browser (queueing up to `lock_wait_secs`),
    /// Chromium launched or relaunched if needed. Navigations in one turn
    /// follow each other with nothing of another caller in between.
    pub(crate) async fn turn(&self) -> Result<Turn<'_>> {
        let turn = self.upkeep_turn().await?;
        self.claim_standby();
        Ok(turn)
    }

    /// A call takes this browser: it is no standby any more.
    pub(crate) fn claim_standby(&self) {
        self.facts.lock().standby = false;
    }

    /// A turn for the daemon's own upkeep (calibration): like
    /// [`Self::turn`], but a standby browser stays one.
    pub(crate) fn upkeep_turn(&self) -> impl Future<Output = Result<Turn<'_>>> + Send + '_ {
        self.turn_at(None)
    }

    /// A turn at the browser of launch `launch` (a count of
    /// [`BrowserFacts::launches`]) only: work that measures one launch (the
    /// calibration) fails when that browser was closed or replaced since,
    /// and launches none of its own; a browser closed by an operator stays
    /// closed.
    pub(crate) fn turn_on_launch(
        &self,
        launch: u64,
    ) -> impl Future<Output = Result<Turn<'_>>> + Send + '_ {
        self.turn_at(Some(launch))
    }

    /// The browser's lock (queueing up to `lock_wait_secs`), the browser
    /// ready for a turn on `launch` (see [`Turn::ready`]).
    async fn turn_at(&self, launch: Option<u64>) -> Result<Turn<'_>> {
        let wait = Duration::from_secs(self.cfg.lock_wait_secs);
        let guard = tokio::time::timeout(wait, self.state.lock())
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "slot {}: the browser stayed busy for {}s",
                        self.spec.slot,
                        wait.as_secs()
                    ),
                )
            })?;
        let mut turn = Turn {
            browser: self,
            guard,
            launch,
        };
        turn.ready().await?;
        Ok(turn)
    }

    /// One navigation in a turn of its own: see [`Turn::navigate`].
    pub(crate) async fn navigate(
        &self,
        req: &BrowserRequest,
        jar: Option<&Jar>,
        probe: &page::Probe<'_>,
    ) -> Result<PageResult> {
        self.turn().await?.navigate(req, jar, probe).await
    }

    /// Fresh blank tab first, then close the stale ones. Process and cookies stay.
    async fn recycle(&self, running: &mut Running) -> Result<()> {
        let fresh = running
            .browser
            .new_page("about:blank")
            .await
            .map_err(page::cdp("open a tab"))?;
        page::prepare(&fresh, &self.identity).await?;
        let keep = fresh.target_id().clone();
        if let Some(old) = running.page.replace(fresh) {
            let _ = old.close().await;
        }
        if let Ok(pages) = running.browser.pages().await {
            for p in pages {
                if *p.target_id() != keep && !self.kept_tabs.lock().contains(p.target_id()) {
                    let _ = p.close().await;
                }
            }
        }
        let mut f = self.facts.lock();
        f.recycles += 1;
        f.ops_since_recycle = 0;
        Ok(())
    }

    async fn ensure_running(&self, slot: &mut Option<Running>) -> Result<()> {
        Self::forget_dead(slot).await;
        if slot.is_some() {
            return Ok(());
        }
        if self.ended.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "slot {}: its browser was closed for good (the daemon is stopping)",
                    self.spec.slot
                ),
            ));
        }
        match self.launch().await {
            Ok(r) => {
                *slot = Some(r);
                Ok(())
            }
            Err(e) => {
                self.facts.lock().last_error = Some(crate::diag::error_line(&e));
                Err(e)
            }
        }
    }

    async fn launch(&self) -> Result<Running> {
        let mut spec = self.spec.clone();
        spec.device = self.device();
        spec.executable = launcher::find_executable(self.configured_exe.as_deref())?;
        launcher::end_stale(&spec).await;
        let started = match spec.netns.clone() {
            // Spawned from the namespace's thread, Chromium starts inside it.
            // A launch cancelled with its caller is cancelled there too: the
            // Chromium it started ends with it (`kill_on_drop`).
            Some(ns) => {
                let s = spec.clone();
                tokio_util::task::AbortOnDropHandle::new(
                    ns.spawn(async move { launcher::start(&s).await }),
                )
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Internal,
                        format!("slot {}: launch task: {e}", spec.slot),
                    )
                })??
            }
            None => launcher::start(&spec).await?,
        };
        // `chromium --version` starts a process of its own: run it while we
        // attach and open the tab, not before (the first call waits for all).
        let exe = spec.executable.clone();
        let version = tokio::spawn(async move { launcher::executable_version(&exe).await });
        let mut running = self.attach(&spec, started).await?;
        // The tab we work in, speaking with the slot's identity.
        let tab = async {
            let tab = running
                .browser
                .new_page("about:blank")
                .await
                .map_err(page::cdp("open a tab"))?;
            page::prepare(&tab, &self.identity).await?;
            Ok::<_, Error>(tab)
        };
        match tokio::time::timeout(spec.launch_timeout, tab).await {
            Ok(Ok(tab)) => {
                running.page = Some(tab);
                let mut v = version.await.ok().flatten();
                if v.is_none() {
                    // `--version` did not answer: ask DevTools.
                    v = tokio::time::timeout(Duration::from_secs(5), running.browser.version())
                        .await
                        .ok()
                        .and_then(|v| v.ok())
                        .map(|v| v.product);
                }
                self.facts.lock().version = v;
                Ok(running)
            }
            Ok(Err(e)) => {
                self.stop_running(running).await;
                Err(e)
            }
            Err(_) => {
                self.stop_running(running).await;
                Err(Error::new(
                    ErrorKind::Timeout,
                    format!("slot {}: Chromium did not open a tab in time", spec.slot),
                ))
            }
        }
    }

    /// Launch Chromium ahead of need when it is not running and nobody is
    /// at it (a standby launch, `browser.standby`); `Ok(true)` when it
    /// launched. Its idle time counts from the launch.
    pub async fn warm(&self) -> Result<bool> {
        let Ok(mut guard) = self.state.try_lock() else {
            return Ok(false);
        };
        Self::forget_dead(&mut guard).await;
        if guard.is_some() {
            return Ok(false);
        }
        self.ensure_running(&mut guard).await?;
        self.facts.lock().standby = true;
        Ok(true)
    }

    /// Close this slot's browser for good (the pool is shutting down): it is
    /// not launched again, whatever still runs asks for it.
    pub async fn close_for_good(&self) {
        self.ended.store(true, Ordering::Release);
        self.close().await;
    }

    /// Close this slot's browser (graceful CDP close, then the process group).
    pub async fn close(&self) {
        let mut guard = match tokio::time::timeout(
            Duration::from_secs(self.cfg.lock_wait_secs),
            self.state.lock(),
        )
        .await
        {
            Ok(g) => g,
            Err(_) => {
                // An operation is stuck: end the process; its supervisor reaps it.
                if let Some(pid) = self.facts.lock().pid {
                    process::signal_group(pid, libc::SIGKILL);
                }
                return;
            }
        };
        self.close_running(&mut guard).await;
    }

    /// Close the browser if nobody used it for `idle`; a busy browser is left alone.
    pub async fn close_if_idle(&self, idle: Duration) -> bool {
        let Ok(mut guard) = self.state.try_lock() else {
            return false;
        };
        let idle_now = self.kept_tabs.lock().is_empty()
            && guard
                .as_ref()
                .is_some_and(|r| r.last_used.elapsed() >= idle);
        if idle_now {
            tracing::info!(slot = self.spec.slot, "closing idle browser");
            self.close_running(&mut guard).await;
        }
        idle_now
    }

    async fn close_running(&self, slot: &mut Option<Running>) {
        // The sessions' tabs go with the browser.
        self.kept_tabs.lock().clear();
        if let Some(r) = slot.take() {
            self.stop_running(r).await;
        }
    }

    async fn stop_running(&self, mut r: Running) {
        r.flags.closing.store(true, Ordering::Release);
        // Graceful first: Chromium flushes its profile and reaps its own helpers.
        if tokio::time::timeout(Duration::from_secs(3), r.browser.close())
            .await
            .is_ok_and(|r| r.is_ok())
        {
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut r.supervisor).await;
        }
        if let Some(stop) = r.stop.take() {
            let _ = stop.send(());
        }
        if !r.supervisor.is_finished()
            && tokio::time::timeout(Duration::from_secs(10), &mut r.supervisor)
                .await
                .is_err()
        {
            process::signal_group(r.pid, libc::SIGKILL);
            r.supervisor.abort();
        }
        let mut f = self.facts.lock();
        f.running = false;
        f.pid = None;
    }
}

/// One caller's turn at a slot's browser: the browser's lock, held.
pub struct Turn<'a> {
    browser: &'a SlotBrowser,
    guard: tokio::sync::MutexGuard<'a, Option<Running>>,
    /// The one launch this turn works on ([`SlotBrowser::turn_on_launch`]);
    /// `None`: whichever runs, launched if need be.
    launch: Option<u64>,
}

impl Turn<'_> {
    /// The browser of this turn running: launched if need be, or, for a turn
    /// on one launch, still that launch.
    async fn ready(&mut self) -> Result<()> {
        let Some(launch) = self.launch else {
            return self.browser.ensure_running(&mut self.guard).await;
        };
        SlotBrowser::forget_dead(&mut self.guard).await;
        if self.guard.is_none() || self.browser.launches() != launch {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "slot {}: the browser it was working on was closed or replaced",
                    self.browser.spec.slot
                ),
            ));
        }
        Ok(())
    }

    /// Navigate the working tab, syncing the cookies of `req.cookie_domain`
    /// with `jar` around it; afterwards the tab is recycled, or the browser
    /// restarted past `max_rss_mb`, when due. No SSRF check here, so it is
    /// the crate's alone: requests come through `pool::Lease::browse`, which
    /// guards (and the calibration, to the daemon's own listener).
    pub(crate) async fn navigate(
        &mut self,
        req: &BrowserRequest,
        jar: Option<&Jar>,
        probe: &page::Probe<'_>,
    ) -> Result<PageResult> {
        self.ready().await?;
        let Some(running) = self.guard.as_mut() else {
            return Err(Error::new(
                ErrorKind::Internal,
                "browser vanished after launch",
            ));
        };
        let Some(tab) = running.page.clone() else {
            return Err(Error::new(ErrorKind::Internal, "browser has no tab"));
        };
        let op_timeout = Duration::from_secs(self.browser.cfg.op_timeout_secs);
        // Waiting for selectors / challenges stops early enough to still sync
        // cookies and report *what* was not met, inside the operation's deadline.
        let deadline = Instant::now() + op_timeout.mul_f64(0.8);
        let result = tokio::time::timeout(
            op_timeout,
            load::load(
                &tab,
                &running.browser,
                req,
                jar,
                probe,
                (deadline, self.browser.page_limit),
            ),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "slot {}: browser operation on {} timed out after {}s",
                    self.browser.spec.slot,
                    req.url,
                    op_timeout.as_secs()
                ),
            ))
        });
        // A browser the relay ended: the operation failed for that reason.
        let result = match (result, running.flags.ended_because.lock().clone()) {
            (Err(_), Some(why)) => Err(Error::new(
                ErrorKind::Network,
                format!("slot {}: {why}", self.browser.spec.slot),
            )),
            (result, _) => result,
        };
        if result
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::Timeout)
            && !SlotBrowser::answers(running).await
        {
            self.browser.end_hung(&mut self.guard).await;
            return result.map_err(|e| e.context("the browser was hung and has been killed"));
        }
        running.last_used = Instant::now();
        let (ops, pid) = {
            let mut f = self.browser.facts.lock();
            f.total_ops += 1;
            f.ops_since_recycle += 1;
            if let Err(e) = &result {
                f.last_error = Some(crate::diag::one_line(
                    &e.to_string(),
                    crate::diag::ERROR_CHARS,
                ));
            }
            (f.ops_since_recycle, f.pid)
        };
        if !running.flags.dead.load(Ordering::Acquire) {
            if self.browser.cfg.recycle_after > 0 && ops >= self.browser.cfg.recycle_after {
                if let Err(e) = self.browser.recycle(running).await {
                    tracing::warn!(slot = self.browser.spec.slot, error = %e, "tab recycling failed; restarting the browser");
                    self.browser.close_running(&mut self.guard).await;
                }
            } else if self.browser.cfg.max_rss_mb > 0
                && let Some(pid) = pid
                && self.browser.memory_mb(pid).1 > self.browser.cfg.max_rss_mb
            {
                tracing::info!(
                    slot = self.browser.spec.slot,
                    max_rss_mb = self.browser.cfg.max_rss_mb,
                    "browser passed max_rss_mb (its PSS); restarting it"
                );
                self.browser.facts.lock().rss_restarts += 1;
                self.browser.close_running(&mut self.guard).await;
            }
        }
        result
    }
}

impl Drop for SlotBrowser {
    fn drop(&mut self) {
        // Last line of defence when the pool is dropped without `shutdown`: no
        // Chromium outlives its owner. (The supervisor, if still polled, reaps it.)
        if let Some(pid) = self.facts.lock().pid {
            process::signal_group(pid, libc::SIGKILL);
        }
    }
}
