//! `/metrics` in Prometheus text format. Counters and histograms are recorded
//! where things happen (`idpool_requests_total`, `idpool_request_duration_seconds`
//! in the pool and the cascade; `idpool_mcp_calls_total`,
//! `idpool_mcp_call_duration_seconds` in the dispatcher); gauges of the pool's
//! state (breakers, browsers, sessions, calibration) are set at scrape time.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::mcp::Core;
use crate::routing::BreakerState;

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
            describe();
            metrics::gauge!("idpool_build_info",
                "version" => env!("CARGO_PKG_VERSION"), "commit" => env!("IDPOOL_COMMIT"))
            .set(1.0);
            Some(handle)
        })
        .as_ref()
}

/// The daemon's own process: CPU seconds, RSS, open fds, threads
/// (`process_*`, the names every Prometheus client library uses).
fn process() -> &'static metrics_process::Collector {
    static COLLECTOR: OnceLock<metrics_process::Collector> = OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// What kind of series a name is (for its `# TYPE`).
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every series the daemon serves: kind, name, unit and `# HELP` text.
const HELP: &[(Kind, &str, Option<metrics::Unit>, &str)] = {
    use Kind::{Counter, Gauge, Histogram};
    use metrics::Unit;
    &[
        (
            Gauge,
            "idpool_build_info",
            None,
            "The running build: 1, labelled with version and commit.",
        ),
        (
            Counter,
            "idpool_requests_total",
            None,
            "Requests to sites, by strategy, tier (1 AJAX, 2 HTML, 3 browser) and outcome (ok, empty, hard_block, tier_block, rate_limited, challenge, login_required, failed).",
        ),
        (
            Histogram,
            "idpool_request_duration_seconds",
            Some(Unit::Seconds),
            "Latency of one request to a site, by strategy and tier.",
        ),
        (
            Counter,
            "idpool_mcp_calls_total",
            None,
            "Tool calls, by tool and result (ok, error, invalid, denied, cancelled).",
        ),
        (
            Counter,
            "idpool_audit_writes_total",
            None,
            "write(2) calls the audit log made; each carries one or more calls' lines (group commit).",
        ),
        (
            Counter,
            "idpool_mcp_thin_total",
            None,
            "Streamable HTTP requests answered on the thin path, by lane (session, stateless) and method.",
        ),
        (
            Histogram,
            "idpool_mcp_call_duration_seconds",
            Some(Unit::Seconds),
            "Latency of one tool call, by tool.",
        ),
        (
            Gauge,
            "idpool_mcp_calls_in_flight",
            None,
            "Tool calls running now.",
        ),
        (
            Gauge,
            "idpool_mcp_sessions",
            None,
            "Open MCP sessions, by transport (http, sse).",
        ),
        (
            Gauge,
            "idpool_mcp_sessions_max",
            None,
            "The bound on open MCP sessions (server.max_sessions).",
        ),
        (
            Counter,
            "idpool_mcp_sessions_evicted_total",
            None,
            "MCP sessions closed to stay under the bound (the idlest first).",
        ),
        (
            Gauge,
            "idpool_http_connections",
            None,
            "Open HTTP connections to the daemon.",
        ),
        (
            Gauge,
            "idpool_http_connections_max",
            None,
            "The bound on open HTTP connections (server.max_connections).",
        ),
        (
            Gauge,
            "idpool_strategy_budget_rpm",
            None,
            "Requests a minute across all slots (in a fleet: across the fleet) that a strategy's budget allows now (no series while no budget is in force).",
        ),
        (
            Counter,
            "idpool_strategy_budget_cuts_total",
            None,
            "Times a strategy's adaptive budget was cut after pushback.",
        ),
        (
            Gauge,
            "idpool_strategy_sent_rpm",
            None,
            "Requests a minute this daemon started for a strategy over the last 10 s (its use of the budget; in a fleet, of the fleet's).",
        ),
        (
            Gauge,
            "idpool_strategy_in_flight_max",
            None,
            "Requests this daemon may have in flight at a strategy's site at once (in a fleet: its share of global_max_in_flight).",
        ),
        (
            Gauge,
            "idpool_breaker_state",
            None,
            "Breaker per slot and strategy: 0 closed, 1 half-open, 2 open.",
        ),
        (
            Gauge,
            "idpool_breaker_open",
            None,
            "1 while the breaker of a slot for a strategy is open.",
        ),
        (
            Gauge,
            "idpool_breaker_failures",
            None,
            "Consecutive failures counted by a slot's breaker for a strategy.",
        ),
        (
            Gauge,
            "idpool_breaker_resting",
            None,
            "1 while a slot rests for a strategy after a rate limit.",
        ),
        (
            Counter,
            "idpool_browser_launches_total",
            None,
            "Chromium launches per slot.",
        ),
        (
            Counter,
            "idpool_browser_recycles_total",
            None,
            "Tabs recycled per slot (browser.recycle_after_ops).",
        ),
        (
            Counter,
            "idpool_browser_crashes_total",
            None,
            "Chromium exits the slot did not ask for.",
        ),
        (
            Counter,
            "idpool_browser_rss_restarts_total",
            None,
            "Chromium restarts because its PSS passed browser.max_rss_mb.",
        ),
        (
            Gauge,
            "idpool_browser_running",
            None,
            "1 while the slot's Chromium runs.",
        ),
        (
            Gauge,
            "idpool_browser_rss_bytes",
            Some(Unit::Bytes),
            "Summed RSS of the slot's Chromium process tree (counts shared pages once per process).",
        ),
        (
            Gauge,
            "idpool_browser_pss_bytes",
            Some(Unit::Bytes),
            "PSS of the slot's Chromium process tree: its real memory footprint.",
        ),
        (
            Gauge,
            "idpool_slot_cookies",
            None,
            "Cookies in the slot's jar.",
        ),
        (
            Gauge,
            "idpool_slot_last_success_timestamp_seconds",
            Some(Unit::Seconds),
            "Unix time of the slot's last request that got an answer (0: none yet).",
        ),
        (
            Counter,
            "idpool_slot_retirements_total",
            None,
            "Identities retired per slot.",
        ),
        (
            Gauge,
            "idpool_slot_generation",
            None,
            "The slot's identity generation (grows on each retirement).",
        ),
        (
            Gauge,
            "idpool_slot_proxy_down",
            None,
            "1 while the slot's upstream proxy does not answer.",
        ),
        (
            Gauge,
            "idpool_slot_login_state",
            None,
            "1 for a slot's current login state on a strategy (state: logged_in, logged_out, unknown).",
        ),
        (
            Counter,
            "idpool_egress_requests_total",
            None,
            "Connections the slot's browser egress let through.",
        ),
        (
            Counter,
            "idpool_egress_refused_total",
            None,
            "Connections the slot's browser egress refused (SSRF guard).",
        ),
        (
            Counter,
            "idpool_egress_connect_failures_total",
            None,
            "Connections of the slot's browser egress that failed upstream.",
        ),
        (
            Counter,
            "idpool_egress_bytes_total",
            Some(Unit::Bytes),
            "Bytes through the slot's browser egress, by direction (up, down).",
        ),
        (
            Gauge,
            "idpool_calibrated",
            None,
            "1 while the slot's HTTP tier is calibrated against its own Chromium.",
        ),
        (
            Gauge,
            "idpool_calibration_h2_equal",
            None,
            "1 when the slot's HTTP/2 fingerprint equals its browser's.",
        ),
        (
            Gauge,
            "idpool_calibration_headers_equal",
            None,
            "1 when the slot's navigation headers equal its browser's.",
        ),
        (
            Gauge,
            "idpool_calibration_xhr_headers_equal",
            None,
            "1 when the slot's XHR headers equal its browser's.",
        ),
        (
            Gauge,
            "idpool_calibration_residual",
            None,
            "Differences left between the slot's HTTP tier and its browser after calibration.",
        ),
        (
            Gauge,
            "idpool_linkage_same_device_pairs",
            None,
            "Pairs of slots a fingerprinting library takes for one device (every component each measured at calibration equal).",
        ),
        (
            Gauge,
            "idpool_slot_same_device_peers",
            None,
            "Other slots this slot is one device with to a fingerprinting library (0: none).",
        ),
        (
            Gauge,
            "idpool_slot_most_shared_components",
            None,
            "The most persona-set fingerprint components (canvas, fonts, screen, window, pixel ratio, theme, languages, time zone, locale) this slot shares with any other slot; the machine's own (WebGL, audio, maths, processors, memory) are not counted.",
        ),
        (
            Gauge,
            "idpool_linkage_signed_in_sharing_pairs",
            None,
            "Per strategy with accounts: pairs of its signed-in identities that are one device (doctor warns; [routing] distinct_devices keeps them apart).",
        ),
        (
            Gauge,
            "idpool_slot_browser_signals",
            None,
            "Signals the slot browser's self-check found that a person's Chromium would not show (WebGL's software renderer among them).",
        ),
        (
            Gauge,
            "idpool_calibration_info",
            None,
            "1, labelled with the slot's browser and HTTP JA4 and its Chromium version.",
        ),
        (
            Gauge,
            "idpool_cluster_up",
            None,
            "1 while the fleet's Redis answers (0: degraded, serving from local state).",
        ),
        (
            Counter,
            "idpool_fleet_adoptions_total",
            None,
            "Identities of dead daemons this daemon adopted.",
        ),
        (
            Gauge,
            "idpool_fleet_unhosted_identities",
            None,
            "Identities whose daemon is gone (its registration lapsed, or it has been silent for two beats) and that no daemon took yet (the fleet's count, as this daemon's last beat read it).",
        ),
        (
            Gauge,
            "idpool_fleet_unhosted_oldest_seconds",
            None,
            "How long the longest-waiting identity without a host has waited.",
        ),
        (
            Histogram,
            "idpool_fleet_beat_seconds",
            None,
            "Each heartbeat's time from when it was due to when Redis had it (over a third of the lease TTL: the TTL is too short for this daemon).",
        ),
        (
            Gauge,
            "idpool_extract_field_null_ratio",
            None,
            "Share of a field's values that came back empty (null, \"\", []) on the operation's last pages.",
        ),
        (
            Gauge,
            "idpool_extract_field_drifting",
            None,
            "1 while a field comes back empty far more often than its own history (the site's markup may have changed).",
        ),
        (
            Gauge,
            "idpool_extract_pages_without_items_ratio",
            None,
            "Share of an operation's last pages that had content but no items the extraction could prove empty.",
        ),
        (
            Gauge,
            "idpool_extract_operation_drifting",
            None,
            "1 while an operation's pages come back without items far more often than before.",
        ),
        (
            Counter,
            "idpool_extract_expect_failures_total",
            None,
            "Live results that broke their operation's [operations.X.expect] rules (one per broken rule).",
        ),
    ]
};

