//! The pool: identity slots and the router that hands them out.
//!
//! `next_slot(strategy)` goes round-robin over slots whose breaker for that strategy
//! admits traffic and whose politeness interval has passed. When every breaker is
//! open it answers at once with the slot that reopens first, flagged `degraded`.
//! A [`Lease`] is the permit: taken before the work, moved into it, and released
//! on drop, so in-flight counts and half-open trials can never leak.

mod circuit;
pub(crate) mod cookies;
pub mod events;
mod lease;
mod lock;
mod politeness;
mod slot;

pub use circuit::{Admission, Breaker, BreakerState, Verdict};
pub(crate) use cookies::write_atomically;
pub use cookies::{Jar, OpenNote, PortableCookie};
pub use events::{Events, SlotEvent};
pub use lease::Lease;
pub use politeness::Site;
pub use slot::{CalibrationStatus, Slot, SlotEnv, SlotHealth};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::{BreakerConfig, Config};
use crate::error::{Error, ErrorKind, Result};
use crate::http::{FetchRequest, FetchResponse, Guard, RootStore};
use crate::profile;
use crate::strategy::{Outcome, Politeness, Registry, Strategy};

/// Name under which URLs covered only by `security.allowed_hosts` are routed.
pub const DIRECT: &str = "_direct";

/// The identity pool. Cheap to clone.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    /// This process owns the data dir while the pool lives.
    _lock: lock::DataDirLock,
    slots: Vec<Arc<Slot>>,
    /// Swapped whole on reload (SIGHUP).
    registry: parking_lot::RwLock<Arc<Registry>>,
    /// What a reload rebuilds the registry and the guard from.
    strategies_dir: std::path::PathBuf,
    compiled: Vec<Arc<dyn Strategy>>,
    allowed_hosts: Vec<String>,
    guard: Arc<Guard>,
    events: Arc<Events>,
    calibrator: Option<Arc<crate::calibrate::Calibrator>>,
    breaker: BreakerConfig,
    cascade: crate::config::CascadeConfig,
    max_wait: Duration,
    router: Mutex<Router>,
    /// Woken whenever a lease is released.
    released: Notify,
}

#[derive(Default)]
struct Router {
    cursor: HashMap<String, usize>,
    /// Strategy → slot → its site state (looked up by `&str`: no key is
    /// allocated on the per-call path).
    sites: HashMap<String, HashMap<usize, Site>>,
    in_flight: HashMap<String, usize>,
}

impl Router {
    fn site(&mut self, slot: usize, strategy: &str, cfg: BreakerConfig) -> &mut Site {
        if !self.sites.contains_key(strategy) {
            self.sites.insert(strategy.to_string(), HashMap::new());
        }
        self.sites
            .get_mut(strategy)
            .map(|m| {
                m.entry(slot)
                    .or_insert_with(|| Site::new(Breaker::new(cfg)))
            })
            .unwrap_or_else(|| unreachable!("inserted above"))
    }
}

/// One more in flight for `strategy` (its key allocated only the first time).
fn bump(counts: &mut HashMap<String, usize>, strategy: &str) {
    match counts.get_mut(strategy) {
        Some(n) => *n += 1,
        None => {
            counts.insert(strategy.to_string(), 1);
        }
    }
}

/// Which tier served a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Http,
    Browser,
}

/// The result of one fetch through the pool.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub via: Via,
    pub slot: usize,
    pub strategy: String,
    pub degraded: bool,
    pub outcome: Outcome,
    pub response: FetchResponse,
}

/// A breaker as reported to operators.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerReport {
    pub state: BreakerState,
    pub failures: u32,
    /// Seconds until an open breaker admits a trial.
    pub open_for_secs: Option<f64>,
}

impl Pool {
    /// Open every slot of `cfg` with the profiles and strategies it points at.
    /// Broken strategy files are logged and skipped; a missing profile is an error.
    pub fn open(cfg: &Config) -> Result<Pool> {
        Self::open_with(cfg, Vec::new())
    }

