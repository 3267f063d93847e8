//! The pool: the facade the daemon, the tools and the operator's commands
//! see. It opens the slots (`crate::identity::slot`), the lease source
//! (`crate::lease`, the one way to a site) and the services
//! (`crate::services`), reloads the strategies, hands out leases and
//! reports, and shuts everything down. It owns nothing a service owns.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use crate::events::{Events, SlotEvent};
pub use crate::identity::browser::isolation::Isolation;
pub use crate::identity::browser::{BrowserFacts, launcher::major_of};
pub use crate::identity::slot::{CalibrationStatus, Slot, SlotEnv, SlotHealth, SlotIdentity};
pub use crate::lease::{BrowseOptions, Call, Fetched, Lease, Leases, Retirement, Via};
pub use crate::routing::grants;
pub use crate::routing::{
    Admission, Breaker, BreakerReport, BreakerState, Budget, BudgetReport, Cause, Change,
    LoginRecord, Site, Verdict, WEB, is_web_key, web_key,
};
pub use crate::services::{Frame, Imported, LiveSession, LiveStatus, LoginLimits, Services};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::identity::browser::isolation::isolate;
use crate::identity::lock;
use crate::identity::profile;
use crate::services::{Browsing, FleetSync, Jobs, Logins, Pii, SessionFiles, upkeep};
use crate::strategy::{Registry, Strategy};
use crate::wire::http::{FetchRequest, Guard, RootStore};

/// The identity pool. Cheap to clone.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    /// This process owns the data dir while the pool lives.
    _lock: lock::DataDirLock,
    /// The slots, the router and everything a lease shares.
    leases: Arc<Leases>,
    services: Services,
    /// What a reload rebuilds the registry and the guard from.
    reload: Reload,
    /// The machine the browsers run on.
    host: Host,
    /// Cancelled by [`Pool::shutdown`]: the pool's background tasks end.
    stop: CancellationToken,
    /// The last status report and the state it was built from.
    status: parking_lot::Mutex<Option<(Stamp, Arc<serde_json::Value>)>>,
}

/// What a status report depends on: the events emitted, the requests the
/// slots sent, and the second its clocks (time left open, rates) read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    events: u64,
    /// The slots' activity (requests, browser operations, egress traffic).
    activity: u64,
    /// Connections and MCP sessions open.
    serving: (usize, usize, usize),
    second: u64,
}

/// What a reload rebuilds the strategies from.
struct Reload {
    strategies_dir: std::path::PathBuf,
    compiled: Vec<Arc<dyn Strategy>>,
    allowed_hosts: Vec<String>,
}

