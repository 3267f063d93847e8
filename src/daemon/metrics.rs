//! `/metrics` in Prometheus text format. Counters and histograms are recorded
//! where things happen (`idpool_requests_total`, `idpool_request_duration_seconds`
//! in the pool and the cascade; `idpool_mcp_calls_total`,
//! `idpool_mcp_call_duration_seconds` in the dispatcher); gauges of the pool's
//! state (breakers, browsers, sessions, calibration) are set at scrape time.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::mcp::Core;
use crate::pool::BreakerState;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

type Labels = Vec<(&'static str, String)>;

/// The labels of each slot's `idpool_calibration_info` series last set.
static LAST_INFO: parking_lot::Mutex<std::collections::BTreeMap<usize, Labels>> =
    parking_lot::Mutex::new(std::collections::BTreeMap::new());

/// Install the process-wide recorder (once); `None` when another recorder won.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ])
                .ok()?;
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Numeric breaker state: 0 closed, 1 half-open, 2 open.
fn state_value(s: BreakerState) -> f64 {
    match s {
        BreakerState::Closed => 0.0,
        BreakerState::HalfOpen => 1.0,
        BreakerState::Open => 2.0,
    }
}

/// The exposition text, with the state gauges brought up to date.
pub fn render(core: &Core, http_sessions: usize, sse_sessions: usize) -> String {
    let Some(handle) = install() else {
        return "# metrics recorder unavailable\n".into();
    };
    let pool = core.pool();
    let strategies = pool.strategy_names();
    for name in &strategies {
        // Requests a minute the site's pushback allows across all slots
        // (no series while no budget is in force).
        let b = pool.budget(name);
        let l = [("strategy", name.clone())];
        if let Some(rpm) = b.requests_per_minute {
            metrics::gauge!("idpool_strategy_budget_rpm", &l).set(rpm);
        }
        metrics::counter!("idpool_strategy_budget_cuts_total", &l).absolute(b.cuts);
    }
    for slot in pool.slots() {
        let id = slot.id.to_string();
        for name in &strategies {
            let b = pool.breaker(slot.id, name);
            let labels = [("slot", id.clone()), ("strategy", name.clone())];
            metrics::gauge!("idpool_breaker_state", &labels).set(state_value(b.state));
            metrics::gauge!("idpool_breaker_open", &labels).set(if b.state == BreakerState::Open {
                1.0
            } else {
                0.0
            });
            metrics::gauge!("idpool_breaker_failures", &labels).set(f64::from(b.failures));
            metrics::gauge!("idpool_breaker_resting", &labels).set(
                if b.cause == Some(crate::pool::Cause::RateLimited) {
                    1.0
                } else {
                    0.0
                },
            );
        }
        let f = slot.browser_facts();
        let l = [("slot", id.clone())];
        metrics::counter!("idpool_browser_launches_total", &l).absolute(f.launches);
        metrics::counter!("idpool_browser_recycles_total", &l).absolute(f.recycles);
        metrics::counter!("idpool_browser_crashes_total", &l).absolute(f.crashes);
        metrics::counter!("idpool_browser_rss_restarts_total", &l).absolute(f.rss_restarts);
        metrics::gauge!("idpool_browser_running", &l).set(if f.running { 1.0 } else { 0.0 });
        metrics::gauge!("idpool_browser_rss_bytes", &l)
            .set(f.rss_mb.map(|mb| (mb * 1024 * 1024) as f64).unwrap_or(0.0));
        metrics::gauge!("idpool_browser_pss_bytes", &l)
            .set(f.pss_mb.map(|mb| (mb * 1024 * 1024) as f64).unwrap_or(0.0));
        metrics::gauge!("idpool_slot_cookies", &l).set(slot.jar().count() as f64);
        let e = slot.egress_facts();
        metrics::counter!("idpool_egress_requests_total", &l).absolute(e.requests);
        metrics::counter!("idpool_egress_refused_total", &l).absolute(e.refused);
        metrics::counter!("idpool_egress_connect_failures_total", &l).absolute(e.connect_failures);
        for (dir, n) in [("up", e.bytes_up), ("down", e.bytes_down)] {
            let l = [("slot", id.clone()), ("direction", dir.to_string())];
            metrics::counter!("idpool_egress_bytes_total", &l).absolute(n);
        }
        metrics::gauge!("idpool_slot_proxy_down", &l).set(if slot.proxy_down() {
            1.0
        } else {
            0.0
        });
        metrics::gauge!("idpool_slot_generation", &l).set(slot.identity().generation as f64);
        let c = slot.calibration_status();
        let flag = |b: Option<bool>| if b == Some(true) { 1.0 } else { 0.0 };
        metrics::gauge!("idpool_calibrated", &l).set(flag(Some(c.state == "calibrated")));
        metrics::gauge!("idpool_calibration_h2_equal", &l).set(flag(c.h2_equal));
        metrics::gauge!("idpool_calibration_headers_equal", &l).set(flag(c.headers_equal));
        metrics::gauge!("idpool_calibration_xhr_headers_equal", &l).set(flag(c.xhr_headers_equal));
        metrics::gauge!("idpool_calibration_residual", &l).set(c.residual.len() as f64);
        if let (Some(b), Some(h)) = (c.browser_ja4, c.http_ja4) {
            let info = vec![
                ("slot", id.clone()),
                ("browser_ja4", b),
                ("http_ja4", h),
                ("chromium", c.chromium.unwrap_or_default()),
            ];
            // A recalibration's new labels replace the old series (set to 0).
            let mut last = LAST_INFO.lock();
            if let Some(old) = last.insert(slot.id, info.clone())
                && old != info
            {
                metrics::gauge!("idpool_calibration_info", &old).set(0.0);
            }
            metrics::gauge!("idpool_calibration_info", &info).set(1.0);
        }
    }
    metrics::gauge!("idpool_mcp_sessions", "transport" => "http").set(http_sessions as f64);
    metrics::gauge!("idpool_mcp_sessions", "transport" => "sse").set(sse_sessions as f64);
    metrics::gauge!("idpool_mcp_calls_in_flight").set(core.in_flight() as f64);
    let serving = core.pool().serving();
    let (open, cap) = serving.connections();
    metrics::gauge!("idpool_http_connections").set(open as f64);
    metrics::gauge!("idpool_http_connections_max").set(cap as f64);
    metrics::gauge!("idpool_mcp_sessions_max").set(core.settings().max_sessions as f64);
    metrics::counter!("idpool_mcp_sessions_evicted_total").absolute(serving.evicted());
    handle.run_upkeep();
    handle.render()
}