    /// Like [`Pool::open`], with compiled Rust strategies registered besides the
    /// TOML ones.
    pub fn open_with(cfg: &Config, compiled: Vec<Arc<dyn Strategy>>) -> Result<Pool> {
        crate::browser::launcher::become_subreaper();
        let lock = lock::DataDirLock::acquire(&cfg.pool.data_dir)?;
        let (profiles, problems) = profile::load_dir(&cfg.pool.profiles_dir);
        for p in &problems {
            tracing::warn!("{p}");
        }
        let (mut registry, problems) = Registry::load_dir(&cfg.pool.strategies_dir);
        for p in &problems {
            tracing::warn!("{p} (strategy skipped)");
        }
        for s in &compiled {
            registry.add(s.clone()).map_err(Error::from)?;
        }
        let hosts = guard_hosts(&registry, &cfg.security.allowed_hosts);
        let guard = Arc::new(Guard::with_private(
            hosts,
            &cfg.security.allow_private_networks,
        ));
        let roots = RootStore::new(&cfg.security.extra_root_certs)?;
        let mut spki = crate::browser::launcher::spki_hashes(&cfg.security.extra_root_certs)?;
        let calibrator = if cfg.browser.calibrate {
            let c = Arc::new(crate::calibrate::Calibrator::new()?);
            spki.push(c.spki().to_string());
            Some(c)
        } else {
            None
        };
        let events = Arc::new(Events::default());
        let env = SlotEnv {
            data_dir: &cfg.pool.data_dir,
            base_port: cfg.pool.base_port,
            http: cfg.http,
            roots: &roots,
            guard: guard.clone(),
            browser: &cfg.browser,
            spki: &spki,
            calibrator: calibrator.clone(),
            events: events.clone(),
        };
        let mut slots = Vec::new();
        for plan in cfg.slot_plan() {
            let profile = profiles.get(&plan.profile).cloned().ok_or_else(|| {
                Error::config(format!(
                    "slot {} uses profile `{}`, which is not in {}",
                    plan.id,
                    plan.profile,
                    cfg.pool.profiles_dir.display()
                ))
            })?;
            slots.push(Arc::new(Slot::open(plan.id, profile, &env)?));
        }
        let pool = Pool {
            inner: Arc::new(Inner {
                _lock: lock,
                slots,
                registry: parking_lot::RwLock::new(Arc::new(registry)),
                strategies_dir: cfg.pool.strategies_dir.clone(),
                compiled,
                allowed_hosts: cfg.security.allowed_hosts.clone(),
                guard,
                events,
                calibrator,
                breaker: cfg.breaker,
                cascade: cfg.cascade,
                max_wait: Duration::from_secs(cfg.http.max_queue_wait_secs),
                router: Mutex::new(Router::default()),
                released: Notify::new(),
            }),
        };
        if cfg.browser.idle_close_secs > 0 {
            pool.spawn_idle_closer(Duration::from_secs(cfg.browser.idle_close_secs));
        }
        pool.spawn_browser_watcher();
        Ok(pool)
    }

    /// Re-read the strategies folder. All or nothing: a broken file keeps the
    /// old strategies and returns every problem found.
    pub fn reload_strategies(&self) -> std::result::Result<usize, Vec<crate::diag::Diagnostic>> {
        let (mut registry, problems) = Registry::load_dir(&self.inner.strategies_dir);
        if !problems.is_empty() {
            self.inner.events.emit(
                "reload",
                None,
                None,
                serde_json::json!({"ok": false, "errors": problems.iter().map(|p| p.to_string()).collect::<Vec<_>>()}),
            );
            return Err(problems);
        }
        for s in &self.inner.compiled {
            if let Err(d) = registry.add(s.clone()) {
                return Err(vec![d]);
            }
        }
        let n = registry.iter().count();
        self.inner
            .guard
            .set_hosts(guard_hosts(&registry, &self.inner.allowed_hosts));
        *self.inner.registry.write() = Arc::new(registry);
        self.inner.events.emit(
            "reload",
            None,
            None,
            serde_json::json!({"ok": true, "strategies": n}),
        );
        Ok(n)
    }

