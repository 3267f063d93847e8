//! One identity slot: its profile, its HTTP client, its cookie jar, its
//! browser and the egress that browser leaves through (`slot_env.rs`: what it
//! is opened from and launched as).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;

mod calibration;
mod env;
mod record;
mod wear;

pub use calibration::CalibrationStatus;
pub use env::SlotEnv;
pub use record::{SlotIdentity, check_session};

use self::calibration::{CALIBRATION_TIMEOUT, Calibrating, CalibrationState, chromium_based};
use self::env::{device, identity, launch_spec, start_egress};
use crate::config::HttpConfig;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::identity::browser::{BrowserFacts, SlotBrowser};
use crate::identity::calibrate::Record;
use crate::identity::jar::{Jar, OpenNote};
use crate::identity::profile::{Profile, ProxyTemplate};
use crate::request::FetchRequest;
use crate::wire::egress::{Egress, EgressFacts};
use crate::wire::fingerprint::Calibration;
use crate::wire::http::{FetchResponse, Guard, HttpClient, RootStore};

/// Health counters of a slot, for status output.
#[derive(Debug, Clone, Default)]
pub struct SlotHealth {
    pub requests: u64,
    pub last_success: Option<SystemTime>,
    pub last_error: Option<String>,
}

/// One identity.
pub struct Slot {
    pub id: usize,
    pub profile: Profile,
    /// `<data_dir>/slots/<n>`.
    pub dir: PathBuf,
    /// CDP port of this slot's Chromium: `base_port + n`.
    pub cdp_port: u16,
    jar: Arc<Jar>,
    /// Rebuilt when the slot is calibrated against its browser.
    http: parking_lot::RwLock<HttpClient>,
    /// What a rebuild needs.
    http_env: (HttpConfig, RootStore, Arc<Guard>),
    /// Its HTTP tier's calibration against its browser.
    cal: CalibrationState,
    events: Arc<Events>,
    browser: SlotBrowser,
    /// The browser's guarded way out.
    egress: Egress,
    /// Its session and generation.
    identity: parking_lot::RwLock<SlotIdentity>,
    /// The upstream both tiers use now (rendered from `proxy` for the
    /// current session, else the profile's).
    upstream: parking_lot::RwLock<Option<crate::identity::profile::ProxyUrl>>,
    /// The configured proxy, re-rendered for each new session.
    proxy: Option<ProxyTemplate>,
    /// What retirement policy counts.
    pub(crate) wear: self::wear::Wear,
    health: Mutex<SlotHealth>,
    /// A person is at this identity's browser (a login session).
    person: Arc<AtomicBool>,
    /// The machine's slots' personas (a renewed identity draws one unlike
    /// the others').
    personas: Arc<crate::identity::persona::Book>,
}

/// A person holds a slot's browser while this lives (see
/// [`Slot::hold_for_person`]).
#[derive(Debug)]
pub struct PersonHold(Arc<AtomicBool>);

impl Drop for PersonHold {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("id", &self.id)
            .field("profile", &self.profile.name)
            .finish()
    }
}

impl Slot {
    /// Mark this slot's browser as a person's until the hold drops; `None`
    /// when a person holds it already.
    pub fn hold_for_person(&self) -> Option<PersonHold> {
        (!self.person.swap(true, Ordering::AcqRel)).then(|| PersonHold(self.person.clone()))
    }

    /// Whether a person holds this slot's browser now.
    pub fn held_by_person(&self) -> bool {
        self.person.load(Ordering::Acquire)
    }

