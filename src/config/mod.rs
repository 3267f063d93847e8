//! The daemon config (`idpool.toml`): where it is found, what every key means, and
//! the checks `idpool check-config` runs over it and over the profiles and
//! strategies it points at. Every field has a default (`serde(default)`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::diag::{self, Diagnostic};

mod cluster;
mod notify;
mod pool;
mod proxy;
mod recording;
mod role;
mod security;
mod server;
pub use cluster::{ClusterConfig, PeerAddr, PeerHost, redact as redact_redis_url, shown_addr};
pub use notify::NotifyConfig;
pub use pool::{PoolConfig, RetireConfig, SlotDecl};
pub use proxy::{ProxyTemplate, ProxyUrl};
pub use recording::{RecordWhen, RecordingConfig};
pub use role::Role;
pub use security::{PrivateNetworks, SecurityConfig, WebConfig};
pub use server::{DEFAULT_MAX_ANSWER_CHARS, MAX_ANSWER_CHARS, ServerConfig};

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub pool: PoolConfig,
    pub security: SecurityConfig,
    pub breaker: BreakerConfig,
    pub http: HttpConfig,
    pub browser: BrowserConfig,
    pub cascade: CascadeConfig,
    pub web: WebConfig,
    pub cluster: ClusterConfig,
    pub recording: RecordingConfig,
    pub notify: NotifyConfig,
    /// The file this came from; `None` for the embedded defaults.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// `[breaker]`: the per-(slot, strategy) circuit breaker.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive hard blocks that open the circuit.
    pub threshold: u32,
    /// First open period, in seconds; doubles on each re-open.
    pub cooldown_secs: u64,
    /// Cap on the open period (and on a rest).
    pub max_cooldown_secs: u64,
    /// First rest after a rate limit without `Retry-After`, in seconds;
    /// doubles on each rate limit in a row.
    pub rest_secs: u64,
    /// When no slot is admitted for a strategy: fail the call at once with
    /// `retry_after`, or wait (up to `http.max_queue_wait_secs`) for the
    /// earliest admission.
    pub when_all_open: WhenAllOpen,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            threshold: 3,
            cooldown_secs: 300,
            max_cooldown_secs: 3600,
            rest_secs: 30,
            when_all_open: WhenAllOpen::Fail,
        }
    }
}

/// `breaker.when_all_open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenAllOpen {
    Fail,
    Wait,
}

/// `[http]`: the HTTP tier's limits.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    pub connect_timeout_secs: u64,
    /// Whole-request deadline, body included.
    pub timeout_secs: u64,
    /// Bodies larger than this are cut off and the fetch fails.
    pub max_body_bytes: usize,
    pub max_redirects: usize,
    /// How long `next_slot` may wait for a politeness interval before giving up.
    pub max_queue_wait_secs: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout_secs: 10,
            timeout_secs: 30,
            max_body_bytes: 16 * 1024 * 1024,
            max_redirects: 10,
            max_queue_wait_secs: 60,
        }
    }
}

/// `[cascade]`: how an operation moves through tiers and slots.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CascadeConfig {
    /// A tier that hard-blocked a (slot, strategy) is skipped for this long, then probed again.
    pub tier_cooldown_secs: u64,
    /// Slots one call may try (the retry budget).
    pub retry_slots: usize,
    /// Full-jitter backoff between slots: random in [0, min(max, base * 2^n)) ms.
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Requests one call may send to the site, browser navigations included
    /// (at least 1).
    pub max_requests_per_call: usize,
}

impl Default for CascadeConfig {
    fn default() -> Self {
        CascadeConfig {
            tier_cooldown_secs: 600,
            retry_slots: 2,
            backoff_base_ms: 100,
            backoff_max_ms: 2000,
            max_requests_per_call: 4,
        }
    }
}

