//! `pool_status`: every slot as an operator sees it: profile, proxy (credentials
//! redacted), breaker and tier memory per strategy, browser, cookies, health,
//! and how closely the HTTP tier matches the slot's browser (calibration).
//! The report is the pool's ([`crate::pool::Reports`]); this tool shows it
//! as the caller's grants allow.

use serde_json::{Value, json};

use schemars::JsonSchema;
use serde::Deserialize;

use super::spec::{Role, Run, Spec, input_schema, parse, result_schema};

/// `pool_status` arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// In a fleet (`[cluster]`): also every daemon and every identity of
    /// the fleet, with its owner and breakers, as Redis has them.
    #[serde(default)]
    pub fleet: bool,
}

pub const SPEC: Spec = Spec::new(
    "pool_status",
    Role::Viewer,
    "Pool status",
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
    Run::Reports(|reports, args, opts| {
        Box::pin(async move {
            let a: Args = parse("pool_status", args)?;
            let mut v = reports.status_for(opts.scope.as_deref());
            if a.fleet {
                v["fleet"] = reports.fleet().await.unwrap_or(Value::Null);
            }
            Ok(crate::tools::Output::plain(v))
        })
    }),
)
.input(input_schema::<Args>)
.output(|| {
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
});