    /// Open slot `id`: create its folder (0700), load its jar, build its
    /// client. `proxy` (from the config) replaces the profile's proxy; both
    /// tiers use the one upstream.
    pub fn open(
        id: usize,
        mut profile: Profile,
        proxy: Option<&ProxyTemplate>,
        env: &SlotEnv<'_>,
    ) -> Result<Slot> {
        let dir = env.data_dir.join("slots").join(id.to_string());
        crate::fsutil::create_private_dir(&dir)?;
        let me = SlotIdentity::load_or_create(&dir, || env.personas.fresh_for(id))?;
        env.personas.keep(id, &me.persona());
        if let Some(t) = proxy {
            profile.proxy = Some(
                t.render(id, &me.session)
                    .map_err(|e| Error::config(format!("slot {id}: proxy: {e}")))?,
            );
        }
        let (jar, note) = Jar::open(&dir.join("cookies.json"))?;
        match (note, &profile.seed_cookies) {
            (OpenNote::Fresh, Some(seed)) => {
                let n = crate::identity::session::seed(&jar, seed)?;
                tracing::info!(
                    slot = id,
                    cookies = n,
                    "jar seeded from the profile's seed cookies"
                );
            }
            (OpenNote::Loaded(n), _) => tracing::debug!(slot = id, cookies = n, "jar loaded"),
            _ => {}
        }
        let jar = Arc::new(jar);
        // A calibration saved by an earlier run applies again if it was made
        // for this profile; a new Chromium version renews it at launch.
        let record = env
            .calibrator
            .as_ref()
            .filter(|_| chromium_based(&profile))
            .and_then(|_| Record::load(&dir))
            .filter(|r| r.user_agent == profile.user_agent);
        let mut record = record;
        let mut calibration = record.as_ref().map(|r| r.calibration.clone());
        let hints = Arc::new(crate::wire::http::hints::Memory::open(
            &dir.join("client_hints.json"),
        ));
        let http = match HttpClient::calibrated(
            &profile.persona(),
            jar.clone(),
            env.http,
            env.roots,
            env.guard.clone(),
            calibration.as_ref(),
        ) {
            Ok(c) => c.with_hints(hints),
            Err(e) if calibration.is_some() => {
                tracing::warn!(slot = id, error = %e, "saved calibration not usable; the slot recalibrates at its next browser launch");
                (record, calibration) = (None, None);
                HttpClient::new(
                    &profile.persona(),
                    jar.clone(),
                    env.http,
                    env.roots,
                    env.guard.clone(),
                )?
                .with_hints(hints)
            }
            Err(e) => return Err(e),
        };
        let port = usize::from(env.base_port) + id;
        let cdp_port = u16::try_from(port)
            .map_err(|_| Error::config(format!("slot {id}: CDP port {port} is out of range")))?;
        let egress = start_egress(id, &profile, env)?;
        let browser = SlotBrowser::new(
            launch_spec(
                id,
                &profile,
                device(id, &profile, &me.persona()),
                &dir,
                cdp_port,
                &egress,
                env,
            ),
            identity(&profile),
            env.browser.clone(),
        )
        .with_page_limit(env.http.max_body_bytes);
        let upstream = profile.proxy.clone();
        Ok(Slot {
            id,
            profile,
            dir,
            cdp_port,
            jar,
            http: parking_lot::RwLock::new(http),
            http_env: (env.http, env.roots.clone(), env.guard.clone()),
            cal: CalibrationState::new(env.calibrator.clone(), calibration, record),
            events: env.events.clone(),
            browser,
            egress,
            identity: parking_lot::RwLock::new(me),
            upstream: parking_lot::RwLock::new(upstream),
            proxy: proxy.cloned(),
            wear: self::wear::Wear::default(),
            health: Mutex::new(SlotHealth::default()),
            person: Arc::new(AtomicBool::new(false)),
            personas: env.personas.clone(),
        })
    }

    pub fn jar(&self) -> &Arc<Jar> {
        &self.jar
    }

    /// Send requests as `cal` (captured from this slot's browser) says, or
    /// as the profile's emulation does with `None` (calibration switched off
    /// on this slot until the next run).
    pub fn set_calibration(&self, cal: Option<Calibration>) -> Result<()> {
        let (cfg, roots, guard) = &self.http_env;
        let mut profile = self.profile.clone();
        profile.proxy = self.upstream();
        let client = HttpClient::calibrated(
            &profile.persona(),
            self.jar.clone(),
            *cfg,
            roots,
            guard.clone(),
            cal.as_ref(),
        )?
        .with_hints(self.http.read().hints().clone());
        *self.http.write() = client;
        *self.cal.applied.write() = cal;
        Ok(())
    }