/// `[browser]`: each slot's lazily launched Chromium.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrowserConfig {
    /// Chromium binary; default: `$IDPOOL_CHROMIUM`, else the first of
    /// /usr/bin/chromium, /usr/bin/chromium-browser, /usr/bin/google-chrome found.
    pub executable: Option<PathBuf>,
    /// Run without a window (set false for `refresh-cookies --headful`-style debugging).
    pub headless: bool,
    /// Where a headful Chromium draws: `"none"` (headless, or the
    /// operator's `$DISPLAY` with `headless = false`), or `"xvfb"`: each
    /// slot's Chromium headful on a virtual display of its own that the
    /// daemon starts, supervises and ends with it (`headless` is then off).
    pub display: Display,
    /// Open a fresh tab and close the old ones after this many browser operations.
    pub recycle_after: u32,
    /// Close a browser nobody used for this long (0: never).
    pub idle_close_secs: u64,
    /// Keep up to this many slots' browsers launched (and calibrated)
    /// ahead of the calls that need them: the slots the router picks next.
    /// Refilled at start and after browser calls, never after an idle
    /// close; skipped while the host's available memory is under
    /// `max_rss_mb` (0: no standby).
    pub standby: usize,
    /// Restart a browser whose process tree's PSS passes this many MiB (0: never).
    pub max_rss_mb: u64,
    /// How long Chromium may take to start and print its DevTools address.
    pub launch_timeout_secs: u64,
    /// Deadline of one browser operation (navigation, waits, cookie sync).
    pub op_timeout_secs: u64,
    /// How long a caller queues for a slot's browser (one operation at a time per slot).
    pub lock_wait_secs: u64,
    /// Calibrate each slot's HTTP tier against its own Chromium (header sets,
    /// HTTP/2 priority, TLS options) when the browser first launches and
    /// whenever Chromium's version changes.
    pub calibrate: bool,
    /// Run the slots' Chromium in a network namespace of the daemon's with
    /// only loopback: their DevTools ports are the daemon's alone and the
    /// egress is their only way out (needs CAP_SYS_ADMIN, or unprivileged
    /// user namespaces). Where no namespace can be made the pool refuses to
    /// start; `false` runs the browsers on the machine's shared loopback,
    /// where every local user can reach their DevTools ports (each egress
    /// still admits only its own slot's browser).
    pub isolate: bool,
    /// Chromium's own sandbox (it needs user namespaces). `false` only where
    /// the container itself is the sandbox (non-root, no capabilities,
    /// read-only root, seccomp), as `deploy/` runs it. Root never has it.
    pub sandbox: bool,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        BrowserConfig {
            executable: None,
            headless: true,
            display: Display::None,
            recycle_after: 200,
            idle_close_secs: 600,
            standby: 0,
            max_rss_mb: 1024,
            launch_timeout_secs: 20,
            op_timeout_secs: 45,
            lock_wait_secs: 60,
            calibrate: true,
            isolate: true,
            sandbox: true,
        }
    }
}

/// `browser.display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Display {
    #[default]
    None,
    Xvfb,
}

/// A slot as resolved from the config: its number and profile name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    pub id: usize,
    pub profile: String,
    /// The slot's upstream proxy when the config names one (else the
    /// profile's, if any).
    pub proxy: Option<ProxyTemplate>,
    /// The operator's labels for the slot (grants name them).
    pub labels: Vec<String>,
}

