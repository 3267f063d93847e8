//! The pool: identity slots (`slot.rs`), the router that leases them
//! (`router.rs`), and the lease (`lease.rs`), the one way to use a slot.
//!
//! [`Pool::next_slot`] hands out a [`Lease`]: taken before the work, moved into
//! it, released on drop, so in-flight counts and half-open trials can never
//! leak. A call's requests ([`Lease::http`], [`Lease::browse`]), its tier
//! memory and its outcome ([`Lease::finish`]) all go through the lease.

mod adopt;
mod background;
use background::{interval, tick};
mod browse;
pub mod browsing;
mod calibration;
mod call;
mod drift;
pub mod events;
mod fleet;
mod fleet_state;
mod identity;
mod isolation;
pub mod jobs;
mod lease;
mod leasing;
mod live;
mod lock;
mod login;
mod pace;
mod pii;
mod rates;
mod retire;
mod robots;
mod serving;
mod session;
mod slot;
mod slot_env;
mod wear;

pub use crate::routing::LoginRecord;
use crate::routing::Router;
pub use crate::routing::Site;
pub use crate::routing::{Admission, Breaker, BreakerState, Cause, Verdict};
pub use crate::routing::{BreakerReport, WEB, is_web_key, web_key};
pub use crate::routing::{Budget, BudgetReport, Change};
pub use browse::BrowseOptions;
pub use calibration::CalibrationStatus;
pub use call::Call;
pub use drift::Drift;
pub use events::{Events, SlotEvent};
pub use fleet::Fleet;
pub use identity::SlotIdentity;
pub use isolation::Isolation;
use isolation::isolate;
pub use lease::{Fetched, Lease, Via};
pub use live::{Frame, LiveSession, LiveStatus, LoginLimits};
pub use pii::Pii;
pub use retire::Retirement;
pub use serving::Serving;
pub use session::Imported;
pub use slot::{Slot, SlotHealth};
pub use slot_env::SlotEnv;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::{BreakerConfig, Config};
use crate::error::{Error, ErrorKind, Result};
use crate::identity::profile;
use crate::strategy::{Outcome, Registry, Strategy};
use crate::wire::http::{FetchRequest, Guard, RootStore};

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
    /// `[web]`: politeness and robots for hosts no strategy covers.
    web: crate::config::WebConfig,
    robots: robots::Cache,
    /// Crawls running past their call, and those kept after.
    jobs: jobs::Jobs,
    /// Interactive browser sessions (`browser_*` tools).
    browsing: browsing::Sessions,
    guard: Arc<Guard>,
    events: Arc<Events>,
    calibrator: Option<Arc<crate::identity::calibrate::Calibrator>>,
    breaker: BreakerConfig,
    cascade: crate::config::CascadeConfig,
    max_wait: Duration,
    router: Mutex<Router>,
    /// The installed Chromium's major version, read when the pool opened.
    chromium_major: Option<u32>,
    /// Whether the browsers run in their own network namespace, and why not.
    isolation: Isolation,
    /// Held for the pool's life (the browsers' namespace and its thread).
    _netns: Option<Arc<crate::wire::netns::Netns>>,
    retire: crate::config::RetireConfig,
    /// Woken whenever a lease is released.
    released: Notify,
    /// Login sessions with their live views.
    live: live::Sessions,
    /// Connections and MCP sessions the daemon holds open.
    serving: serving::Serving,
    pii: pii::Pii,
    /// Outcomes per strategy per minute over the last hour (the status page's charts).
    rates: rates::Rates,
    /// Fields and operations whose extraction empties against its history.
    drift: drift::Drift,
    /// `[cluster]`: the fleet this pool is part of.
    fleet: Option<fleet::Fleet>,
    /// Cancelled by [`Pool::shutdown`]: the pool's background tasks end.
    stop: CancellationToken,
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
        crate::identity::browser::process::become_subreaper();
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
        let guard = Arc::new(Guard::from_config(hosts, &cfg.security));
        let roots = RootStore::new(&cfg.security.extra_root_certs)?;
        let mut spki = crate::wire::http::cert::spki_hashes(&cfg.security.extra_root_certs)?;
        let trust_roots = crate::wire::http::cert::root_ders(&cfg.security.extra_root_certs)?;
        let calibrator = if cfg.browser.calibrate {
            let c = Arc::new(crate::identity::calibrate::Calibrator::new()?);
            spki.push(c.spki().to_string());
            Some(c)
        } else {
            None
        };
        let events = Arc::new(Events::default());
        let stop = CancellationToken::new();
        let (netns, isolation) = isolate(&cfg.browser, cfg.pool.base_port)?;
        let env = SlotEnv {
            data_dir: &cfg.pool.data_dir,
            base_port: cfg.pool.base_port,
            http: cfg.http,
            roots: &roots,
            guard: guard.clone(),
            browser: &cfg.browser,
            spki: &spki,
            proxy_tls: Arc::new(crate::wire::egress::ProxyTls::new(trust_roots.clone())),
            trust_roots: &trust_roots,
            calibrator: calibrator.clone(),
            events: events.clone(),
            stop: &stop,
            netns: netns.clone(),
            proxy_health: (
                cfg.pool.proxy_failures,
                Duration::from_secs(cfg.pool.proxy_probe_secs.max(1)),
            ),
        };
        // The user agent claims the Chromium that will run (unless a
        // profile pins one), from the first HTTP request on.
        let chromium =
            crate::identity::browser::launcher::installed_major(cfg.browser.executable.as_deref());
        let slots = open_slots(cfg, &profiles, &env, chromium)?;
        let fleet = open_fleet(cfg, slots.len())?;
        let pool = Pool {
            inner: Arc::new(Inner {
                _lock: lock,
                slots,
                registry: parking_lot::RwLock::new(Arc::new(registry)),
                strategies_dir: cfg.pool.strategies_dir.clone(),
                compiled,
                allowed_hosts: cfg.security.allowed_hosts.clone(),
                web: cfg.web.clone(),
                robots: robots::Cache::default(),
                jobs: jobs::Jobs::open(&cfg.pool.data_dir, stop.child_token()),
                browsing: browsing::Sessions::default(),
                guard,
                events,
                calibrator,
                breaker: cfg.breaker,
                cascade: cfg.cascade,
                max_wait: Duration::from_secs(cfg.http.max_queue_wait_secs),
                router: Mutex::new(Router::default()),
                chromium_major: chromium,
                isolation,
                _netns: netns,
                retire: cfg.pool.retire,
                released: Notify::new(),
                serving: serving::Serving::default(),
                pii: pii::Pii::open(&cfg.pool.data_dir, cfg.security.pii_role)?,
                rates: rates::Rates::default(),
                drift: drift::Drift::default(),
                live: live::Sessions::default(),
                fleet,
                stop,
            }),
        };
        pool.spawn_fleet();
        if cfg.browser.idle_close_secs > 0 {
            pool.spawn_idle_closer(Duration::from_secs(cfg.browser.idle_close_secs));
        }
        pool.spawn_browser_watcher();
        pool.spawn_maintenance();
        pool.spawn_session_reaper();
        let declared: Vec<(usize, std::path::PathBuf)> = (cfg.pool.slot.iter())
            .filter_map(|d| Some((*d.id.get_ref(), d.session.clone()?)))
            .collect();
        pool.import_declared_sessions(&declared);
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
        for s in registry.all() {
            self.inner.drift.forget(s.name());
        }
        *self.inner.registry.write() = Arc::new(registry);
        self.inner.events.emit(
            "reload",
            None,
            None,
            serde_json::json!({"ok": true, "strategies": n}),
        );
        Ok(n)
    }

    /// Every strategy name (each marketplace's too), then the open-web
    /// hosts the pool has routed to ([`web_key`]), sorted.
    pub fn strategy_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .registry()
            .all()
            .map(|s| s.name().to_string())
            .collect();
        let mut web: Vec<String> = (self.inner.router.lock().sites.keys())
            .filter(|k| is_web_key(k))
            .cloned()
            .collect();
        web.sort();
        names.extend(web);
        names
    }

    /// Connections and MCP sessions the daemon holds open.
    pub fn serving(&self) -> &serving::Serving {
        &self.inner.serving
    }

    /// Who sees personal data in clear, and the mask for the others.
    pub fn pii(&self) -> &pii::Pii {
        &self.inner.pii
    }

    /// Outcomes per strategy per minute over the last hour.
    pub fn rates(&self) -> serde_json::Value {
        self.inner.rates.report()
    }

    /// Selector drift per strategy, operation and field.
    pub fn drift(&self) -> serde_json::Value {
        self.inner.drift.report()
    }

    /// Every drift rate: (strategy, operation, field or `None` for pages
    /// without items, recent empty ratio, drifting).
    pub fn drift_series(&self) -> Vec<(String, String, Option<String>, f64, bool)> {
        self.inner.drift.series()
    }

    /// The pool's event hub.
    pub fn events(&self) -> &Events {
        &self.inner.events
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
        let result = lease.browse(url.clone(), None, |_, _| ()).await;
        let fetched = lease.close(result.map(|(f, ())| f))?;
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
        self.inner.stop.cancel();
        self.reap_browser_sessions(true).await;
        if let Some(c) = &self.inner.calibrator {
            c.shutdown().await;
        }
        futures_util::future::join_all(self.inner.slots.iter().map(|s| s.browser().close())).await;
        self.save_jars().await;
        // The fleet gets the last word of every identity held here.
        if let Some(f) = self.inner.fleet.as_ref().filter(|f| f.cluster().is_up()) {
            let _ = self.write_identities().await;
            // No more calls forwarded here; the leases lapse on their own
            // (a restart within the TTL keeps its identities).
            let _ = f.cluster().unregister().await;
        }
    }

    /// Lease a slot for whichever strategy covers `url` (its host's
    /// [`web_key`] if none).
    pub async fn lease_for(&self, url: &url::Url, pin: Option<usize>) -> Result<Lease> {
        match self.strategy_for(url) {
            Some(s) => self.next_slot(s.name(), pin).await,
            None => {
                // A scheme or host the guard refuses, said in its words.
                self.inner.guard.check_static(url)?;
                let host = url
                    .host_str()
                    .ok_or_else(|| Error::refused("URL has no host"))?;
                self.next_slot(&web_key(host), pin).await
            }
        }
    }

    /// One navigation in a slot's browser, as one call: lease, [`Lease::browse`],
    /// finish with its outcome.
    pub async fn browse(
        &self,
        url: url::Url,
        wait_for: Option<String>,
        pin: Option<usize>,
    ) -> Result<Fetched> {
        let lease = self.lease_for(&url, pin).await?;
        let result = lease.browse(url, wait_for.as_deref(), |_, _| ()).await;
        lease.close(result.map(|(f, ())| f))
    }

    /// One HTTP request through the pool, as one call: lease, [`Lease::http`],
    /// finish with its outcome.
    pub async fn fetch(&self, req: FetchRequest, pin: Option<usize>) -> Result<Fetched> {
        Call::new(self, pin).http(req).await
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

    /// Whether the browsers run in their own network namespace.
    pub fn isolation(&self) -> &Isolation {
        &self.inner.isolation
    }

    /// The browsers' namespace (for tests that check what can be reached
    /// from inside it).
    pub fn netns(&self) -> Option<&Arc<crate::wire::netns::Netns>> {
        self.inner._netns.as_ref()
    }

    /// The installed Chromium's major version, read when the pool opened
    /// (the version a slot's user agent claims unless its profile pins one).
    pub fn chromium_major(&self) -> Option<u32> {
        self.inner.chromium_major
    }

    /// The SSRF guard every fetch goes through.
    pub fn guard(&self) -> &Arc<Guard> {
        &self.inner.guard
    }

    /// The `[web]` settings (hosts no strategy covers, crawls).
    pub fn web_config(&self) -> &crate::config::WebConfig {
        &self.inner.web
    }

    /// Background jobs (crawls).
    pub fn jobs(&self) -> &jobs::Jobs {
        &self.inner.jobs
    }

    /// The `[cascade]` settings.
    pub fn cascade_config(&self) -> crate::config::CascadeConfig {
        self.inner.cascade
    }

    /// The strategy responsible for `url`, if any (else the open web's
    /// generic rules).
    pub fn strategy_for(&self, url: &url::Url) -> Option<Arc<dyn Strategy>> {
        let registry = self.registry();
        url.host_str().and_then(|h| registry.for_host(h)).cloned()
    }

    /// Save every jar that changed.
    pub async fn save_jars(&self) {
        for slot in &self.inner.slots {
            slot.save_jar().await;
        }
    }
}

