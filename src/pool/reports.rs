//! The pool's reports: the status every operator view reads (`pool_status`,
//! `/api/v1/slots`, `idpool slots`, the status page, the `idpool://slots`
//! resource), kept while the pool does not change, and the fleet's view.
//! Each identity reports itself through the lease
//! ([`crate::lease::Identities::report`]); this adds what the pool has
//! besides: strategies' budgets, browsers' isolation, standby, drift,
//! linkage, the server's connections and the cluster.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::host::Host;
use crate::lease::Leases;
use crate::lease::identities::View;
use crate::routing::grants::{Identity, Scope};
use crate::routing::is_web_key;
use crate::services::Services;

/// The last status report and the state it was built from.
pub(super) type Kept = parking_lot::Mutex<Option<(Stamp, Arc<Value>)>>;

/// What a status report depends on: the events emitted, the requests the
/// slots sent, and the second its clocks (time left open, rates) read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    events: u64,
    /// The slots' activity (requests, browser operations, egress traffic).
    activity: u64,
    /// Connections and MCP sessions open.
    serving: (usize, usize, usize),
    second: u64,
}

/// The pool's reports (see [`crate::pool::Pool::reports`]).
pub struct Reports<'a> {
    pub(super) leases: &'a Arc<Leases>,
    pub(super) services: &'a Services,
    pub(super) host: &'a Host,
    pub(super) kept: &'a Kept,
}

impl Reports<'_> {
    /// The status, kept while the pool does not change: a report is built
    /// again once an event is emitted (breakers, browsers, logins, cookies,
    /// reloads), a slot does something (an HTTP request, a browser
    /// operation, egress traffic or a refusal), a connection or MCP session
    /// opens or closes, or the clock reaches the next second (what the
    /// report reads of time: time left open, rates). Callers between
    /// changes share one report.
    pub fn status(&self) -> Arc<Value> {
        let serving = &self.services.serving;
        let stamp = Stamp {
            events: self.leases.events().seq(),
            activity: self.leases.identities().activity(),
            serving: (
                serving.connections().0,
                serving.sessions().0,
                serving.sessions().1,
            ),
            second: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        if let Some((at, report)) = self.kept.lock().as_ref()
            && *at == stamp
        {
            return report.clone();
        }
        // Built outside the lock: two callers at a change may both build;
        // the later one's report is kept.
        let report = Arc::new(self.status_now());
        *self.kept.lock() = Some((stamp, report.clone()));
        report
    }

    /// The status as a caller with `scope` sees it: the slots none of its
    /// grants covers keep their number and state but not what they did
    /// (their last error, which names sites and URLs).
    pub fn status_for(&self, scope: Option<&Scope>) -> Value {
        let mut v = Value::clone(&self.status());
        if let Some(scope) = scope {
            let leases = self.leases;
            Self::hide_unseen(&mut v, |slot| {
                let signed_in = |strategy: &str| leases.sites().signed_in(slot, strategy);
                scope.may_see(&Identity {
                    slot,
                    labels: leases.labels(slot),
                    signed_in: &signed_in,
                })
            });
        }
        v
    }

    /// `status` less what the slots `seen` refuses did: they keep their
    /// number and state, not their last error (which names sites and URLs).
    pub fn hide_unseen(status: &mut Value, seen: impl Fn(usize) -> bool) {
        for s in status["slots"].as_array_mut().into_iter().flatten() {
            let unseen = (s["slot"].as_u64())
                .and_then(|n| usize::try_from(n).ok())
                .is_some_and(|n| !seen(n));
            if unseen && let Some(o) = s.as_object_mut() {
                o.insert("last_error".into(), Value::Null);
                o.insert(
                    "hidden".into(),
                    Value::String("no grant of this key covers this identity".into()),
                );
            }
        }
    }

    /// Every daemon and identity of the fleet as Redis has them (`None`
    /// without `[cluster]`).
    pub async fn fleet(&self) -> Option<Value> {
        let sync = self.services.fleet.as_ref()?;
        Some(match sync.view().await {
            Ok(view) => view,
            Err(e) => json!({"error": e.to_string()}),
        })
    }

    /// Every strategy name (each marketplace's too), then the open-web
    /// hosts the pool has routed to, sorted.
    pub fn strategy_names(&self) -> Vec<String> {
        let mut names: Vec<String> = (self.leases.registry().all())
            .map(|s| s.name().to_string())
            .collect();
        let mut web: Vec<String> = (self.leases.router().sites.keys())
            .filter(|k| is_web_key(k))
            .cloned()
            .collect();
        web.sort();
        names.extend(web);
        names
    }

    /// The status built now.
    pub fn status_now(&self) -> Value {
        let leases = self.leases;
        let strategies = self.strategy_names();
        // Login states only for strategies that can tell (a `[session]` table).
        let with_accounts: Vec<String> = (leases.registry().all())
            .filter(|s| s.login().is_some())
            .map(|s| s.name().to_string())
            .collect();
        let sessions = self.services.browsing.list();
        let view = View {
            strategies: &strategies,
            with_accounts: &with_accounts,
            sessions: &sessions,
            chromium: self.host.chromium_major,
        };
        let identities = leases.identities();
        let slots: Vec<Value> = (0..identities.len())
            .map(|id| identities.report(id, &view))
            .collect();
        let budgets: Map<String, Value> = (strategies.iter())
            .map(|name| (name.clone(), json!(leases.sites().budget(name))))
            .collect();
        json!({
            "as_of": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| (d.as_millis() as f64) / 1000.0),
            "slots": slots,
            "strategies": budgets,
            "browsers": self.host.isolation,
            "standby": {
                "wanted": self.host.standby.min(identities.len()),
                "ready": identities.standby_ready(),
            },
            "drift": leases.drift().report(),
            "linkage": leases.identities().linkage(),
            "server": self.services.serving.to_json(),
            "cluster": leases.fleet().map(|f| {
                let mut r = json!(f.cluster().report());
                r["adopted"] = json!(f.adopted());
                let without = f.without_host();
                r["unhosted"] = json!(without.count);
                r["unhosted_silent"] = json!(without.silent);
                r["unhosted_oldest_secs"] = json!(without.oldest.as_secs());
                r["slowest_beat_ms"] = json!(f.slowest_beat().as_millis() as u64);
                r["lease_ttl_secs"] = json!(f.cluster().lease_ttl().as_secs());
                r
            }),
        })
    }
}