/// The machine the browsers run on, as the pool found it when it opened.
pub struct Host {
    /// The installed Chromium's major version.
    pub chromium_major: Option<u32>,
    /// Whether the browsers run in their own network namespace, and why not.
    pub isolation: Isolation,
    /// The browsers' namespace and its thread, held for the pool's life.
    pub netns: Option<Arc<crate::wire::netns::Netns>>,
    /// `browser.standby`: browsers kept launched ahead of need.
    pub standby: usize,
    calibrator: Option<Arc<crate::identity::calibrate::Calibrator>>,
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
        let (profiles, profile_problems) = profile::load_dir(&cfg.pool.profiles_dir);
        for p in &profile_problems {
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
            personas: Arc::new(crate::identity::persona::Book::default()),
        };
        // The user agent claims the Chromium that will run (unless a
        // profile pins one), from the first HTTP request on.
        let chromium =
            crate::identity::browser::launcher::installed_major(cfg.browser.executable.as_deref());
        let slots = open_slots(cfg, (&profiles, &profile_problems), &env, chromium)?;
        let fleet = open_fleet(cfg, slots.len())?;
        let slots_len = slots.len();
        let leases = Arc::new(Leases::new(
            slots,
            registry,
            guard,
            events,
            fleet,
            (
                crate::lease::LeaseConfig {
                    breaker: cfg.breaker,
                    cascade: cfg.cascade,
                    web: cfg.web.clone(),
                    max_wait: Duration::from_secs(cfg.http.max_queue_wait_secs),
                    retire: cfg.pool.retire,
                    labels: slot_labels(cfg, slots_len),
                },
                crate::lease::Recordings::open(&cfg.recording, &cfg.pool.data_dir)?,
            ),
        ));
        let services = Services {
            browsing: Arc::new(Browsing::new(leases.clone())),
            logins: Logins::new(leases.clone(), stop.clone()),
            session_files: SessionFiles::new(leases.clone()),
            bundles: crate::services::Bundles::new(
                leases.clone(),
                cfg.security.bundle_key_derivations,
            ),
            jobs: Jobs::open(&cfg.pool.data_dir, stop.child_token()),
            pii: Pii::open(&cfg.pool.data_dir, cfg.security.pii_role)?,
            serving: Default::default(),
            fleet: FleetSync::new(leases.clone(), stop.clone()),
        };
        if let Some(f) = &services.fleet {
            f.spawn();
        }
        leases.set_person_desk(Arc::new(crate::services::Desk::new(
            &services.logins,
            leases.events().clone(),
            &cfg.notify,
            &cfg.server.listen.to_string(),
        )));
        if cfg.browser.idle_close_secs > 0 {
            let idle = Duration::from_secs(cfg.browser.idle_close_secs);
            upkeep::spawn_idle_closer(&leases, &stop, idle);
        }
        crate::services::standby::spawn(
            &leases,
            &stop,
            cfg.browser.standby,
            cfg.browser.max_rss_mb,
        );
        upkeep::spawn_browser_watcher(&leases, &stop);
        upkeep::spawn_maintenance(&leases, &stop);
        services.browsing.spawn_reaper(stop.clone());
        let declared: Vec<(usize, std::path::PathBuf)> = (cfg.pool.slot.iter())
            .filter_map(|d| Some((*d.id.get_ref(), d.session.clone()?)))
            .collect();
        services.session_files.import_declared_sessions(&declared);
        Ok(Pool {
            inner: Arc::new(Inner {
                _lock: lock,
                leases,
                services,
                reload: Reload {
                    strategies_dir: cfg.pool.strategies_dir.clone(),
                    compiled,
                    allowed_hosts: cfg.security.allowed_hosts.clone(),
                },
                host: Host {
                    chromium_major: chromium,
                    isolation,
                    netns,
                    standby: cfg.browser.standby,
                    calibrator,
                },
                stop,
                status: parking_lot::Mutex::new(None),
            }),
        })
    }

    /// Re-read the strategies folder. All or nothing: a broken file keeps the
    /// old strategies and returns every problem found.
    pub fn reload_strategies(&self) -> std::result::Result<usize, Vec<crate::diag::Diagnostic>> {
        let reload = &self.inner.reload;
        let (mut registry, problems) = Registry::load_dir(&reload.strategies_dir);
        let events = self.events();
        if !problems.is_empty() {
            events.emit(
                "reload",
                None,
                None,
                serde_json::json!({"ok": false, "errors": problems.iter().map(|p| p.to_string()).collect::<Vec<_>>()}),
            );
            return Err(problems);
        }
        for s in &reload.compiled {
            if let Err(d) = registry.add(s.clone()) {
                return Err(vec![d]);
            }
        }
        let n = registry.iter().count();
        self.guard()
            .set_hosts(guard_hosts(&registry, &reload.allowed_hosts));
        self.inner.leases.set_registry(registry);
        events.emit(
            "reload",
            None,
            None,
            serde_json::json!({"ok": true, "strategies": n}),
        );
        Ok(n)
    }

    /// The lease source: leases, and every report of routing state
    /// (breakers, budgets, login states, tier memory).
    pub fn leases(&self) -> &Arc<Leases> {
        &self.inner.leases
    }

    /// The services (sessions, logins, jobs, fleet, …).
    pub fn services(&self) -> &Services {
        &self.inner.services
    }

    /// The machine the browsers run on.
    pub fn host(&self) -> &Host {
        &self.inner.host
    }

    /// Every strategy name (each marketplace's too), then the open-web
    /// hosts the pool has routed to ([`web_key`]), sorted.
    pub fn strategy_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .registry()
            .all()
            .map(|s| s.name().to_string())
            .collect();
        let mut web: Vec<String> = (self.inner.leases.router().sites.keys())
            .filter(|k| is_web_key(k))
            .cloned()
            .collect();
        web.sort();
        names.extend(web);
        names
    }

    /// The pool's event hub.
    pub fn events(&self) -> &Events {
        self.inner.leases.events()
    }

    /// End Chromium left behind by an earlier run of any slot (call at start-up).
    pub async fn end_stale_browsers(&self) -> Vec<(usize, u32)> {
        let mut ended = Vec::new();
        for slot in self.slots() {
            if let Some(pid) = slot.browser().end_stale().await {
                ended.push((slot.id, pid));
            }
        }
        ended
    }

    /// Close every browser (reaping each Chromium) and save every jar.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.services.browsing.reap(true).await;
        if let Some(c) = &self.inner.host.calibrator {
            c.shutdown().await;
        }
        futures_util::future::join_all(self.slots().iter().map(|s| s.browser().close())).await;
        self.inner.leases.save_jars().await;
        // The fleet gets the last word of every identity held here.
        if let Some(f) =
            (self.inner.services.fleet.as_ref()).filter(|f| f.fleet().cluster().is_up())
        {
            let _ = f.write_identities().await;
            // No more calls forwarded here; the leases lapse on their own
            // (a restart within the TTL keeps its identities).
            let _ = f.fleet().cluster().unregister().await;
        }
    }

    /// Lease a slot for `strategy` (see [`Leases::next_slot`]).
    pub async fn next_slot(&self, strategy: &str, pin: Option<usize>) -> Result<Lease> {
        self.inner.leases.next_slot(strategy, pin, None).await
    }

    /// One navigation in a slot's browser, as one call.
    pub async fn browse(
        &self,
        url: url::Url,
        wait_for: Option<String>,
        pin: Option<usize>,
    ) -> Result<Fetched> {
        self.inner.leases.browse(url, wait_for, pin, None).await
    }

    /// One HTTP request through the pool, as one call.
    pub async fn fetch(&self, req: FetchRequest, pin: Option<usize>) -> Result<Fetched> {
        self.inner.leases.http(req, pin, None).await
    }

    /// The breaker of (slot, strategy) as operators see it.
    pub fn breaker(&self, slot: usize, strategy: &str) -> BreakerReport {
        self.inner.leases.breaker(slot, strategy)
    }

    pub fn slots(&self) -> &[Arc<Slot>] {
        self.inner.leases.slots()
    }

    /// The status report `build` makes, kept while the pool does not change:
    /// a report is built again once an event is emitted (breakers, browsers,
    /// logins, cookies, reloads), a slot does something (an HTTP request, a
    /// browser operation, egress traffic or a refusal), a connection or MCP
    /// session opens or closes, or the clock reaches the next second (what
    /// `build` reads of time: time left open, rates). Callers between
    /// changes share one report.
    pub fn status_snapshot(
        &self,
        build: impl FnOnce(&Pool) -> serde_json::Value,
    ) -> Arc<serde_json::Value> {
        let serving = &self.services().serving;
        let stamp = Stamp {
            events: self.events().seq(),
            activity: self
                .slots()
                .iter()
                .fold(0u64, |a, s| a.wrapping_add(s.activity())),
            serving: (
                serving.connections().0,
                serving.sessions().0,
                serving.sessions().1,
            ),
            second: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        if let Some((at, report)) = self.inner.status.lock().as_ref()
            && *at == stamp
        {
            return report.clone();
        }
        // Built outside the lock: two callers at a change may both build;
        // the later one's report is kept.
        let report = Arc::new(build(self));
        *self.inner.status.lock() = Some((stamp, report.clone()));
        report
    }

    pub fn slot(&self, id: usize) -> Option<&Arc<Slot>> {
        self.inner.leases.slot(id)
    }

    /// The strategies now (a reload swaps them; holders keep the old set).
    pub fn registry(&self) -> Arc<Registry> {
        self.inner.leases.registry()
    }

    /// The SSRF guard every fetch goes through.
    pub fn guard(&self) -> &Arc<Guard> {
        self.inner.leases.guard()
    }

    /// The strategy responsible for `url`, if any (else the open web's
    /// generic rules).
    pub fn strategy_for(&self, url: &url::Url) -> Option<Arc<dyn Strategy>> {
        self.inner.leases.strategy_for(url)
    }
}

