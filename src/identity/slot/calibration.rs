//! A slot's calibration bookkeeping: its state (what applies, the last
//! record, the last failure, the runs, the one-run lock and the flag a run
//! raises while it goes), the status operators see, a run's time limit,
//! and which profiles a Chromium can calibrate at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use serde::Serialize;

use crate::identity::calibrate::{Calibrator, Record};
use crate::identity::profile::Profile;
use crate::wire::fingerprint::Calibration;

/// A slot's calibration state, apart from the rest of the slot.
pub(super) struct CalibrationState {
    /// What the HTTP tier copies from the browser now (`None`: the
    /// profile's emulation as it is).
    pub(super) applied: RwLock<Option<Calibration>>,
    /// The last run's record (also when not applied).
    pub(super) record: RwLock<Option<Record>>,
    /// `None` when `browser.calibrate` is off.
    pub(super) calibrator: Option<Arc<Calibrator>>,
    /// The browser launch count at the last failed run, and why.
    pub(super) failure: Mutex<Option<(u64, String)>>,
    /// Runs since the daemon started.
    pub(super) runs: AtomicU64,
    /// One run of this slot at a time; held for the run.
    pub(super) lock: Arc<tokio::sync::Mutex<()>>,
    /// A run is going: this slot's HTTP-tier requests wait for it (they
    /// would carry the browser's fresh cookie with the uncalibrated
    /// fingerprint).
    pub(super) running: AtomicBool,
}

impl CalibrationState {
    pub(super) fn new(
        calibrator: Option<Arc<Calibrator>>,
        applied: Option<Calibration>,
        record: Option<Record>,
    ) -> CalibrationState {
        CalibrationState {
            applied: RwLock::new(applied),
            record: RwLock::new(record),
            calibrator,
            failure: Mutex::new(None),
            runs: AtomicU64::new(0),
            lock: Arc::new(tokio::sync::Mutex::new(())),
            running: AtomicBool::new(false),
        }
    }
}

/// How a slot's HTTP tier compares with its browser, for operators.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationStatus {
    /// `off` (browser.calibrate = false), `not_applicable` (the profile
    /// emulates a browser that is not Chromium-based), `pending` (no browser launched
    /// yet), `calibrated`, `stale` (made with another Chromium or profile;
    /// renewed at the next launch), `uncalibrated` (switched off on this
    /// slot) or `failed` (no calibration applied and the last run failed;
    /// `error` also reports a failed run while an older calibration applies).
    pub state: &'static str,
    pub chromium: Option<String>,
    /// Unix seconds of the run.
    pub at: Option<u64>,
    pub browser_ja4: Option<String>,
    pub http_ja4: Option<String>,
    pub ja4_a_equal: Option<bool>,
    pub ja4_b_equal: Option<bool>,
    pub h2_equal: Option<bool>,
    pub headers_equal: Option<bool>,
    pub xhr_headers_equal: Option<bool>,
    pub residual: Vec<String>,
    /// What the browser's self-check found at the run (`None` before one).
    pub browser: Option<BrowserSignals>,
    /// Runs since the daemon started.
    pub runs: u64,
    pub error: Option<String>,
}

/// The slot browser's self-check, for operators: every signal by name
/// (`name: detail`), and WebGL as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrowserSignals {
    pub signals: Vec<String>,
    /// The signals' names alone, in order (`screen`, `webgl`, …).
    pub names: Vec<String>,
    pub webgl: Option<String>,
}

impl BrowserSignals {
    pub fn of(c: &crate::identity::calibrate::check::BrowserCheck) -> Self {
        BrowserSignals {
            signals: c.signals.iter().map(ToString::to_string).collect(),
            names: c.signals.iter().map(|s| s.name.clone()).collect(),
            webgl: c.webgl.clone(),
        }
    }
}

/// An event (and a log line) when a run's self-check signals differ from
/// the last run's (`before`).
pub(super) fn note_browser_signals(
    events: &crate::events::Events,
    slot: usize,
    before: Option<&crate::identity::calibrate::Record>,
    record: &crate::identity::calibrate::Record,
) {
    let names = |r: Option<&crate::identity::calibrate::Record>| {
        r.and_then(|r| r.browser_check.as_ref())
            .map(|c| c.signals.iter().map(|s| s.name.clone()).collect::<Vec<_>>())
    };
    let (was, now) = (names(before), names(Some(record)));
    let Some(check) = record.browser_check.as_ref().filter(|_| now != was) else {
        return;
    };
    tracing::info!(slot, signals = ?now, "the slot browser's self-check changed");
    events.emit(
        "browser_signals",
        Some(slot),
        None,
        serde_json::json!({
            "signals": check.signals.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "before": was,
            "webgl": check.webgl,
        }),
    );
}

/// Raises a slot's `calibrating` flag for as long as it lives.
pub(super) struct Calibrating<'a>(&'a AtomicBool);

impl<'a> Calibrating<'a> {
    pub(super) fn set(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::Release);
        Calibrating(flag)
    }
}

impl Drop for Calibrating<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A bound on one calibration run: a browser launch and two navigations on
/// loopback, three HTTP requests.
pub(super) const CALIBRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

/// Profiles a Chromium can calibrate: Chrome, Edge and Opera emulations.
pub(super) fn chromium_based(profile: &Profile) -> bool {
    matches!(profile.emulation.family(), "chrome" | "edge" | "opera")
}
