//! What a slot is opened from ([`SlotEnv`], the pool's shared parts) and
//! what its Chromium is started as: the launch spec (behind the slot's
//! egress) and the identity every tab claims, both from the profile.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{BrowserConfig, HttpConfig};
use crate::error::Result;
use crate::events::Events;
use crate::identity::browser::{ClientHints, Device, Identity, LaunchSpec};
use crate::identity::calibrate::Calibrator;
use crate::identity::persona::Persona;
use crate::identity::profile::Profile;
use crate::wire::egress::{Egress, EgressConfig, UpstreamHealth};
use crate::wire::http::{Guard, RootStore};

/// Everything a slot needs from the pool to open.
pub struct SlotEnv<'a> {
    pub data_dir: &'a Path,
    pub base_port: u16,
    pub http: HttpConfig,
    pub roots: &'a RootStore,
    pub guard: Arc<Guard>,
    pub browser: &'a BrowserConfig,
    /// SPKI pins of `security.extra_root_certs` (and the calibration
    /// listener's) for Chromium.
    pub spki: &'a [String],
    /// `security.extra_root_certs`, DER: each slot's Chromium trusts them
    /// through its own NSS database.
    pub trust_roots: &'a [Vec<u8>],
    /// TLS to `https://` upstream proxies, for every slot's egress.
    pub proxy_tls: Arc<crate::wire::egress::ProxyTls>,
    pub calibrator: Option<Arc<Calibrator>>,
    pub events: Arc<Events>,
    /// The pool's shutdown signal (the slot's egress ends with it).
    pub stop: &'a tokio_util::sync::CancellationToken,
    /// The browsers' namespace, when they are isolated.
    pub netns: Option<Arc<crate::wire::netns::Netns>>,
    /// `pool.proxy_failures` and `pool.proxy_probe_secs`.
    pub proxy_health: (u32, std::time::Duration),
    /// The machine's slots' personas: a new identity draws one unlike them.
    pub personas: Arc<crate::identity::persona::Book>,
}

/// Slot `id`'s device: its persona under its profile. Font packages the
/// persona has that this machine lacks are named in a warning.
pub(super) fn device(id: usize, profile: &Profile, persona: &Persona) -> Device {
    let (device, missing) = persona.device(profile, id);
    if !missing.is_empty() {
        tracing::warn!(
            slot = id,
            packages = %missing.join(" "),
            "the slot's persona has font packages this machine lacks; its browser shows the others (install them: scripts/lib.sh's ensure_packages does)"
        );
    }
    device
}

pub(super) fn launch_spec(
    id: usize,
    profile: &Profile,
    device: Device,
    dir: &Path,
    port: u16,
    egress: &Egress,
    env: &SlotEnv<'_>,
) -> LaunchSpec {
    LaunchSpec {
        slot: id,
        executable: PathBuf::new(), // resolved at launch, so HTTP-only use needs no Chromium
        port,
        user_data_dir: dir.join("chromium"),
        pid_file: dir.join("chromium.pid"),
        headless: env.browser.headless,
        xvfb: env.browser.display == crate::config::Display::Xvfb,
        user_agent: profile.user_agent.clone(),
        languages: profile.languages(),
        device,
        pointer: profile.pointer(),
        proxy_server: Some(egress.proxy_server()),
        spki: env.spki.to_vec(),
        trust_roots: env.trust_roots.to_vec(),
        launch_timeout: std::time::Duration::from_secs(env.browser.launch_timeout_secs),
        netns: env.netns.clone(),
        sandbox: env.browser.sandbox,
        egress_peers: Some(egress.peers().clone()),
    }
}

/// The browser speaks with the same identity as the slot's HTTP tier.
pub(super) fn identity(profile: &Profile) -> Identity {
    let brands = profile
        .sec_ch_ua
        .as_deref()
        .map(crate::identity::browser::page::parse_sec_ch_ua)
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
        navigator_platform: profile.navigator_platform().to_string(),
        hints,
        // A phone's touch screen takes five fingers, as Android reports.
        touch_points: match profile.pointer() {
            crate::identity::profile::Pointer::Coarse => 5,
            crate::identity::profile::Pointer::Fine => 0,
        },
    }
}

/// The slot's egress: its browser's one way out, chained to the slot's
/// upstream (the profile's proxy as the slot resolved it); the daemon's
/// calibration listener is let through.
pub(super) fn start_egress(id: usize, profile: &Profile, env: &SlotEnv<'_>) -> Result<Egress> {
    Egress::start(
        EgressConfig {
            slot: id,
            guard: env.guard.clone(),
            upstream: profile.proxy.clone(),
            exempt: env.calibrator.iter().map(|c| c.addr()).collect(),
            connect_timeout: std::time::Duration::from_secs(env.http.connect_timeout_secs),
            proxy_tls: env.proxy_tls.clone(),
            health: Arc::new(UpstreamHealth::new(env.proxy_health.0, env.proxy_health.1)),
            netns: env.netns.clone(),
        },
        env.stop,
    )
}