/// Every slot of the config's plan, its user agent following `chromium`
/// (the installed major) unless its profile pins one.
fn open_slots(
    cfg: &Config,
    (profiles, problems): (
        &std::collections::BTreeMap<String, profile::Profile>,
        &[crate::diag::Diagnostic],
    ),
    env: &SlotEnv<'_>,
    chromium: Option<u32>,
) -> Result<Vec<Arc<Slot>>> {
    let mut slots = Vec::new();
    let plans: Vec<_> = cfg
        .slot_plan()
        .into_iter()
        .chain(cfg.spare_plan())
        .collect();
    // The personas slots already have, so that a new one is unlike them all.
    for plan in &plans {
        let dir = cfg.pool.data_dir.join("slots").join(plan.id.to_string());
        if let Some(p) = crate::identity::slot::SlotIdentity::peek_persona(&dir) {
            env.personas.keep(plan.id, &p);
        }
    }
    for plan in plans {
        let mut profile = profiles.get(&plan.profile).cloned().ok_or_else(|| {
            // A slot's profile that did not load fails the open with why.
            let why = problems.iter().find(|d| {
                d.file
                    .file_stem()
                    .is_some_and(|s| s == plan.profile.as_str())
            });
            match why {
                Some(d) => Error::config(format!(
                    "slot {} uses profile `{}`: {d}",
                    plan.id, plan.profile
                )),
                None => Error::config(format!(
                    "slot {} uses profile `{}`, which is not in {}",
                    plan.id,
                    plan.profile,
                    cfg.pool.profiles_dir.display()
                )),
            }
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

/// Each slot's labels by its number (spares have none).
fn slot_labels(cfg: &Config, slots: usize) -> Vec<Vec<String>> {
    let mut labels = vec![Vec::new(); slots];
    for plan in cfg.slot_plan() {
        if let Some(l) = labels.get_mut(plan.id) {
            l.clone_from(&plan.labels);
        }
    }
    labels
}

/// The fleet side, when `[cluster]` sets a Redis URL; `slots` configured
/// ones (the spares come after them).
fn open_fleet(cfg: &Config, all: usize) -> Result<Option<Arc<crate::cluster::Fleet>>> {
    let Some(cluster) = crate::cluster::Cluster::open(&cfg.cluster, cfg.server.listen)? else {
        return Ok(None);
    };
    let spares = cfg.spare_plan();
    let profile = spares
        .first()
        .map_or_else(|| "default".to_string(), |p| p.profile.clone());
    Ok(Some(Arc::new(crate::cluster::Fleet::new(
        cluster,
        all - spares.len(),
        spares.len(),
        profile,
        cfg.cluster.adopt,
        cfg.cluster.forward,
    ))))
}

/// Host patterns the SSRF guard admits: every strategy's plus `allowed_hosts`.
fn guard_hosts(registry: &Registry, allowed: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = registry.all().flat_map(|s| s.hosts().to_vec()).collect();
    hosts.extend(allowed.iter().cloned());
    hosts
}
