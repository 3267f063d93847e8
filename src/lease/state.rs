//! What every lease shares: the slots, the router's state, the strategies
//! as registered now, the SSRF guard, the fleet's hold table, the robots
//! cache and what the requests are counted in. One owner, [`Leases`];
//! the pool holds it, and each service that makes requests holds it too.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use super::drift::Drift;
use super::rates::Rates;
use super::robots;
use crate::cluster::Fleet;
use crate::config::{BreakerConfig, CascadeConfig, RetireConfig, WebConfig};
use crate::events::Events;
use crate::identity::slot::Slot;
use crate::routing::Router;
use crate::strategy::{Registry, Strategy};
use crate::wire::http::Guard;

/// The settings a lease follows (read once, when the pool opens).
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub breaker: BreakerConfig,
    pub cascade: CascadeConfig,
    /// `[web]`: politeness and robots for hosts no strategy covers.
    pub web: WebConfig,
    /// `http.max_queue_wait_secs`: the longest a lease is waited for.
    pub max_wait: Duration,
    pub retire: RetireConfig,
    /// Each slot's labels (`[[pool.slot]] labels`), for grants by label.
    pub labels: Vec<Vec<String>>,
}

/// The lease source: what every lease of the pool shares.
pub struct Leases {
    pub(super) slots: Vec<Arc<Slot>>,
    pub(super) router: Mutex<Router>,
    /// Woken whenever a lease is released.
    pub(super) released: Notify,
    /// Swapped whole on reload (SIGHUP).
    registry: RwLock<Arc<crate::strategy::Registry>>,
    pub(super) guard: Arc<Guard>,
    pub(super) events: Arc<Events>,
    /// `[cluster]`: which identities this daemon holds.
    pub(super) fleet: Option<Arc<Fleet>>,
    pub(super) robots: robots::Cache,
    /// Outcomes per strategy per minute over the last hour.
    pub(super) rates: Rates,
    /// Extraction that empties against its history.
    pub(super) drift: Drift,
    pub(super) cfg: LeaseConfig,
    /// `cfg.labels`, one entry per slot.
    pub(super) labels: Vec<Vec<String>>,
    /// Recordings of browser work (`[recording]`).
    pub(super) recordings: Arc<super::Recordings>,
    /// Who finds a person when a site wants one (set once the services
    /// that hold the live views exist).
    desk: std::sync::OnceLock<Arc<dyn super::PersonDesk>>,
}

impl Leases {
    /// The labels the operator gave slot `id`.
    pub fn labels(&self, id: usize) -> &[String] {
        self.labels.get(id).map_or(&[], Vec::as_slice)
    }

    pub fn new(
        slots: super::Slots,
        registry: Registry,
        guard: Arc<Guard>,
        events: Arc<Events>,
        fleet: Option<Arc<Fleet>>,
        (cfg, recordings): (LeaseConfig, Arc<super::Recordings>),
    ) -> Leases {
        Leases {
            slots: slots.0,
            router: Mutex::new(Router::default()),
            released: Notify::new(),
            registry: RwLock::new(Arc::new(registry)),
            guard,
            events,
            fleet,
            robots: robots::Cache::default(),
            rates: Rates::default(),
            drift: Drift::default(),
            labels: cfg.labels.clone(),
            cfg,
            recordings,
            desk: std::sync::OnceLock::new(),
        }
    }

    /// Set who finds a person when a site wants one (once).
    pub fn set_person_desk(&self, desk: Arc<dyn super::PersonDesk>) {
        let _ = self.desk.set(desk);
    }

    /// Who finds a person, when the pool has live views.
    pub fn person_desk(&self) -> Option<&Arc<dyn super::PersonDesk>> {
        self.desk.get()
    }

    /// Recordings of browser work.
    pub fn recordings(&self) -> &Arc<super::Recordings> {
        &self.recordings
    }

    /// The slots, for the lease's own files.
    pub(super) fn slots(&self) -> &[Arc<Slot>] {
        &self.slots
    }

    /// The slots themselves, for tests that look inside an identity (its
    /// browser's launch facts, its calibration). Nothing of the library
    /// outside `lease/` calls it (`tests/offline/layers.rs`): what the
    /// rest needs of an identity is a method of [`Leases::identities`].
    #[doc(hidden)]
    pub fn slots_for_tests(&self) -> &[Arc<Slot>] {
        &self.slots
    }