    /// Every strategy name, plus [`DIRECT`] for `allowed_hosts` traffic.
    pub fn strategy_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .registry()
            .iter()
            .map(|s| s.name().to_string())
            .collect();
        names.push(DIRECT.to_string());
        names
    }

    /// The pool's event hub.
    pub fn events(&self) -> &Events {
        &self.inner.events
    }

    /// Turn changes in the browsers' facts (launches, recycles, crashes, RSS
    /// restarts, closes) into events. Ends by itself once the pool is gone.
    fn spawn_browser_watcher(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        rt.spawn(async move {
            let mut last: Vec<crate::browser::BrowserFacts> = Vec::new();
            let mut interval = tokio::time::interval(Duration::from_millis(500));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let now: Vec<_> = inner.slots.iter().map(|s| s.browser_facts()).collect();
                for (i, (old, new)) in last.iter().zip(&now).enumerate() {
                    let detail = serde_json::json!({"pid": new.pid, "port": new.port});
                    let emit = |kind: &str, changed: bool| {
                        if changed {
                            inner.events.emit(kind, Some(i), None, detail.clone());
                        }
                    };
                    emit("browser_crash", new.crashes > old.crashes);
                    emit("browser_restart_rss", new.rss_restarts > old.rss_restarts);
                    emit("browser_launch", new.launches > old.launches);
                    emit("browser_recycle", new.recycles > old.recycles);
                    emit(
                        "browser_closed",
                        old.running && !new.running && new.crashes == old.crashes,
                    );
                }
                last = now;
            }
        });
    }

    /// Close browsers nobody used for `idle`. The task holds only a weak reference:
    /// it ends by itself once the pool is gone.
    fn spawn_idle_closer(&self, idle: Duration) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let tick = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(30));
        rt.spawn(async move {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                for slot in &inner.slots {
                    slot.browser().close_if_idle(idle).await;
                }
            }
        });
    }

    /// End Chromium left behind by an earlier run of any slot (call at start-up).
    pub async fn end_stale_browsers(&self) -> Vec<(usize, u32)> {
        let mut ended = Vec::new();
        for slot in &self.inner.slots {
            if let Some(pid) = slot.browser().end_stale().await {
                ended.push((slot.id, pid));
            }
        }
        ended
    }

    /// Warm `slot` up for `strategy`: open `url` in its browser, wait for any
    /// challenge to pass, and save the cookies into its jar. A page still
    /// challenged or blocked at the end is an error.
    pub async fn refresh_cookies(&self, slot: usize, strategy: &str, url: &url::Url) -> Result<()> {
        let result = self.warm_up(slot, strategy, url).await;
        let cookies = self.inner.slots.get(slot).map(|s| s.jar().count());
        self.inner.events.emit(
            "cookie_refresh",
            Some(slot),
            Some(strategy),
            serde_json::json!({
                "ok": result.is_ok(),
                "cookies": cookies,
                "error": result.as_ref().err().map(|e| e.to_string()),
            }),
        );
        result
    }

    async fn warm_up(&self, slot: usize, strategy: &str, url: &url::Url) -> Result<()> {
        let lease = self.next_slot(strategy, Some(slot)).await?;
        let fetched = lease.fetch_browser(url.clone(), None).await?;
        self.inner.slots[slot].save_jar().await;
        match fetched.outcome {
            Outcome::Ok | Outcome::Empty => Ok(()),
            other => Err(Error::new(
                ErrorKind::Refused,
                format!(
                    "the warm-up page ended as {} (HTTP {})",
                    other.as_str(),
                    fetched.response.status
                ),
            )
            .retryable(false)),
        }
    }

    /// Close every browser (reaping each Chromium) and save every jar.
    pub async fn shutdown(&self) {
        if let Some(c) = &self.inner.calibrator {
            c.shutdown().await;
        }
        futures_util::future::join_all(self.inner.slots.iter().map(|s| s.browser().close())).await;
        self.save_jars().await;
    }

    /// Fetch `url` in a slot's browser: lease, navigate (passing any challenge),
    /// classify under the strategy, feed the breaker.
    pub async fn fetch_browser(
        &self,
        url: url::Url,
        wait_for: Option<String>,
        pin: Option<usize>,
    ) -> Result<Fetched> {
        let strategy = self.strategy_for(&url);
        let name = strategy.as_ref().map_or(DIRECT, |s| s.name()).to_string();
        let lease = self.next_slot(&name, pin).await?;
        lease.fetch_browser(url, wait_for).await
    }

    pub fn slots(&self) -> &[Arc<Slot>] {
        &self.inner.slots
    }

    pub fn slot(&self, id: usize) -> Option<&Arc<Slot>> {
        self.inner.slots.get(id)
    }

    /// The strategies now (a reload swaps them; holders keep the old set).
    pub fn registry(&self) -> Arc<Registry> {
        self.inner.registry.read().clone()
    }

    /// The SSRF guard every fetch goes through.
    pub fn guard(&self) -> &Arc<Guard> {
        &self.inner.guard
    }

    /// The `[cascade]` settings.
    pub fn cascade_config(&self) -> crate::config::CascadeConfig {
        self.inner.cascade
    }

    fn politeness(&self, strategy: &str) -> Politeness {
        match self.inner.registry.read().get(strategy) {
            Some(s) => s.politeness().clone(),
            None => Politeness {
                min_interval_ms: 0,
                max_in_flight: 4,
                global_max_in_flight: 16,
            },
        }
    }

    /// Lease a slot for `strategy`, waiting for politeness (bounded by
    /// `http.max_queue_wait_secs`) but never for an open breaker.
    pub async fn next_slot(&self, strategy: &str, pin: Option<usize>) -> Result<Lease> {
        self.next_slot_avoiding(strategy, pin, &[]).await
    }

    /// Like [`Pool::next_slot`], preferring slots not in `avoid` (a retry moves on
    /// to another identity); falls back to them when nothing else is left.
    pub async fn next_slot_avoiding(
        &self,
        strategy: &str,
        pin: Option<usize>,
        avoid: &[usize],
    ) -> Result<Lease> {
        if let Some(p) = pin
            && p >= self.inner.slots.len()
        {
            return Err(Error::not_found(format!(
                "slot {p} does not exist (the pool has {} slots)",
                self.inner.slots.len()
            )));
        }
        if self.inner.slots.is_empty() {
            return Err(Error::config("the pool has no slots"));
        }
        let pol = self.politeness(strategy);
        let deadline = Instant::now() + self.inner.max_wait;
        loop {
            let released = self.inner.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let all_avoided = (0..self.inner.slots.len()).all(|s| avoid.contains(&s));
            let avoid = if all_avoided { &[][..] } else { avoid };
            let wait = match self.try_pick(strategy, &pol, pin, avoid, Instant::now()) {
                Pick::Lease(lease) => return Ok(lease),
                Pick::Wait(until) => until,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "no slot became free for strategy `{strategy}` within {}s (politeness limits)",
                        self.inner.max_wait.as_secs()
                    ),
                ));
            }
            let until = wait.map_or(deadline, |u| u.min(deadline));
            tokio::select! {
                _ = &mut released => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }

    fn try_pick(
        &self,
        strategy: &str,
        pol: &Politeness,
        pin: Option<usize>,
        avoid: &[usize],
        now: Instant,
    ) -> Pick {
        let n = self.inner.slots.len();
        let cfg = self.inner.breaker;
        let mut router = self.inner.router.lock();
        let router = &mut *router;
        let cursor = router.cursor.get(strategy).copied().unwrap_or(0);
        let order: Vec<usize> = match pin {
            Some(p) => vec![p],
            None => (0..n)
                .map(|k| (cursor + k) % n)
                .filter(|s| !avoid.contains(s))
                .collect(),
        };
        let global = router.in_flight.get(strategy).copied().unwrap_or(0);
        let mut any_admitted = false;
        let mut earliest: Option<Instant> = None;
        for &id in &order {
            let site = router.site(id, strategy, cfg);
            if !site.breaker.admits(now) {
                continue;
            }
            any_admitted = true;
            if !site.has_room(pol) || global >= pol.global_max_in_flight {
                continue; // woken by a release
            }
            if let Some(ready) = site.ready_at(pol).filter(|r| *r > now) {
                earliest = Some(earliest.map_or(ready, |e| e.min(ready)));
                continue;
            }
            let Some(admission) = site.breaker.try_admit(now) else {
                continue;
            };
            site.in_flight += 1;
            site.last_start = Some(now);
            bump(&mut router.in_flight, strategy);
            if pin.is_none() {
                match router.cursor.get_mut(strategy) {
                    Some(c) => *c = (id + 1) % n,
                    None => {
                        router.cursor.insert(strategy.to_string(), (id + 1) % n);
                    }
                }
            }
            return Pick::Lease(self.lease(id, strategy, admission, false));
        }
        if any_admitted {
            return Pick::Wait(earliest);
        }
        // Every breaker refuses: never block, never panic. Answer with the slot whose
        // breaker reopens first, flagged degraded.
        let id = order
            .iter()
            .copied()
            .min_by_key(|&id| {
                router
                    .site(id, strategy, cfg)
                    .breaker
                    .open_until()
                    .unwrap_or(now)
            })
            .unwrap_or(0);
        let site = router.site(id, strategy, cfg);
        site.in_flight += 1;
        site.last_start = Some(now);
        bump(&mut router.in_flight, strategy);
        Pick::Lease(self.lease(id, strategy, Admission { trial: false }, true))
    }

    fn lease(&self, slot: usize, strategy: &str, admission: Admission, degraded: bool) -> Lease {
        Lease::new(self.inner.clone(), slot, strategy, admission, degraded)
    }

    /// The strategy responsible for `url`: a registered one, or [`DIRECT`].
    pub fn strategy_for(&self, url: &url::Url) -> Option<Arc<dyn Strategy>> {
        let registry = self.registry();
        url.host_str().and_then(|h| registry.for_host(h)).cloned()
    }

    /// Fetch `req` through the pool's HTTP tier: lease a slot (or the pinned one),
    /// fetch, classify the response under its strategy, feed the breaker.
    pub async fn fetch(&self, req: FetchRequest, pin: Option<usize>) -> Result<Fetched> {
        let strategy = self.strategy_for(&req.url);
        let name = strategy.as_ref().map_or(DIRECT, |s| s.name()).to_string();
        let lease = self.next_slot(&name, pin).await?;
        lease.fetch(req).await
    }

    /// The breaker of (slot, strategy) as operators see it.
    pub fn breaker(&self, slot: usize, strategy: &str) -> BreakerReport {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let site = router.site(slot, strategy, self.inner.breaker);
        let state = site.breaker.state(now);
        BreakerReport {
            state,
            failures: site.breaker.failures(),
            open_for_secs: site
                .breaker
                .open_until()
                .filter(|_| state == BreakerState::Open)
                .map(|t| t.saturating_duration_since(now).as_secs_f64()),
        }
    }

    /// Whether `tier` hard-blocked (slot, strategy) less than `cooldown` ago.
    pub fn tier_blocked_recently(
        &self,
        slot: usize,
        strategy: &str,
        tier: u8,
        cooldown: Duration,
    ) -> bool {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let site = router.site(slot, strategy, self.inner.breaker);
        site.tier_blocked_at
            .get(usize::from(tier))
            .copied()
            .flatten()
            .is_some_and(|t| now.duration_since(t) < cooldown)
    }

    /// Tiers that hard-blocked (slot, strategy), with seconds since the block.
    pub fn tier_memory(&self, slot: usize, strategy: &str) -> Vec<(u8, f64)> {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let site = router.site(slot, strategy, self.inner.breaker);
        site.tier_blocked_at
            .iter()
            .enumerate()
            .filter_map(|(tier, at)| at.map(|t| (tier as u8, now.duration_since(t).as_secs_f64())))
            .collect()
    }

    /// Remember that `tier` hard-blocked (slot, strategy) now.
    pub fn mark_tier_blocked(&self, slot: usize, strategy: &str, tier: u8) {
        let now = Instant::now();
        let mut router = self.inner.router.lock();
        let site = router.site(slot, strategy, self.inner.breaker);
        if let Some(t) = site.tier_blocked_at.get_mut(usize::from(tier)) {
            *t = Some(now);
        }
        drop(router);
        self.inner.events.emit(
            "tier_blocked",
            Some(slot),
            Some(strategy),
            serde_json::json!({"tier": tier}),
        );
    }

    /// Close the breakers of `slot` (all strategies, or one) and forget its tier blocks.
    pub fn reset_breakers(&self, slot: usize, strategy: Option<&str>) {
        let mut router = self.inner.router.lock();
        for (name, sites) in router.sites.iter_mut() {
            let Some(site) = sites.get_mut(&slot) else {
                continue;
            };
            if strategy.is_none_or(|x| x == name) {
                site.breaker.reset();
                site.tier_blocked_at.iter_mut().for_each(|t| *t = None);
            }
        }
        drop(router);
        self.inner.events.emit(
            "breaker_reset",
            Some(slot),
            strategy,
            serde_json::json!({"to": "closed"}),
        );
        self.inner.released.notify_waiters();
    }

    /// Save every jar that changed.
    pub async fn save_jars(&self) {
        for slot in &self.inner.slots {
            slot.save_jar().await;
        }
    }
}

enum Pick {
    Lease(Lease),
    /// Nothing free now: wait until this instant (politeness) or a release.
    Wait(Option<Instant>),
}

/// Host patterns the SSRF guard admits: every strategy's plus `allowed_hosts`.
fn guard_hosts(registry: &Registry, allowed: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = registry.iter().flat_map(|s| s.hosts().to_vec()).collect();
    hosts.extend(allowed.iter().cloned());
    hosts
}

/// Count one request in `/metrics`: by strategy, tier and outcome, with its latency.
pub fn record_request(strategy: &str, tier: u8, outcome: &str, elapsed: Duration) {
    metrics::counter!("idpool_requests_total",
        "strategy" => strategy.to_string(), "tier" => tier.to_string(), "outcome" => outcome.to_string())
    .increment(1);
    metrics::histogram!("idpool_request_duration_seconds",
        "strategy" => strategy.to_string(), "tier" => tier.to_string())
    .record(elapsed.as_secs_f64());
}