/// `# HELP` for every series (rendered with `# TYPE` once a series has a value).
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    process().describe();
    for &(kind, name, unit, help) in HELP {
        match (kind, unit) {
            (Kind::Counter, Some(u)) => describe_counter!(name, u, help),
            (Kind::Counter, None) => describe_counter!(name, help),
            (Kind::Gauge, Some(u)) => describe_gauge!(name, u, help),
            (Kind::Gauge, None) => describe_gauge!(name, help),
            (Kind::Histogram, Some(u)) => describe_histogram!(name, u, help),
            (Kind::Histogram, None) => describe_histogram!(name, help),
        }
    }
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
    let strategies = pool.reports().strategy_names();
    let linkage = pool.leases().identities().linkage();
    metrics::gauge!("idpool_linkage_same_device_pairs")
        .set(linkage["same_device"].as_array().map_or(0, Vec::len) as f64);
    let mut peers: std::collections::BTreeMap<u64, (usize, usize)> = Default::default();
    for pair in linkage["pairs"].as_array().into_iter().flatten() {
        let shared = pair["shared"].as_array().map_or(0, Vec::len);
        let same = usize::from(pair["same_device"] == true);
        for end in [&pair["slots"][0], &pair["slots"][1]] {
            if let Some(id) = end.as_u64() {
                let e = peers.entry(id).or_default();
                e.0 += same;
                e.1 = e.1.max(shared);
            }
        }
    }
    for (id, (same, shared)) in peers {
        let l = [("slot", id.to_string())];
        metrics::gauge!("idpool_slot_same_device_peers", &l).set(same as f64);
        metrics::gauge!("idpool_slot_most_shared_components", &l).set(shared as f64);
    }
    for name in &strategies {
        let pairs = linkage["signed_in_sharing"][name.as_str()]
            .as_array()
            .map_or(0, Vec::len);
        metrics::gauge!("idpool_linkage_signed_in_sharing_pairs", "strategy" => name.clone())
            .set(pairs as f64);
    }
    for name in &strategies {
        // Requests a minute the site's pushback allows across all slots
        // (no series while no budget is in force).
        let b = pool.leases().sites().budget(name);
        let l = [("strategy", name.clone())];
        if let Some(rpm) = b.requests_per_minute {
            metrics::gauge!("idpool_strategy_budget_rpm", &l).set(rpm);
        }
        metrics::counter!("idpool_strategy_budget_cuts_total", &l).absolute(b.cuts);
        metrics::gauge!("idpool_strategy_sent_rpm", &l).set(b.sent_per_minute);
        metrics::gauge!("idpool_strategy_in_flight_max", &l).set(b.in_flight as f64);
    }
    let identities = pool.leases().identities();
    for id in 0..identities.len() {
        if let Some(facts) = identities.facts(id) {
            slot_series(pool, id, &facts, &strategies);
        }
    }
    drift_series(pool);
    metrics::gauge!("idpool_mcp_sessions", "transport" => "http").set(http_sessions as f64);
    metrics::gauge!("idpool_mcp_sessions", "transport" => "sse").set(sse_sessions as f64);
    metrics::gauge!("idpool_mcp_calls_in_flight").set(core.in_flight() as f64);
    let serving = &core.pool().services().serving;
    let (open, cap) = serving.connections();
    metrics::gauge!("idpool_http_connections").set(open as f64);
    metrics::gauge!("idpool_http_connections_max").set(cap as f64);
    metrics::gauge!("idpool_mcp_sessions_max").set(core.settings().max_sessions as f64);
    metrics::counter!("idpool_mcp_sessions_evicted_total").absolute(serving.evicted());
    if let Some(f) = pool.leases().fleet() {
        // The series exists from the start (adoptions count it up).
        metrics::counter!("idpool_fleet_adoptions_total").increment(0);
        let without = f.without_host();
        metrics::gauge!("idpool_fleet_unhosted_identities").set(without.count as f64);
        metrics::gauge!("idpool_fleet_unhosted_oldest_seconds").set(without.oldest.as_secs_f64());
    }
    process().collect();
    handle.run_upkeep();
    handle.render()
}