/// Where the config came from (for `check-config` and logs).
pub fn resolve_path(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("IDPOOL_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    ["./idpool.toml", "/etc/idpool/idpool.toml"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

impl Config {
    /// Load the config by the resolution order of DESIGN.md §8; embedded defaults
    /// when no file is found. An explicitly named file must exist.
    pub fn load(explicit: Option<&Path>) -> Result<Config, Diagnostic> {
        match resolve_path(explicit) {
            Some(path) => Config::load_file(&path),
            None => Ok(Config::default()),
        }
    }

    /// Load one config file; relative paths in it become relative to its folder.
    pub fn load_file(path: &Path) -> Result<Config, Diagnostic> {
        let (mut cfg, text): (Config, String) = diag::read_toml(path)?;
        cfg.check_slots(path, &text)?;
        cfg.check_web(path, &text)?;
        cfg.check_server(path, &text)?;
        if !(1..=16).contains(&cfg.security.bundle_key_derivations) {
            let at = text.find("bundle_key_derivations").map(|p| p..p);
            return Err(Diagnostic::at(
                path,
                &text,
                at,
                "security.bundle_key_derivations must be from 1 to 16",
            ));
        }
        if let Some(problem) = cfg.cluster.problem() {
            let at = text.find("[cluster]").map(|p| p..p);
            return Err(Diagnostic::at(path, &text, at, problem));
        }
        if let Some(problem) = cfg.recording.problem() {
            let at = text.find("[recording]").map(|p| p..p);
            return Err(Diagnostic::at(path, &text, at, problem));
        }
        if let Some(problem) = cfg.notify.problem() {
            let at = text.find("[notify]").map(|p| p..p);
            return Err(Diagnostic::at(path, &text, at, problem));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        let rebase = |p: &mut PathBuf| {
            if p.is_relative() {
                let rel = p.strip_prefix(".").unwrap_or(p);
                *p = base.join(rel);
            }
        };
        rebase(&mut cfg.pool.data_dir);
        rebase(&mut cfg.pool.strategies_dir);
        rebase(&mut cfg.pool.profiles_dir);
        rebase(&mut cfg.server.keys_file);
        if let Some(d) = cfg.recording.dir.as_mut() {
            rebase(d);
        }
        cfg.cluster.rebase(rebase);
        cfg.pool
            .slot
            .iter_mut()
            .filter_map(|d| d.session.as_mut())
            .for_each(rebase);
        if let Some(a) = cfg.server.audit_log.as_mut() {
            rebase(a);
        }
        cfg.security.extra_root_certs.iter_mut().for_each(rebase);
        if let Some(exe) = cfg.browser.executable.as_mut() {
            rebase(exe);
        }
        cfg.source = Some(path.to_path_buf());
        Ok(cfg)
    }

    fn check_server(&self, path: &Path, text: &str) -> Result<(), Diagnostic> {
        let s = &self.server;
        let at = text.find("[server]").map(|p| p..p);
        let zero = [
            ("header_timeout_secs", s.header_timeout_secs == 0),
            ("max_sessions", s.max_sessions == 0),
            ("max_sessions_per_key", s.max_sessions_per_key == 0),
            (
                "max_answer_chars",
                s.max_answer_chars == 0 || s.max_answer_chars > MAX_ANSWER_CHARS,
            ),
        ];
        match zero.iter().find(|(_, z)| *z) {
            Some((name, _)) => Err(Diagnostic::at(
                path,
                text,
                at,
                if *name == "max_answer_chars" {
                    format!("server.max_answer_chars must be from 1 to {MAX_ANSWER_CHARS}")
                } else {
                    format!("server.{name} must be at least 1")
                },
            )),
            None => Ok(()),
        }
    }

    fn check_web(&self, path: &Path, text: &str) -> Result<(), Diagnostic> {
        let w = &self.web;
        let at = text.find("[web]").map(|p| p..p);
        if w.max_in_flight == 0 || w.global_max_in_flight == 0 {
            return Err(Diagnostic::at(
                path,
                text,
                at,
                "web.max_in_flight and web.global_max_in_flight must be at least 1",
            ));
        }
        if !w
            .robots_agent
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '-' || c == '_')
            || w.robots_agent.is_empty()
        {
            return Err(Diagnostic::at(
                path,
                text,
                at,
                format!(
                    "web.robots_agent `{}` must be a product token (letters, `-` and `_`, as RFC 9309 matches them)",
                    w.robots_agent
                ),
            ));
        }
        Ok(())
    }

    fn check_slots(&self, path: &Path, text: &str) -> Result<(), Diagnostic> {
        let pool_pos = text.find("[pool]").map(|p| p..p);
        let p = &self.pool;
        if !p.slot.is_empty() && (p.profiles.is_some() || p.size.is_some() || p.profile.is_some()) {
            return Err(Diagnostic::at(
                path,
                text,
                Some(p.slot[0].id.span()),
                "[[pool.slot]] cannot be combined with pool.profiles, pool.size or pool.profile",
            ));
        }
        if p.profiles.is_some() && (p.size.is_some() || p.profile.is_some()) {
            return Err(Diagnostic::at(
                path,
                text,
                pool_pos,
                "pool.profiles cannot be combined with pool.size / pool.profile: list the profiles, or give a size and one profile",
            ));
        }
        if p.size == Some(0) || p.profiles.as_ref().is_some_and(Vec::is_empty) {
            return Err(Diagnostic::at(
                path,
                text,
                pool_pos,
                "the pool needs at least one slot",
            ));
        }
        let mut seen: Vec<&SlotDecl> = Vec::new();
        for s in &p.slot {
            if let Some(first) = seen.iter().find(|f| f.id.get_ref() == s.id.get_ref()) {
                return Err(Diagnostic::at(
                    path,
                    text,
                    Some(s.id.span()),
                    format!(
                        "duplicate slot {} (first declared on line {})",
                        s.id.get_ref(),
                        diag::line_of(text, first.id.span().start)
                    ),
                ));
            }
            seen.push(s);
        }
        let n = p.slot.len();
        if let Some(s) = p.slot.iter().find(|s| *s.id.get_ref() >= n) {
            return Err(Diagnostic::at(
                path,
                text,
                Some(s.id.span()),
                format!(
                    "slot {} is out of range: {n} slots must be numbered 0..{}",
                    s.id.get_ref(),
                    n.saturating_sub(1)
                ),
            ));
        }
        let total = self.slot_plan().len();
        if usize::from(p.base_port) + total > usize::from(u16::MAX) {
            return Err(Diagnostic::at(
                path,
                text,
                pool_pos,
                format!(
                    "base_port {} + {total} slots runs past port 65535",
                    p.base_port
                ),
            ));
        }
        Ok(())
    }

    /// The slots this config asks for, in order.
    pub fn slot_plan(&self) -> Vec<SlotPlan> {
        let p = &self.pool;
        let listed =
            |id: usize| (!p.proxies.is_empty()).then(|| p.proxies[id % p.proxies.len()].clone());
        if !p.slot.is_empty() {
            let mut v: Vec<SlotPlan> = p
                .slot
                .iter()
                .map(|s| SlotPlan {
                    id: *s.id.get_ref(),
                    profile: s.profile.get_ref().clone(),
                    proxy: s.proxy.clone().or_else(|| listed(*s.id.get_ref())),
                    labels: s.labels.clone(),
                })
                .collect();
            v.sort_by_key(|s| s.id);
            return v;
        }
        if let Some(list) = &p.profiles {
            return list
                .iter()
                .enumerate()
                .map(|(id, profile)| SlotPlan {
                    id,
                    profile: profile.clone(),
                    proxy: listed(id),
                    labels: Vec::new(),
                })
                .collect();
        }
        let profile = p.profile.clone().unwrap_or_else(|| "default".into());
        (0..p.size.unwrap_or(2))
            .map(|id| SlotPlan {
                id,
                profile: profile.clone(),
                proxy: listed(id),
                labels: Vec::new(),
            })
            .collect()
    }
}

impl Config {
    /// This config for a command that opens the pool itself: it never joins
    /// the fleet (only `idpool serve` does).
    pub fn without_fleet(&self) -> Config {
        let mut c = self.clone();
        c.cluster.local_only = true;
        c
    }

    /// The spare slots a fleet daemon opens for adoption
    /// (`cluster.spare_slots` with `cluster.adopt`), numbered after the
    /// configured ones, wearing `cluster.spare_profile`.
    pub fn spare_plan(&self) -> Vec<SlotPlan> {
        if self.cluster.url().is_none() {
            return Vec::new();
        }
        let first = self.slot_plan().len();
        let p = &self.pool;
        let profile = (self.cluster.spare_profile.clone())
            .or_else(|| p.profile.clone())
            .unwrap_or_else(|| "default".into());
        (first..first + self.cluster.spares())
            .map(|id| SlotPlan {
                id,
                profile: profile.clone(),
                proxy: (!p.proxies.is_empty()).then(|| p.proxies[id % p.proxies.len()].clone()),
                labels: Vec::new(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, Diagnostic> {
        let cfg: Config = diag::parse_toml(Path::new("c.toml"), text)?;
        cfg.check_slots(Path::new("c.toml"), text)?;
        Ok(cfg)
    }

    #[test]
    fn defaults_are_two_default_slots() {
        let cfg = Config::default();
        assert_eq!(cfg.slot_plan().len(), 2);
        assert_eq!(cfg.pool.base_port, 19300);
        assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:8790");
    }

    #[test]
    fn slot_forms() {
        let c = parse("[pool]\nprofiles = [\"a\", \"b\", \"a\"]\n").unwrap();
        assert_eq!(
            c.slot_plan()
                .iter()
                .map(|s| s.profile.as_str())
                .collect::<Vec<_>>(),
            ["a", "b", "a"]
        );
        let c = parse("[pool]\nsize = 3\nprofile = \"x\"\n").unwrap();
        assert_eq!(c.slot_plan().len(), 3);
        let c = parse(
            "[[pool.slot]]\nid = 1\nprofile = \"b\"\n[[pool.slot]]\nid = 0\nprofile = \"a\"\n",
        )
        .unwrap();
        assert_eq!(c.slot_plan()[0].profile, "a");
    }

    #[test]
    fn duplicate_slot_names_its_line() {
        let d = parse(
            "[[pool.slot]]\nid = 0\nprofile = \"a\"\n\n[[pool.slot]]\nid = 0\nprofile = \"b\"\n",
        )
        .unwrap_err();
        assert_eq!(d.line, Some(6), "{d}");
        assert!(
            d.message
                .contains("duplicate slot 0 (first declared on line 2)"),
            "{d}"
        );
    }

    #[test]
    fn wrong_type_names_its_line() {
        let d = parse("[pool]\nbase_port = \"high\"\n").unwrap_err();
        assert_eq!(d.line, Some(2), "{d}");
    }
}
