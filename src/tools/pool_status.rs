//! `pool_status`: every slot as an operator sees it: profile, proxy (credentials
//! redacted), breaker and tier memory per strategy, browser, cookies, health,
//! and how closely the HTTP tier matches the slot's browser (calibration).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use schemars::JsonSchema;
use serde::Deserialize;

use super::spec::{Description, result_schema, Annotations, Role, Spec, input_schema, parse};
use crate::pool::Pool;

/// `pool_status` arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// In a fleet (`[cluster]`): also every daemon and every identity of
    /// the fleet, with its owner and breakers, as Redis has them.
    #[serde(default)]
    pub fleet: bool,
}

pub const SPEC: Spec = Spec {
    name: "pool_status",
    role: Role::Viewer,
    title: "Pool status",
    description: Description::Fixed(
        "Every strategy's request budget (requests a minute across all slots the site's \
         pushback allows, null: no limit). Every slot: profile, proxy (credentials redacted), \
         breaker per strategy (state, why open: blocked or rate_limited, failures, time left \
         open), tier memory, login state per strategy that has accounts (logged_in, \
         logged_out, unknown, since when and why), browser (running, pid, port, operations, \
         RSS), cookies (count, last saved), last success and error, and calibration: how \
         closely the HTTP tier matches the slot's browser (browser and HTTP JA4, HTTP/2 and \
         headers equal, the residual differences by name), and egress (its listener, whom it \
         admits: the slot's browser only, and strangers turned away). Browsers: whether they \
         run locked in their own network namespace, and what they expose to the machine \
         (exposes). Server: open connections and MCP \
         sessions per transport against their bounds. Drift per strategy and operation: \
         how often each field came back empty on the last pages against its own history, and \
         whether it is drifting (the site's markup may have changed). Cluster (in a fleet): this node, up or \
         degraded, and with fleet = true every daemon and identity of the fleet.",
    ),
    input: input_schema::<Args>,
    strategy_enum: false,
    output: || {
        result_schema(
            json!({"as_of": {"type": "number", "description": "When this report was built (unix seconds): it is built again when an event, a request or the next second changes the pool."}, "slots": {"type": "array", "items": {"type": "object", "properties": {
                "slot": {"type": "integer"}, "profile": {"type": "string"},
                "breakers": {"type": "object"}, "browser": {"type": "object"},
                "cookies": {"type": "object"}, "calibration": {"type": "object"},
                "login": {"type": "object", "description": "Per strategy with a [session] table: state (logged_in, logged_out, unknown), since (unix seconds), evidence (the marker that showed it).", "additionalProperties": {"type": "object"}},
            }}}, "strategies": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "requests_per_minute": {"type": ["number", "null"]},
                "max_requests_per_minute": {"type": ["number", "null"]},
                "adaptive": {"type": "boolean"}, "cuts": {"type": "integer"},
                "scope": {"type": "string", "description": "fleet: the rate is the fleet's budget, shared by every daemon; local."},
                "sent_per_minute": {"type": "number", "description": "Requests a minute this daemon started over the last 10 s (its use of the budget)."},
                "in_flight": {"type": "integer", "description": "Requests this daemon may have in flight at the site at once (in a fleet: its share of global_max_in_flight)."},
            }}}, "browsers": {"type": "object", "description": "isolated, via, reason, sandbox, and exposes: what the slots' browsers expose to other local users."}, "standby": {"type": "object", "description": "browser.standby: wanted (browsers kept launched ahead of need) and ready (launched, not used since); each slot's browser.standby says which."}, "cluster": {"type": ["object", "null"], "description": "In a fleet: node, state (up or degraded), redis (no credentials), for_secs, last_error, reconnects, adopted."}, "fleet": {"type": ["object", "null"]}, "linkage": {"type": "object", "description": "What each pair of slots shares of the fingerprint components each measured at calibration: fingerprints (per slot), pairs [{slots, shared, machine, same_device}], same_device, signed_in_sharing (per strategy: signed-in pairs that are one device), machine (components every slot of one machine shares)."}, "drift": {"type": "object", "description": "Per strategy and operation: pages seen, drifting, without_items {empty_ratio, baseline, drifting} and fields {name: {empty_ratio, baseline, drifting}}."}, "server": {"type": "object", "description": "What the daemon holds open: connections {open, max} and MCP sessions {http, sse, max, evicted}."}}),
            &["slots", "strategies"],
        )
    },
    annotations: Annotations::READS_POOL,
    progress: false,
    budget: crate::tools::Budget::Items,
    also_runs: None,
    route: None,
    run: |pool, args, opts| {
        Box::pin(async move {
            let a: Args = parse("pool_status", args)?;
            let mut v = Value::clone(&snapshot(pool));
            if let Some(scope) = opts.scope.as_deref() {
                let leases = pool.leases();
                hide_unseen(&mut v, |slot| {
                    let signed_in = |s: &str| leases.signed_in(slot, s);
                    scope.may_see(&crate::pool::grants::Identity {
                        slot,
                        labels: leases.labels(slot),
                        signed_in: &signed_in,
                    })
                });
            }
            if a.fleet {
                v["fleet"] = match pool.services().fleet.as_ref() {
                    Some(sync) => match sync.view().await {
                        Ok(view) => view,
                        Err(e) => json!({"error": e.to_string()}),
                    },
                    None => Value::Null,
                };
            }
            Ok(crate::tools::Output::plain(v))
        })
    },
};

