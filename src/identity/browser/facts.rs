//! What operators see of a slot's browser.

use serde::Serialize;

/// What operators see of a slot's browser.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrowserFacts {
    pub running: bool,
    /// Launched ahead of need (`browser.standby`) and not used since.
    pub standby: bool,
    pub pid: Option<u32>,
    pub port: u16,
    pub ops_since_recycle: u32,
    pub total_ops: u64,
    pub launches: u64,
    pub recycles: u64,
    pub crashes: u64,
    /// Restarts because the process tree passed `max_rss_mb`.
    pub rss_restarts: u64,
    /// The tree's summed RSS (counts shared pages once per process).
    pub rss_mb: Option<u64>,
    /// The tree's PSS: its real footprint, what `max_rss_mb` is held to.
    pub pss_mb: Option<u64>,
    pub last_error: Option<String>,
    /// The running (or last) Chromium's version: what its executable's
    /// `--version` prints, else what DevTools reports.
    pub version: Option<String>,
    /// Every Chromium pid this slot started, oldest first (for hygiene checks).
    #[serde(skip)]
    pub pids: Vec<u32>,
}