    /// The strategies now (a reload swaps them; holders keep the old set).
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.read().clone()
    }

    /// Swap the strategies (a reload): their drift history is forgotten,
    /// since their selectors changed.
    pub fn set_registry(&self, registry: Registry) {
        for s in registry.all() {
            self.drift.forget(s.name());
        }
        *self.registry.write() = Arc::new(registry);
    }

    /// The strategy registered as `name` now.
    pub fn strategy(&self, name: &str) -> Option<Arc<dyn Strategy>> {
        self.registry.read().get(name).cloned()
    }

    /// The strategy responsible for `url`, if any (else the open web's
    /// generic rules).
    pub fn strategy_for(&self, url: &url::Url) -> Option<Arc<dyn crate::strategy::Strategy>> {
        let registry = self.registry();
        url.host_str().and_then(|h| registry.for_host(h)).cloned()
    }

    /// The generic strategy (`web`) reading the page at `url`, routed as
    /// every request to that host is: under its strategy when one covers
    /// it, else under its open-web key with the open web's politeness.
    pub fn generic_for(
        &self,
        url: &str,
        trust: crate::strategy::web::answer::Trust,
    ) -> crate::error::Result<Arc<dyn Strategy>> {
        let page = url::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"));
        let found = page
            .as_ref()
            .and_then(|u| Some((u.host_str()?, self.site_key(u)?)));
        let Some((host, key)) = found else {
            return Err(crate::error::Error::new(
                crate::error::ErrorKind::InvalidArgument,
                format!("the generic strategy `web` reads a page: give an http(s) URL with a host, not `{url}`"),
            )
            .retryable(false));
        };
        let rules = self.strategy(&key);
        let politeness = crate::routing::router::politeness_of(rules.as_deref(), &self.cfg.web);
        let web = crate::strategy::web::Web::new(key, host, politeness).trusting(trust);
        Ok(Arc::new(web))
    }

    /// What `url`'s requests are routed and counted under: its strategy's
    /// name, else its host's open-web key (`None` without a host).
    pub fn site_key(&self, url: &url::Url) -> Option<String> {
        match self.strategy_for(url) {
            Some(s) => Some(s.name().to_string()),
            None => url.host_str().map(crate::routing::web_key),
        }
    }

    /// Whether `name` is a strategy of the pool's now or an open-web
    /// host's key.
    pub fn knows_strategy(&self, name: &str) -> bool {
        self.registry().get(name).is_some() || crate::routing::is_web_key(name)
    }

    /// The SSRF guard every request goes through.
    pub fn guard(&self) -> &Arc<Guard> {
        &self.guard
    }

    pub fn events(&self) -> &Arc<Events> {
        &self.events
    }

    /// The fleet's hold table, when `[cluster]` is on.
    pub fn fleet(&self) -> Option<&Arc<Fleet>> {
        self.fleet.as_ref()
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// Outcomes per strategy per minute over the last hour.
    pub fn rates(&self) -> &Rates {
        &self.rates
    }

    /// Selector drift per strategy, operation and field.
    pub fn drift(&self) -> &Drift {
        &self.drift
    }

    /// Whether this daemon may use slot `id` now: always without a fleet;
    /// in one, while it holds the slot's identity.
    pub fn in_hand(&self, id: usize) -> bool {
        self.fleet.as_ref().is_none_or(|f| f.usable(id))
    }

    /// The slots the router picks next for browser work, in order: the
    /// next slot of each strategy with a browser tier (by its round-robin
    /// cursor), then of the open web, then the slots after those, each slot
    /// once (for `browser.standby`).
    pub fn browser_order(&self) -> Vec<usize> {
        let n = self.slots().len();
        let registry = self.registry();
        let mut names: Vec<String> = registry
            .all()
            .filter(|s| (s.operations().values()).any(|op| op.tiers.iter().any(|t| t.number == 3)))
            .map(|s| s.name().to_string())
            .collect();
        names.push(crate::routing::WEB.to_string());
        let cursors: Vec<usize> = {
            let router = self.router.lock();
            names.iter().map(|s| router.cursor(s)).collect()
        };
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            for c in &cursors {
                let id = (c + k) % n;
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        out
    }

    /// The router's state, locked (for the fleet's snapshots of it).
    pub(crate) fn router(&self) -> parking_lot::MutexGuard<'_, Router> {
        self.router.lock()
    }

    /// Wake the calls waiting for a slot (one became usable).
    pub(crate) fn wake(&self) {
        self.released.notify_waiters();
    }

    /// Count one request in `/metrics` and the rates: by strategy, tier and
    /// outcome, with its latency.
    pub(super) fn record(&self, strategy: &str, tier: u8, outcome: &str, elapsed: Duration) {
        use crate::routing::{WEB, is_web_key};
        let strategy = if is_web_key(strategy) { WEB } else { strategy };
        self.rates.record(strategy, outcome);
        metrics::counter!("idpool_requests_total",
            "strategy" => strategy.to_string(), "tier" => tier.to_string(), "outcome" => outcome.to_string())
        .increment(1);
        metrics::histogram!("idpool_request_duration_seconds",
            "strategy" => strategy.to_string(), "tier" => tier.to_string())
        .record(elapsed.as_secs_f64());
    }
}
