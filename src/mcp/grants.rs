//! The dispatcher's grant check for the identities a call names itself: a
//! `slot` argument, a browser `session` (its slot), or, for the admin tools
//! that act on every slot when none is named, all of them. Identities the
//! router picks are checked by the router (`routing::grants`).

use serde_json::Value;

use crate::auth::{Denied, Principal};
use crate::config::Role;
use crate::pool::Pool;
use crate::routing::grants::{Identity, Place, Scope};

/// Tools that act on every slot when the call names none.
const ON_EVERY_SLOT: &[&str] = &["refresh_cookies", "calibrate"];

/// `Err` when `scope` does not cover an identity the call names.
/// Who makes a call: its key, and its MCP session (browser sessions are
/// bound to both).
pub(super) struct Caller<'a> {
    pub who: &'a Principal,
    pub mcp_session: Option<&'a str>,
}

/// A browser session is known by its slot only to the caller that holds
/// it: the ownership check comes first (a foreign session is left to the
/// tool, which answers "no browser session"), then the grants.
pub(super) fn check_named(
    pool: &Pool,
    caller: &Caller<'_>,
    needed: Role,
    scope: &Scope,
    tool: &str,
    args: &Value,
) -> Result<(), Denied> {
    let who = caller.who;
    let (slots, key) = named(pool, caller, tool, args);
    let place = key.as_deref().map(|key| Place { key, host: None });
    let leases = pool.leases();
    for slot in slots {
        let signed_in = |strategy: &str| {
            leases.sites().signed_in(
                slot,
                crate::routing::grants::login_key(strategy, key.as_deref()),
            )
        };
        let me = Identity {
            slot,
            labels: leases.labels(slot),
            signed_in: &signed_in,
        };
        if !scope.permits(&me, place) {
            let at = key
                .as_deref()
                .map_or(String::new(), |k| format!(" on `{k}`"));
            return Err(Denied {
                role: who.role,
                needed,
                tool: tool.to_string(),
                grant: Some(format!(
                    "key `{}` may not use slot {slot} for `{tool}`{at}: no grant of it covers that identity (`idpool keys list`)",
                    who.name
                )),
            });
        }
    }
    Ok(())
}

/// `who`'s grants for `action` as slot `slot` on routing key `key`,
/// outside a tool call (the live view's sign-in session: `login`): `Err`
/// when the key has grants and none covers that.
pub fn check_action(
    pool: &Pool,
    who: &Principal,
    action: &str,
    slot: usize,
    key: &str,
) -> Result<(), Denied> {
    let Some(scope) = crate::auth::scope(who, action, Role::Admin)? else {
        return Ok(());
    };
    let args = serde_json::json!({"slot": slot, "strategy": key});
    let caller = Caller {
        who,
        mcp_session: None,
    };
    check_named(pool, &caller, Role::Admin, &scope, action, &args)
}

/// Whether `who` may see what slot `slot` left behind (its recordings,
/// events, `last_error`), for work on routing key `key` when known: a key
/// without grants sees every slot; a key with grants, only the identities
/// some grant of it that holds now covers (for any tool, at `key`).
pub fn may_see(pool: &Pool, who: &Principal, slot: usize, key: Option<&str>) -> bool {
    if who.grants.is_empty() {
        return true;
    }
    let now = crate::routing::grants::unix_now();
    let leases = pool.leases();
    let signed_in = |strategy: &str| {
        leases
            .sites()
            .signed_in(slot, crate::routing::grants::login_key(strategy, key))
    };
    let me = Identity {
        slot,
        labels: leases.labels(slot),
        signed_in: &signed_in,
    };
    let place = key.map(|key| Place { key, host: None });
    who.grants.iter().any(|g| {
        g.live(now) && g.covers_identity(&me) && (place.is_none() || g.covers_place(place))
    })
}

/// Who may use which identity now (`GET /api/v1/grants`, the status page):
/// every key with its role and grants, and for every slot the keys whose
/// grants cover it (by number, label, login state) for some tool and site;
/// keys without grants may use every slot.
pub fn report(pool: &Pool, keys: &[crate::auth::KeyEntry]) -> Value {
    let now = crate::routing::grants::unix_now();
    let leases = pool.leases();
    let slots: Vec<Value> = (0..pool.leases().identities().len())
        .map(|slot| {
            let signed_in = |strategy: &str| leases.sites().signed_in(slot, strategy);
            let me = Identity {
                slot,
                labels: leases.labels(slot),
                signed_in: &signed_in,
            };
            let who: Vec<Value> = keys
                .iter()
                .filter_map(|k| {
                    if k.grant.is_empty() {
                        return Some(
                            serde_json::json!({"key": k.name, "by": "no grants: every identity"}),
                        );
                    }
                    let by: Vec<String> = k
                        .grant
                        .iter()
                        .filter(|g| g.live(now) && g.covers_identity(&me))
                        .map(ToString::to_string)
                        .collect();
                    (!by.is_empty()).then(|| serde_json::json!({"key": k.name, "by": by}))
                })
                .collect();
            serde_json::json!({"slot": slot, "labels": leases.labels(slot), "keys": who})
        })
        .collect();
    let keys: Vec<Value> = keys
        .iter()
        .map(|k| {
            serde_json::json!({
                "name": k.name,
                "role": k.role.as_str(),
                "grants": k.grant.iter().map(|g| serde_json::json!({
                    "grant": g.to_string(), "live": g.live(now), "until": g.until,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({"keys": keys, "slots": slots})
}

/// The slots a call names, and the routing key it names with them.
fn named(
    pool: &Pool,
    caller: &Caller<'_>,
    tool: &str,
    args: &Value,
) -> (Vec<usize>, Option<String>) {
    let mut key = args["strategy"].as_str().map(str::to_string).or_else(|| {
        let url = url::Url::parse(args["url"].as_str()?).ok()?;
        pool.leases().site_key(&url)
    });
    let mut slots = Vec::new();
    if let Some(s) = args["slot"].as_u64().and_then(|s| usize::try_from(s).ok()) {
        slots.push(s);
    } else if let Some(id) = args["session"].as_str()
        && tool.starts_with("browser_")
        && let Some((slot, k)) =
            pool.services()
                .browsing
                .identity_of(id, Some(&caller.who.name), caller.mcp_session)
    {
        slots.push(slot);
        key = key.or(Some(k));
    } else if ON_EVERY_SLOT.contains(&tool) {
        slots.extend(0..pool.leases().identities().len());
    }
    (slots, key)
}
