//! Daemon-to-daemon calls in a fleet: a call none of this daemon's
//! identities may take runs on a daemon that has one, through its
//! `POST /api/v1/fleet/call/{tool}`, authenticated by the cluster key. The
//! caller's name, role (capped at operator), grants and session go along;
//! the other side holds the call to those grants, audits it `from <node>`
//! and never forwards it again.
//!
//! Only [`FORWARDED_TOOLS`] travel, and the key goes only where
//! [`Cluster::reach`] allows (an address read from Redis is not trusted).

use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Role;
use crate::cluster::{Cluster, FORWARDED_TOOLS, is_forwarded};
use crate::routing::grants::Grant;

/// The header that carries the cluster key.
pub const KEY_HEADER: &str = "x-idpool-cluster-key";
/// The header naming the daemon a call comes from.
pub const HOP_HEADER: &str = "x-idpool-hop";
/// How long a forwarded call may take at most (a many-page call included).
pub const TIMEOUT: Duration = Duration::from_secs(300);

fn client() -> Option<&'static wreq::Client> {
    static CLIENT: OnceLock<Option<wreq::Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            wreq::Client::builder()
                .no_proxy()
                .connect_timeout(Duration::from_secs(3))
                .timeout(TIMEOUT)
                .build()
                .ok()
        })
        .as_ref()
}

/// Who a forwarded call runs for: the caller's key name, role and session.
pub struct OnBehalf<'a> {
    pub principal: &'a str,
    pub role: Role,
    pub session: Option<&'a str>,
    /// The key's grants: the receiving daemon holds the call to them.
    pub grants: &'a [Grant],
}

/// A forwarded call on the wire: the arguments and who it runs for.
#[derive(Debug, Serialize, Deserialize)]
pub struct Forwarded {
    #[serde(default = "no_args")]
    pub args: Value,
    pub principal: String,
    pub role: Role,
    #[serde(default)]
    pub session: Option<String>,
    /// The caller's key's grants (none: every identity).
    #[serde(default)]
    pub grants: Vec<Grant>,
}

fn no_args() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The most a forwarded call may do: what an operator may.
pub const MAX_FORWARDED_ROLE: Role = Role::Operator;

/// Run `tool` on the daemon at `advertise`: the answer of its fleet
/// endpoint (see [`super::end::CallEnd::to_fleet`]), or why none came.
pub async fn call(
    cluster: &Cluster,
    advertise: &str,
    who: OnBehalf<'_>,
    tool: &str,
    args: &Value,
) -> Result<super::end::FleetEnd, String> {
    if !is_forwarded(tool) {
        return Err(format!(
            "`{tool}` is not forwarded in a fleet (only {})",
            FORWARDED_TOOLS.join(", ")
        ));
    }
    let key = cluster
        .key()
        .ok_or("no cluster.key_file: nothing is forwarded")?;
    let to = cluster.reach(advertise).await.inspect_err(|e| {
        tracing::warn!(reason = %e, "a forward refused: the cluster key stays here");
    })?;
    let http = client().ok_or("cannot build the fleet's HTTP client")?;
    let url = format!("{}/api/v1/fleet/call/{tool}", to.base);
    let body = Forwarded {
        args: args.clone(),
        principal: who.principal.to_string(),
        role: who.role.min(MAX_FORWARDED_ROLE),
        session: who.session.map(str::to_string),
        grants: who.grants.to_vec(),
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| format!("forwarding `{tool}`: the call cannot be written: {e}"))?;
    let advertise = &to.host;
    let resp = http
        .post(&url)
        .header("host", &to.host)
        .header(KEY_HEADER, key)
        .header(HOP_HEADER, cluster.node())
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("forwarding `{tool}` to {advertise} failed: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| format!("forwarding `{tool}` to {advertise}: HTTP {status}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        format!("forwarding `{tool}` to {advertise}: HTTP {status}, unreadable answer: {e}")
    })
}
