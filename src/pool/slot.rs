//! One identity slot: its profile, its HTTP client and its cookie jar.
//! (Its Chromium arrives with the browser tier.)

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use super::cookies::{Jar, OpenNote};
use crate::browser::{BrowserFacts, ClientHints, Identity, LaunchSpec, SlotBrowser};
use crate::config::{BrowserConfig, HttpConfig};
use crate::error::{Error, Result};
use crate::http::{FetchRequest, FetchResponse, Guard, HttpClient, RootStore};
use crate::profile::Profile;

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
    calibration: parking_lot::RwLock<Option<crate::fingerprint::NavigationProfile>>,
    browser: SlotBrowser,
    health: Mutex<SlotHealth>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("id", &self.id)
            .field("profile", &self.profile.name)
            .finish()
    }
}

/// Everything a slot needs from the pool to open.
pub struct SlotEnv<'a> {
    pub data_dir: &'a Path,
    pub base_port: u16,
    pub http: HttpConfig,
    pub roots: &'a RootStore,
    pub guard: Arc<Guard>,
    pub browser: &'a BrowserConfig,
    /// SPKI pins of `security.extra_root_certs` for Chromium.
    pub spki: &'a [String],
}

impl Slot {
    /// Open slot `id`: create its folder (0700), load its jar, build its client.
    pub fn open(id: usize, profile: Profile, env: &SlotEnv<'_>) -> Result<Slot> {
        let dir = env.data_dir.join("slots").join(id.to_string());
        crate::browser::launcher::create_private_dir(&dir)?;
        let (jar, note) = Jar::open(&dir.join("cookies.json"), profile.seed_cookies.as_deref())?;
        match note {
            OpenNote::Seeded(n) => tracing::info!(
                slot = id,
                cookies = n,
                "jar seeded from the profile's seed cookies"
            ),
            OpenNote::Loaded(n) => tracing::debug!(slot = id, cookies = n, "jar loaded"),
            _ => {}
        }
        let jar = Arc::new(jar);
        let http = HttpClient::new(
            &profile,
            jar.clone(),
            env.http,
            env.roots,
            env.guard.clone(),
        )?;
        let port = usize::from(env.base_port) + id;
        let cdp_port = u16::try_from(port)
            .map_err(|_| Error::config(format!("slot {id}: CDP port {port} is out of range")))?;
        let browser = SlotBrowser::new(
            launch_spec(id, &profile, &dir, cdp_port, env),
            identity(&profile),
            env.browser.clone(),
        );
        Ok(Slot {
            id,
            profile,
            dir,
            cdp_port,
            jar,
            http: parking_lot::RwLock::new(http),
            http_env: (env.http, env.roots.clone(), env.guard.clone()),
            calibration: parking_lot::RwLock::new(None),
            browser,
            health: Mutex::new(SlotHealth::default()),
        })
    }

    pub fn jar(&self) -> &Arc<Jar> {
        &self.jar
    }

    /// Send navigations as `nav` (captured from this slot's browser) does, or
    /// as the profile's emulation does again with `None`.
    pub fn calibrate(&self, nav: Option<crate::fingerprint::NavigationProfile>) -> Result<()> {
        let (cfg, roots, guard) = &self.http_env;
        let client = HttpClient::calibrated(
            &self.profile,
            self.jar.clone(),
            *cfg,
            roots,
            guard.clone(),
            nav.as_ref(),
        )?;
        *self.http.write() = client;
        *self.calibration.write() = nav;
        Ok(())
    }

    /// The navigation profile the HTTP tier uses, if calibrated.
    pub fn calibration(&self) -> Option<crate::fingerprint::NavigationProfile> {
        self.calibration.read().clone()
    }

    /// This slot's Chromium (launched on first use).
    pub fn browser(&self) -> &SlotBrowser {
        &self.browser
    }

    pub fn browser_facts(&self) -> BrowserFacts {
        self.browser.facts()
    }

    pub fn health(&self) -> SlotHealth {
        self.health.lock().clone()
    }

    /// One HTTP request through this identity; the jar is saved when it changed.
    pub async fn fetch(&self, req: FetchRequest) -> Result<FetchResponse> {
        let client = self.http.read().clone();
        let result = client.fetch(req).await;
        {
            let mut h = self.health.lock();
            h.requests += 1;
            match &result {
                Ok(_) => h.last_success = Some(SystemTime::now()),
                Err(e) => h.last_error = Some(e.to_string()),
            }
        }
        self.save_jar().await;
        result
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
            Ok(Err(e)) => tracing::warn!(slot = self.id, error = %e, "cookie jar not saved"),
            Err(e) => tracing::warn!(slot = self.id, error = %e, "cookie jar save task failed"),
        }
    }
}

fn launch_spec(
    id: usize,
    profile: &Profile,
    dir: &Path,
    port: u16,
    env: &SlotEnv<'_>,
) -> LaunchSpec {
    LaunchSpec {
        slot: id,
        executable: PathBuf::new(), // resolved at launch, so HTTP-only use needs no Chromium
        port,
        user_data_dir: dir.join("chromium"),
        pid_file: dir.join("chromium.pid"),
        headless: env.browser.headless,
        user_agent: profile.user_agent.clone(),
        lang: profile.primary_language(),
        window: (profile.viewport.width, profile.viewport.height),
        proxy_server: profile.proxy.as_ref().map(|p| p.without_credentials()),
        spki: env.spki.to_vec(),
        timezone: profile.timezone.clone(),
        launch_timeout: std::time::Duration::from_secs(env.browser.launch_timeout_secs),
    }
}

/// The browser speaks with the same identity as the slot's HTTP tier.
fn identity(profile: &Profile) -> Identity {
    let brands = profile
        .sec_ch_ua
        .as_deref()
        .map(crate::browser::page::parse_sec_ch_ua)
        .unwrap_or_default();
    let hints = (!brands.is_empty()).then(|| ClientHints {
        brands,
        platform: profile.hints_platform().to_string(),
        mobile: matches!(
            profile.platform,
            wreq_util::Platform::Android | wreq_util::Platform::IOS
        ),
    });
    Identity {
        user_agent: profile.user_agent.clone(),
        // Chromium takes the bare list and adds its own q-values (the same ones
        // `Profile::accept_language` already carries).
        accept_language: crate::profile::language_tags(&profile.accept_language).join(","),
        navigator_platform: profile.navigator_platform().to_string(),
        hints,
        proxy_credentials: profile.proxy.as_ref().and_then(|p| p.credentials()),
    }
}
