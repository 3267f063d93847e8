//! `[pool]`: the slots, their proxies, where their files live, and when an
//! identity retires.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

/// `[pool]`: the identity slots and where their files live.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// One slot per listed profile name. Exclusive with `size`.
    pub profiles: Option<Vec<String>>,
    /// Number of slots made from `profile` (default 2 when nothing else is set).
    pub size: Option<usize>,
    /// Profile used with `size` (default `default`).
    pub profile: Option<String>,
    /// Explicit slots: `[[pool.slot]] id = 0, profile = "..."`. Exclusive with the above.
    pub slot: Vec<SlotDecl>,
    /// Upstream proxies given to the slots in order (slot n gets entry
    /// n mod len), over the profile's `proxy`; `{slot}` and `{session}` may
    /// appear in the user name. A `[[pool.slot]] proxy` wins over this list.
    pub proxies: Vec<super::ProxyTemplate>,
    /// Failures in a row to reach a slot's proxy that make it `proxy_down`.
    pub proxy_failures: u32,
    /// How often a `proxy_down` slot's proxy is probed, in seconds.
    pub proxy_probe_secs: u64,
    /// `[pool.retire]`: when a slot gets a fresh identity by itself.
    pub retire: RetireConfig,
    /// The slot `n` uses CDP port `base_port + n`.
    pub base_port: u16,
    /// Per-slot state: `<data_dir>/slots/<n>/`.
    pub data_dir: PathBuf,
    pub strategies_dir: PathBuf,
    pub profiles_dir: PathBuf,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            profiles: None,
            size: None,
            profile: None,
            slot: Vec::new(),
            proxies: Vec::new(),
            proxy_failures: 3,
            proxy_probe_secs: 10,
            retire: RetireConfig::default(),
            base_port: 19300,
            data_dir: PathBuf::from("./.idpool"),
            strategies_dir: PathBuf::from("./strategies"),
            profiles_dir: PathBuf::from("./profiles"),
        }
    }
}

/// `[pool.retire]`: automatic retirement (a fresh jar, Chromium profile and
/// proxy session for a burned identity). Every trigger is off at 0.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetireConfig {
    /// Retire after this many hard blocks on one strategy.
    pub after_hard_blocks: u32,
    /// Retire after this many requests.
    pub max_uses: u64,
    /// Retire an identity this many seconds old.
    pub max_age_secs: u64,
    /// Retired generations kept in `<slot>/retired/` (older ones are deleted).
    pub retired_keep: usize,
}

impl Default for RetireConfig {
    fn default() -> Self {
        RetireConfig {
            after_hard_blocks: 0,
            max_uses: 0,
            max_age_secs: 0,
            retired_keep: 3,
        }
    }
}

/// One `[[pool.slot]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotDecl {
    pub id: Spanned<usize>,
    pub profile: Spanned<String>,
    /// This slot's upstream proxy (over `pool.proxies` and the profile's).
    #[serde(default)]
    pub proxy: Option<super::ProxyTemplate>,
    /// A session file (cookies.txt, Cookie-Editor JSON or storageState)
    /// imported at start when it changed since its last import.
    #[serde(default)]
    pub session: Option<PathBuf>,
    /// Labels for grants (`[[key.grant]] labels`), e.g. `["de", "retail"]`.
    #[serde(default)]
    pub labels: Vec<String>,
}