/// The series of one slot: breakers per strategy, browser, jar, egress,
/// proxy, identity and calibration.
fn slot_series(
    pool: &crate::pool::Pool,
    slot: usize,
    facts: &crate::lease::identities::Facts,
    strategies: &[String],
) {
    let id = slot.to_string();
    for name in strategies {
        let b = pool.breaker(slot, name);
        let labels = [("slot", id.clone()), ("strategy", name.clone())];
        metrics::gauge!("idpool_breaker_state", &labels).set(state_value(b.state));
        metrics::gauge!("idpool_breaker_open", &labels).set(if b.state == BreakerState::Open {
            1.0
        } else {
            0.0
        });
        metrics::gauge!("idpool_breaker_failures", &labels).set(f64::from(b.failures));
        metrics::gauge!("idpool_breaker_resting", &labels).set(
            if b.cause == Some(crate::routing::Cause::RateLimited) {
                1.0
            } else {
                0.0
            },
        );
    }
    let f = &facts.browser;
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
    metrics::gauge!("idpool_slot_cookies", &l).set(facts.cookies as f64);
    let last_ok = facts.last_success.map_or(0.0, |t| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    });
    metrics::gauge!("idpool_slot_last_success_timestamp_seconds", &l).set(last_ok);
    let e = &facts.egress;
    metrics::counter!("idpool_egress_requests_total", &l).absolute(e.requests);
    metrics::counter!("idpool_egress_refused_total", &l).absolute(e.refused);
    metrics::counter!("idpool_egress_connect_failures_total", &l).absolute(e.connect_failures);
    for (dir, n) in [("up", e.bytes_up), ("down", e.bytes_down)] {
        let l = [("slot", id.clone()), ("direction", dir.to_string())];
        metrics::counter!("idpool_egress_bytes_total", &l).absolute(n);
    }
    metrics::gauge!("idpool_slot_proxy_down", &l).set(if facts.proxy_down { 1.0 } else { 0.0 });
    metrics::gauge!("idpool_slot_generation", &l).set(facts.generation as f64);
    let c = &facts.calibration;
    let flag = |b: Option<bool>| if b == Some(true) { 1.0 } else { 0.0 };
    metrics::gauge!("idpool_calibrated", &l).set(flag(Some(c.state == "calibrated")));
    metrics::gauge!("idpool_calibration_h2_equal", &l).set(flag(c.h2_equal));
    metrics::gauge!("idpool_calibration_headers_equal", &l).set(flag(c.headers_equal));
    metrics::gauge!("idpool_calibration_xhr_headers_equal", &l).set(flag(c.xhr_headers_equal));
    metrics::gauge!("idpool_calibration_residual", &l).set(c.residual.len() as f64);
    if let Some(b) = &c.browser {
        metrics::gauge!("idpool_slot_browser_signals", &l).set(b.signals.len() as f64);
    }
    if let (Some(b), Some(h)) = (c.browser_ja4.clone(), c.http_ja4.clone()) {
        let info = vec![
            ("slot", id.clone()),
            ("browser_ja4", b),
            ("http_ja4", h),
            ("chromium", c.chromium.clone().unwrap_or_default()),
        ];
        // A recalibration's new labels replace the old series (set to 0).
        let mut last = LAST_INFO.lock();
        if let Some(old) = last.insert(slot, info.clone())
            && old != info
        {
            metrics::gauge!("idpool_calibration_info", &old).set(0.0);
        }
        metrics::gauge!("idpool_calibration_info", &info).set(1.0);
    }
}

/// Selector drift: per field, how often it came back empty on the last
/// pages and whether that is drifting; per operation, the same for pages
/// without items.
fn drift_series(pool: &crate::pool::Pool) {
    for (strategy, operation, field, ratio, drifting) in pool.leases().drift().series() {
        let flag = if drifting { 1.0 } else { 0.0 };
        match field {
            Some(field) => {
                let l = [
                    ("strategy", strategy),
                    ("operation", operation),
                    ("field", field),
                ];
                metrics::gauge!("idpool_extract_field_null_ratio", &l).set(ratio);
                metrics::gauge!("idpool_extract_field_drifting", &l).set(flag);
            }
            None => {
                let l = [("strategy", strategy), ("operation", operation)];
                metrics::gauge!("idpool_extract_pages_without_items_ratio", &l).set(ratio);
                metrics::gauge!("idpool_extract_operation_drifting", &l).set(flag);
            }
        }
    }
}