/// `status` as a key with grants sees it: the slots no grant of it covers
/// keep their number and state but not what they did (their last error,
/// which names sites and URLs).
pub fn hide_unseen(status: &mut Value, seen: impl Fn(usize) -> bool) {
    for s in status["slots"].as_array_mut().into_iter().flatten() {
        let unseen = s["slot"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .is_some_and(|n| !seen(n));
        if unseen && let Some(o) = s.as_object_mut() {
            o.insert("last_error".into(), Value::Null);
            o.insert("hidden".into(), Value::String("no grant of this key covers this identity".into()));
        }
    }
}

/// The status as callers get it: the pool's snapshot, built by [`run`]
/// again only when the pool changed ([`Pool::status_snapshot`]).
pub fn snapshot(pool: &Pool) -> std::sync::Arc<Value> {
    pool.status_snapshot(run)
}

/// The status built now.
pub fn run(pool: &Pool) -> Value {
    let strategies = pool.strategy_names();
    // Login states only for strategies that can tell (a `[session]` table).
    let with_accounts: Vec<String> = pool
        .registry()
        .all()
        .filter(|s| s.login().is_some())
        .map(|s| s.name().to_string())
        .collect();
    let sessions = pool.services().browsing.list();
    let slots: Vec<Value> = pool
        .slots()
        .iter()
        .map(|slot| {
            let mut breakers = Map::new();
            for name in &strategies {
                let b = pool.breaker(slot.id, name);
                let tiers: Map<String, Value> = pool
                    .leases().tier_memory(slot.id, name)
                    .into_iter()
                    .map(|(t, ago)| (t.to_string(), json!({"blocked_secs_ago": round1(ago)})))
                    .collect();
                breakers.insert(
                    name.clone(),
                    json!({
                        "state": b.state.as_str(),
                        "cause": b.cause.map(|c| c.as_str()),
                        "failures": b.failures,
                        "open_for_secs": b.open_for_secs.map(round1),
                        "tiers_blocked": tiers,
                    }),
                );
            }
            let login: Map<String, Value> = with_accounts
                .iter()
                .map(|name| (name.clone(), json!(pool.leases().login(slot.id, name))))
                .collect();
            let health = slot.health();
            let facts = slot.browser_facts();
            let fleet = pool.leases().fleet();
            let calibration = slot.calibration_status();
            json!({
                "slot": slot.id,
                "fleet_id": fleet.and_then(|f| f.fleet_id(slot.id)),
                "held": pool.leases().in_hand(slot.id),
                "spare": fleet.is_some_and(|f| f.is_spare(slot.id)),
                "profile": slot.profile.name,
                "emulation": slot.profile.emulation.name(),
                "user_agent": slot.profile.user_agent,
                "proxy": slot.upstream().map(|p| p.redacted()),
                "proxy_health": slot.upstream().map(|_| slot.egress().health().report()),
                "identity": slot.identity(),
                "breakers": breakers,
                "login": login,
                "browser": facts,
                "browser_sessions": sessions.iter().filter(|(_, s)| *s == slot.id).count(),
                "egress": slot.egress_facts(),
                "versions": versions(pool, slot, &facts),
                "calibration": calibration,
                "fidelity": { "browser": calibration.browser },
                "device": slot.device_fingerprint(),
                "pretend_os": slot.profile.pretend_os.then(|| format!(
                    "profile `{}` claims {} on a {} machine (pretend_os): its fonts, voices and WebGL are the machine's",
                    slot.profile.name,
                    slot.profile.hints_platform(),
                    std::env::consts::OS
                )),
                "cookies": {
                    "count": slot.jar().count(),
                    "last_saved": slot.jar().last_saved(),
                    "save_error": slot.jar().save_error(),
                },
                "requests": health.requests,
                "last_success": health.last_success.map(unix),
                "last_error": health.last_error,
            })
        })
        .collect();
    let budgets: Map<String, Value> = strategies
        .iter()
        .map(|name| (name.clone(), json!(pool.leases().budget(name))))
        .collect();
    json!({
        "as_of": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| (d.as_millis() as f64) / 1000.0),
        "slots": slots,
        "strategies": budgets,
        "browsers": pool.host().isolation,
        "standby": {
            "wanted": pool.host().standby.min(pool.slots().len()),
            "ready": pool.leases().standby_ready(),
        },
        "drift": pool.leases().drift().report(),
        "linkage": pool.leases().linkage(),
        "server": pool.services().serving.to_json(),
        "cluster": pool.leases().fleet().map(|f| {
            let mut r = json!(f.cluster().report());
            r["adopted"] = json!(f.adopted());
            r
        }),
    })
}

/// The Chromium the slot runs (or would launch), the version its user
/// agent claims, its HTTP tier's emulation, and the gap between the browser
/// and that emulation (calibration covers what the gap changes).
fn versions(pool: &Pool, slot: &crate::pool::Slot, facts: &crate::pool::BrowserFacts) -> Value {
    let chromium = facts
        .version
        .as_deref()
        .and_then(crate::pool::major_of)
        .or(pool.host().chromium_major);
    let emulation = slot.profile.emulation_major();
    json!({
        "chromium": chromium,
        "user_agent": slot.profile.user_agent_major(),
        "user_agent_pinned": slot.profile.user_agent_pinned,
        "emulation": slot.profile.emulation.name(),
        "emulation_gap": chromium.zip(emulation).map(|(c, e)| i64::from(c) - i64::from(e)),
    })
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