    /// Take a calibration made elsewhere (an identity bundle) when it was
    /// made for this slot's user agent and calibration is on, as a record
    /// saved by an earlier run applies at start; `false`: not taken, the
    /// slot calibrates at its next browser launch (a newer Chromium there
    /// renews a taken one too).
    pub(crate) fn adopt_calibration(&self, r: serde_json::Value) -> Result<bool> {
        let Ok(r) = serde_json::from_value::<Record>(r) else {
            return Ok(false);
        };
        if self.cal.calibrator.is_none() || r.user_agent != self.profile.user_agent {
            return Ok(false);
        }
        r.save(&self.dir)?;
        self.set_calibration(Some(r.calibration.clone()))?;
        *self.cal.record.write() = Some(r);
        Ok(true)
    }

    /// What the HTTP tier copies from the browser, if calibrated.
    pub fn calibration(&self) -> Option<Calibration> {
        self.cal.applied.read().clone()
    }

    /// The last calibration run's record.
    pub fn calibration_record(&self) -> Option<Record> {
        self.cal.record.read().clone()
    }

    /// One browser navigation (for [`crate::lease::Lease::browse`], which guards it);
    /// afterwards the jar is saved if the page changed it, and the HTTP tier
    /// calibrated if this Chromium (its version) has not been yet.
    pub(crate) async fn navigate(
        self: &Arc<Self>,
        req: &crate::identity::browser::BrowserRequest,
        probe: &crate::identity::browser::Probe<'_>,
    ) -> Result<crate::identity::browser::PageResult> {
        // A standby browser is this call's now; said before the use is
        // counted, so the standby sees the one and then the other.
        self.browser.claim_standby();
        self.wear.used();
        let result = self.browser.navigate(req, Some(&self.jar), probe).await;
        self.save_jar().await;
        self.calibrate_if_due();
        result
    }

    /// Launch this slot's browser ahead of need (see
    /// [`crate::identity::browser::SlotBrowser::warm`]) and calibrate its
    /// HTTP tier in the background when due; `Ok(true)` when it launched.
    pub async fn warm_browser(self: &Arc<Self>) -> Result<bool> {
        let launched = self.browser.warm().await?;
        if launched {
            self.calibrate_if_due();
        }
        Ok(launched)
    }

    /// Browser navigations this slot made (since its identity was last renewed).
    pub fn browser_uses(&self) -> u64 {
        self.wear.uses()
    }

    /// Calibrate when the browser runs a version (or the slot a profile) no
    /// record was made with; one attempt per browser launch. The run goes on
    /// in the background, so the call that launched the browser has its page
    /// at once; this slot's HTTP-tier requests wait for the run (others do not).
    pub fn calibrate_if_due(self: &Arc<Self>) {
        if self.cal.calibrator.is_none()
            || !chromium_based(&self.profile)
            || !self.calibration_due()
        {
            return;
        }
        // Another request of this slot is calibrating it: go on without waiting.
        let Ok(run) = self.cal.lock.clone().try_lock_owned() else {
            return;
        };
        if !self.calibration_due() {
            return;
        }
        // Raised before the task starts, so no HTTP request slips in between.
        self.cal.running.store(true, Ordering::Release);
        let slot = self.clone();
        tokio::spawn(async move {
            let _flag = Calibrating::set(&slot.cal.running);
            if let Err(e) = slot.run_calibration().await {
                tracing::warn!(slot = slot.id, error = %e, "calibration failed; the HTTP tier keeps its last settings");
            }
            drop(_flag);
            drop(run);
        });
    }

    /// Wait until no calibration run of this slot is going (bounded by the
    /// run's own limit).
    pub async fn calibration_settled(&self) {
        if self.cal.running.load(Ordering::Acquire) {
            drop(self.cal.lock.lock().await);
        }
    }

    /// The browser runs a version (or the slot a profile) the record was not
    /// made with, and no run failed during this launch.
    fn calibration_due(&self) -> bool {
        let facts = self.browser.facts();
        let Some(version) = facts.version else {
            return false; // never launched
        };
        let current = (self.cal.record.read())
            .as_ref()
            .is_some_and(|r| r.chromium == version && r.user_agent == self.profile.user_agent);
        let failed_this_launch = self
            .cal
            .failure
            .lock()
            .as_ref()
            .is_some_and(|(launch, _)| *launch == facts.launches);
        !current && !failed_this_launch
    }

