//! Daemon-to-daemon calls in a fleet: a call none of this daemon's
//! identities may take runs on a daemon that has one, through its
//! `POST /api/v1/fleet/call/{tool}`, authenticated by the cluster key. The
//! caller's name, role and session go along; the other side audits the
//! call `from <node>` and never forwards it again.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

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
    pub role: String,
    pub session: Option<&'a str>,
}

/// Run `tool` on the daemon at `advertise`: the answer of its fleet
/// endpoint (see [`super::CallEnd::to_fleet_json`]), or why none came.
pub async fn call(
    advertise: &str,
    key: &str,
    from: &str,
    who: OnBehalf<'_>,
    tool: &str,
    args: &Value,
) -> Result<Value, String> {
    let http = client().ok_or("cannot build the fleet's HTTP client")?;
    let url = format!(
        "{}/api/v1/fleet/call/{tool}",
        advertise.trim_end_matches('/')
    );
    let body = json!({
        "args": args,
        "principal": who.principal,
        "role": who.role,
        "session": who.session,
    });
    let resp = http
        .post(&url)
        .header(KEY_HEADER, key)
        .header(HOP_HEADER, from)
        .header("content-type", "application/json")
        .body(body.to_string())
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