/// Every slot of the config's plan, its user agent following `chromium`
/// (the installed major) unless its profile pins one.
fn open_slots(
    cfg: &Config,
    profiles: &std::collections::BTreeMap<String, profile::Profile>,
    env: &SlotEnv<'_>,
    chromium: Option<u32>,
) -> Result<Vec<Arc<Slot>>> {
    let mut slots = Vec::new();
    for plan in cfg.slot_plan().into_iter().chain(cfg.spare_plan()) {
        let mut profile = profiles.get(&plan.profile).cloned().ok_or_else(|| {
            Error::config(format!(
                "slot {} uses profile `{}`, which is not in {}",
                plan.id,
                plan.profile,
                cfg.pool.profiles_dir.display()
            ))
        })?;
        if let Some(major) = chromium {
            profile.follow_browser(major);
        }
        slots.push(Arc::new(Slot::open(
            plan.id,
            profile,
            plan.proxy.as_ref(),
            env,
        )?));
    }
    Ok(slots)
}

/// The fleet side, when `[cluster]` sets a Redis URL; `slots` configured
/// ones (the spares come after them).
fn open_fleet(cfg: &Config, all: usize) -> Result<Option<fleet::Fleet>> {
    let Some(cluster) = crate::cluster::Cluster::open(&cfg.cluster, cfg.server.listen)? else {
        return Ok(None);
    };
    let spares = cfg.spare_plan();
    let profile = spares
        .first()
        .map_or_else(|| "default".to_string(), |p| p.profile.clone());
    Ok(Some(fleet::Fleet::new(
        cluster,
        all - spares.len(),
        spares.len(),
        profile,
        cfg.cluster.adopt,
        cfg.cluster.forward,
    )))
}

/// Host patterns the SSRF guard admits: every strategy's plus `allowed_hosts`.
fn guard_hosts(registry: &Registry, allowed: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = registry.all().flat_map(|s| s.hosts().to_vec()).collect();
    hosts.extend(allowed.iter().cloned());
    hosts
}

/// Count one request in `/metrics`: by strategy, tier and outcome, with its latency.
fn record_request(inner: &Inner, strategy: &str, tier: u8, outcome: &str, elapsed: Duration) {
    let strategy = if is_web_key(strategy) { WEB } else { strategy };
    inner.rates.record(strategy, outcome);
    metrics::counter!("idpool_requests_total",
        "strategy" => strategy.to_string(), "tier" => tier.to_string(), "outcome" => outcome.to_string())
    .increment(1);
    metrics::histogram!("idpool_request_duration_seconds",
        "strategy" => strategy.to_string(), "tier" => tier.to_string())
    .record(elapsed.as_secs_f64());
}