    /// Run a calibration now (launching the browser if needed), apply and
    /// save it; after a run of this slot already going.
    pub async fn calibrate_now(&self) -> Result<Record> {
        let _run = self.cal.lock.lock().await;
        let _flag = Calibrating::set(&self.cal.running);
        self.run_calibration().await
    }

    async fn run_calibration(&self) -> Result<Record> {
        let Some(calibrator) = &self.cal.calibrator else {
            return Err(Error::config(format!(
                "slot {}: calibration is off (browser.calibrate = false)",
                self.id
            )));
        };
        if !chromium_based(&self.profile) {
            return Err(Error::config(format!(
                "slot {}: profile `{}` emulates {}; its Chromium cannot speak for it, so it is not calibrated",
                self.id,
                self.profile.name,
                self.profile.emulation.family()
            )));
        }
        self.cal
            .runs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let run = async {
            let subject = crate::identity::calibrate::Subject {
                id: self.id,
                browser: &self.browser,
                profile: &self.profile,
                http: self.http_env.0,
            };
            let record = calibrator.run(subject).await?;
            self.set_calibration(Some(record.calibration.clone()))?;
            Ok::<_, Error>(record)
        };
        let run = tokio::time::timeout(CALIBRATION_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| {
                Err(Error::new(
                    crate::error::ErrorKind::Timeout,
                    format!(
                        "slot {}: calibration took longer than {} s",
                        self.id,
                        CALIBRATION_TIMEOUT.as_secs()
                    ),
                ))
            });
        match run {
            Ok(record) => {
                *self.cal.failure.lock() = None;
                if let Err(e) = record.save(&self.dir) {
                    tracing::warn!(slot = self.id, error = %e, "calibration record not saved");
                }
                let r = &record.report;
                tracing::info!(
                    slot = self.id,
                    chromium = %record.chromium,
                    browser_ja4 = %r.browser_ja4,
                    http_ja4 = %r.http_ja4,
                    h2_equal = r.h2_equal,
                    headers_equal = r.headers_equal,
                    residual = r.residual.len(),
                    "HTTP tier calibrated against the slot's browser"
                );
                self.events.emit(
                    "calibrated",
                    Some(self.id),
                    None,
                    serde_json::json!({
                        "chromium": record.chromium,
                        "browser_ja4": r.browser_ja4,
                        "http_ja4": r.http_ja4,
                        "h2_equal": r.h2_equal,
                        "headers_equal": r.headers_equal,
                        "residual": r.residual.iter().map(|d| d.what.clone()).collect::<Vec<_>>(),
                    }),
                );
                self::calibration::note_browser_signals(
                    &self.events,
                    self.id,
                    self.cal.record.read().as_ref(),
                    &record,
                );
                *self.cal.record.write() = Some(record.clone());
                Ok(record)
            }
            // The browser it measured was closed or replaced under it: no
            // failure of any launch (the next one calibrates), and none
            // pinned on the launch that replaced it.
            Err(e) if e.kind() == crate::error::ErrorKind::Unavailable => Err(e),
            Err(e) => {
                let launches = self.browser.launches();
                // Shown to viewers (pool_status): redacted like last_error.
                let why = crate::diag::one_line(&e.to_string(), crate::diag::ERROR_CHARS);
                *self.cal.failure.lock() = Some((launches, why));
                self.events.emit(
                    "calibration_failed",
                    Some(self.id),
                    None,
                    serde_json::json!({"error": e.to_string()}),
                );
                Err(e)
            }
        }
    }

