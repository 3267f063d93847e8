//! `[security]` (what may be fetched) and `[web]` (how hosts no strategy
//! covers are treated).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `[security]`: what may be fetched and which extra roots are trusted.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecurityConfig {
    /// Any public http(s) host may be fetched (through the generic strategy
    /// when no strategy covers it). `false`: only strategy hosts and
    /// `allowed_hosts`. Private addresses stay refused either way.
    pub public_web: bool,
    /// Hosts fetchable without a strategy when `public_web` is off (same
    /// pattern syntax as strategy hosts).
    pub allowed_hosts: Vec<String>,
    /// Allow private, loopback and link-local addresses: `true` (all), `false`
    /// (none), or a list of the addresses allowed (tests and the demo).
    pub allow_private_networks: PrivateNetworks,
    /// PEM files trusted besides the public roots (corporate TLS proxies, the testbed).
    pub extra_root_certs: Vec<PathBuf>,
    /// Host names resolved to a fixed address instead of asking DNS, for
    /// both tiers (like curl's `--resolve`): `{ "staging.shop.test" =
    /// "127.0.0.1" }`. The address still goes through the guard.
    pub resolve: BTreeMap<String, std::net::IpAddr>,
    /// Callers below this role get strategy fields marked `pii = true`
    /// masked (reviewer names, profile links, emails).
    pub pii_role: super::role::Role,
    /// How many identity bundles (imports and exports) may derive their
    /// key at once (Argon2id at a bundle's cost may hold up to 1 GiB for
    /// seconds); the others wait their turn up to 30 s, then are refused
    /// with `retry_after`. 1 to 16.
    pub bundle_key_derivations: usize,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            public_web: true,
            allowed_hosts: Vec::new(),
            allow_private_networks: PrivateNetworks::default(),
            extra_root_certs: Vec::new(),
            resolve: BTreeMap::new(),
            pii_role: super::role::Role::Admin,
            bundle_key_derivations: 1,
        }
    }
}

/// `[web]`: how hosts no strategy covers are treated (the generic strategy).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// Honour each host's `robots.txt` (RFC 9309) before fetching from it.
    pub respect_robots: bool,
    /// The product token matched against `User-agent:` lines (groups for
    /// `*` apply when none names it).
    pub robots_agent: String,
    /// How long a host's `robots.txt` is kept before it is fetched again.
    pub robots_cache_secs: u64,
    /// Minimum gap between two request starts on one slot to one host, ms.
    pub min_interval_ms: u64,
    /// Requests in flight at once on one slot to one host.
    pub max_in_flight: usize,
    /// Requests in flight at once to one host over the whole pool.
    pub global_max_in_flight: usize,
    /// Largest `max_pages` a crawl may ask for.
    pub max_crawl_pages: usize,
    /// The search-engine strategies `search` asks, in order (the next when
    /// one blocks or cannot answer).
    pub search_engines: Vec<String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            respect_robots: true,
            robots_agent: "idpool".into(),
            robots_cache_secs: 3600,
            min_interval_ms: 1000,
            max_in_flight: 1,
            global_max_in_flight: 2,
            max_crawl_pages: 200,
            search_engines: vec!["duckduckgo".into(), "bing".into()],
        }
    }
}

/// `security.allow_private_networks`: all, none, or these addresses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PrivateNetworks {
    All(bool),
    Only(Vec<std::net::IpAddr>),
}

impl Default for PrivateNetworks {
    fn default() -> Self {
        PrivateNetworks::All(false)
    }
}
