//! The pool: the facade the daemon, the tools and the operator's commands
//! see. It opens the slots (`crate::identity::slot`), the lease source
//! (`crate::lease`, the one way to a site) and the services
//! (`crate::services`), reloads the strategies, hands out leases and
//! reports, and shuts everything down. It owns nothing a service owns.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

mod host;
mod reports;

pub use host::Host;
pub use reports::Reports;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::identity::browser::isolation::isolate;
use crate::identity::lock;
use crate::identity::profile;
use crate::identity::slot::SlotEnv;
use crate::lease::{Fetched, Lease, Leases};
use crate::request::FetchRequest;
use crate::routing::BreakerReport;
use crate::services::{Browsing, FleetSync, Jobs, Logins, Pii, Services, SessionFiles, upkeep};
use crate::strategy::{Registry, Strategy};
use crate::wire::http::{Guard, RootStore};

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
    status: reports::Kept,
}

/// What a reload rebuilds the strategies from.
struct Reload {
    strategies_dir: std::path::PathBuf,
    compiled: Vec<Arc<dyn Strategy>>,
    allowed_hosts: Vec<String>,
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
        let slots = crate::lease::Slots::open(cfg, (&profiles, &profile_problems), &env, chromium)?;
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
            jobs: Arc::new(Jobs::open(&cfg.pool.data_dir, stop.child_token())),
            pii: Pii::open(&cfg.pool.data_dir, cfg.security.pii_role)?,
            serving: Default::default(),
            fleet: FleetSync::new(leases.clone(), stop.clone(), cfg.browser.max_rss_mb),
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

    /// The pool's reports (the status every operator view reads).
    pub fn reports(&self) -> Reports<'_> {
        Reports {
            leases: &self.inner.leases,
            services: &self.inner.services,
            host: &self.inner.host,
            kept: &self.inner.status,
        }
    }

    /// The pool's event hub.
    pub fn events(&self) -> &Events {
        self.inner.leases.events()
    }

    /// End Chromium left behind by an earlier run of any slot (call at
    /// start-up): each slot and the pid ended.
    pub async fn end_stale_browsers(&self) -> Vec<(usize, u32)> {
        self.inner.leases.identities().end_stale_browsers().await
    }

    /// Close every browser (reaping each Chromium) and save every jar.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.services.browsing.reap(true).await;
        if let Some(c) = &self.inner.host.calibrator {
            c.shutdown().await;
        }
        self.inner.leases.identities().close_browsers().await;
        // What still runs in the browsers' namespace (a launch whose call
        // was cut) ends before the daemon does.
        if let Some(ns) = &self.inner.host.netns {
            ns.end(std::time::Duration::from_secs(10)).await;
        }
        // Such a Chromium was killed, not reaped: none outlives the pool.
        for (slot, pid) in self.inner.leases.identities().end_stale_browsers().await {
            tracing::warn!(slot, pid, "ended a Chromium still starting at shutdown");
        }
        self.inner.leases.identities().save_jars().await;
        // The fleet gets the last word of every identity held here.
        if let Some(f) =
            (self.inner.services.fleet.as_ref()).filter(|f| f.fleet().cluster().is_up())
        {
            let _ = f.write_identities().await;
            // No more calls forwarded here; what it held is without a host
            // (a restart within a beat takes it back, else others adopt it).
            let held = f.fleet().held();
            let _ = f.fleet().cluster().unregister(&held).await;
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
        self.inner.leases.sites().breaker(slot, strategy)
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
    let spares = cfg.spare_plan().len();
    Ok(Some(Arc::new(crate::cluster::Fleet::new(
        cluster,
        all - spares,
        (spares, cfg.cluster.beyond_spares()),
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