    /// For pool_status, `idpool slots` and `/metrics`.
    pub fn calibration_status(&self) -> CalibrationStatus {
        let record = self.cal.record.read().clone();
        let applied = self.cal.applied.read().is_some();
        let error = self.cal.failure.lock().as_ref().map(|(_, e)| e.clone());
        let version = self.browser.facts().version;
        let state = match (&self.cal.calibrator, &record) {
            (None, _) => "off",
            _ if !chromium_based(&self.profile) => "not_applicable",
            (_, None) if error.is_some() => "failed",
            (_, None) => "pending",
            (_, Some(_)) if !applied => "uncalibrated",
            (_, Some(r))
                if r.user_agent != self.profile.user_agent
                    || version.as_ref().is_some_and(|v| *v != r.chromium) =>
            {
                "stale"
            }
            _ => "calibrated",
        };
        let report = record.as_ref().map(|r| &r.report);
        CalibrationStatus {
            state,
            chromium: record.as_ref().map(|r| r.chromium.clone()),
            at: record.as_ref().map(|r| r.at),
            browser_ja4: report.map(|r| r.browser_ja4.clone()),
            http_ja4: report.map(|r| r.http_ja4.clone()),
            ja4_a_equal: report.map(|r| r.ja4_a_equal),
            ja4_b_equal: report.map(|r| r.ja4_b_equal),
            h2_equal: report.map(|r| r.h2_equal),
            headers_equal: report.map(|r| r.headers_equal),
            xhr_headers_equal: report.map(|r| r.xhr_headers_equal),
            residual: report
                .map(|r| r.residual.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
            browser: record
                .as_ref()
                .and_then(|r| r.browser_check.as_ref())
                .map(self::calibration::BrowserSignals::of),
            runs: self.cal.runs.load(std::sync::atomic::Ordering::Relaxed),
            error,
        }
    }

    /// The fingerprint components this slot's browser measured of itself
    /// at its last calibration (`None` before one).
    pub fn components(&self) -> Option<crate::identity::persona::linkage::Components> {
        self.cal
            .record
            .read()
            .as_ref()
            .and_then(|r| r.browser_check.as_ref())
            .and_then(|c| crate::identity::persona::linkage::components_of(&c.seen))
    }

    /// Its device fingerprint (a hash of [`Slot::components`]).
    pub fn device_fingerprint(&self) -> Option<String> {
        self.components()
            .map(|c| crate::identity::persona::linkage::fingerprint(&c))
    }

    /// This slot's Chromium (launched on first use).
    pub fn browser(&self) -> &SlotBrowser {
        &self.browser
    }

    pub fn browser_facts(&self) -> BrowserFacts {
        self.browser.facts()
    }

    /// The browser's egress: what it let through and refused.
    pub fn egress(&self) -> &Egress {
        &self.egress
    }

    pub fn egress_facts(&self) -> EgressFacts {
        self.egress.facts()
    }

    /// The slot's identity now (session, generation).
    pub fn identity(&self) -> SlotIdentity {
        self.identity.read().clone()
    }

    /// The upstream proxy both tiers use now (credentials inside: display
    /// it redacted).
    pub fn upstream(&self) -> Option<crate::identity::profile::ProxyUrl> {
        self.upstream.read().clone()
    }

    /// A new identity: the browser closed, the jar, Chromium profile,
    /// calibration and client hints moved to `retired/<generation>/`, a new session (and the
    /// proxy rendered for it, on both tiers), recalibration at the next
    /// launch. The slot keeps its number. (The pool's `retire` owns the
    /// rest: breakers, events, old generations.)
    pub(crate) async fn renew(&self) -> Result<(SlotIdentity, PathBuf)> {
        self.browser.close().await;
        let old = self.identity();
        let aside = self.dir.join("retired").join(old.generation.to_string());
        crate::fsutil::create_private_dir(&aside)?;
        self.jar.retire(&aside.join("cookies.json"))?;
        for name in ["chromium", "calibration.json", "client_hints.json"] {
            let from = self.dir.join(name);
            if from.exists() {
                std::fs::rename(&from, aside.join(name))
                    .map_err(|e| Error::io(format!("cannot move {} aside", from.display()), e))?;
            }
        }
        self.http.read().hints().clear();
        let new = SlotIdentity::fresh(old.generation + 1, self.personas.fresh_for(self.id));
        self.take_identity(&new)?;
        *self.cal.record.write() = None;
        *self.cal.failure.lock() = None;
        self.set_calibration(None)?;
        self.wear.reset();
        Ok((new, aside))
    }

    /// Become `new` (saved): its session renders the slot's proxy for both
    /// tiers (a retirement's fresh identity, or one adopted from the fleet).
    pub(crate) fn take_identity(&self, new: &SlotIdentity) -> Result<()> {
        new.save(&self.dir)?;
        self.personas.keep(self.id, &new.persona());
        self.browser
            .set_device(device(self.id, &self.profile, &new.persona()));
        if let Some(t) = &self.proxy {
            let url = t
                .render(self.id, &new.session)
                .map_err(|e| Error::config(format!("slot {}: proxy: {e}", self.id)))?;
            *self.upstream.write() = Some(url.clone());
            self.egress.set_upstream(Some(url));
            // The HTTP tier's client carries the upstream: build it again.
            self.set_calibration(self.calibration())?;
        }
        *self.identity.write() = new.clone();
        Ok(())
    }

    /// The slot's upstream proxy is down: the router leaves it alone.
    pub fn proxy_down(&self) -> bool {
        self.egress.health().is_down()
    }

    pub fn health(&self) -> SlotHealth {
        self.health.lock().clone()
    }

    /// A count that moves whenever the slot does something a report shows:
    /// its HTTP requests, its browser's operations, launches and crashes,
    /// its egress's traffic and refusals (each a counter that only grows).
    pub fn activity(&self) -> u64 {
        let e = self.egress.facts();
        let b = self.browser.facts();
        [
            self.health.lock().requests,
            e.requests,
            e.refused,
            e.connect_failures,
            e.strangers,
            e.bytes_up,
            e.bytes_down,
            b.total_ops,
            b.launches,
            b.crashes,
            b.recycles,
            u64::from(b.running),
        ]
        .iter()
        .fold(0u64, |a, n| a.wrapping_add(*n))
    }

    /// One HTTP request through this identity (for [`crate::lease::Lease::http`]);
    /// the jar is saved when it changed.
    pub(crate) async fn fetch(&self, req: &FetchRequest) -> Result<FetchResponse> {
        self.calibration_settled().await;
        self.wear.used();
        let client = self.http.read().clone();
        let result = client.fetch(req).await;
        if self.egress.has_upstream() {
            match &result {
                Ok(_) => {
                    self.egress.health().succeeded();
                }
                // The proxy, or the site behind it? Ask the proxy itself.
                Err(e)
                    if matches!(
                        e.kind(),
                        crate::error::ErrorKind::Network | crate::error::ErrorKind::Timeout
                    ) =>
                {
                    self.egress.probe_upstream().await;
                }
                Err(_) => {}
            }
        }
        {
            let mut h = self.health.lock();
            h.requests += 1;
            match &result {
                Ok(_) => h.last_success = Some(SystemTime::now()),
                Err(e) => {
                    h.last_error = Some(crate::diag::one_line(
                        &e.to_string(),
                        crate::diag::ERROR_CHARS,
                    ));
                }
            }
        }
        self.save_jar().await;
        result
    }

    /// How many redirects one HTTP-tier request may follow (`http.max_redirects`).
    pub fn max_redirects(&self) -> usize {
        self.http.read().max_redirects()
    }

    /// A page the browser loaded outside [`Slot::fetch`] (a click, a form,
    /// a session's navigation) counts as this slot's request too.
    pub fn count_page(&self) {
        let mut h = self.health.lock();
        h.requests += 1;
        h.last_success = Some(SystemTime::now());
    }

    /// Persist the jar if it changed; a failure is logged, never fatal to the request.
    pub async fn save_jar(&self) {
        if !self.jar.is_dirty() {
            return;
        }
        let jar = self.jar.clone();
        let saved = tokio::task::spawn_blocking(move || jar.save_if_dirty()).await;
        match saved {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(slot = self.id, error = %e.with_cause(), "cookie jar not saved (the previous one is kept)");
            }
            Err(e) => tracing::warn!(slot = self.id, error = %e, "cookie jar save task failed"),
        }
    }
}
