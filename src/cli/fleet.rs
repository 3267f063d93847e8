//! `idpool fleet` (and `idpool slots --fleet`): the fleet as Redis has it,
//! one line per daemon and per identity, then the identities without a
//! host.

use clap::Args;
use serde_json::Value;

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Print the JSON the daemon returns.
    #[arg(long)]
    pub json: bool,
    /// After the table, print every daemon's events as they happen (Ctrl-C ends).
    #[arg(long)]
    pub watch: bool,
    /// The daemon (a viewer key is enough).
    #[command(flatten)]
    pub daemon: super::daemon::DaemonArgs,
}

impl From<FleetArgs> for super::slots::SlotsArgs {
    fn from(a: FleetArgs) -> Self {
        super::slots::SlotsArgs {
            json: a.json,
            watch: a.watch,
            fleet: true,
            daemon: a.daemon,
        }
    }
}

/// The human-readable fleet table (`GET /api/v1/fleet`).
pub fn table(view: &Value) -> String {
    let mut out = String::new();
    let c = &view["cluster"];
    out.push_str(&format!(
        "fleet via {} (node {}): {}{}\n",
        c["redis"].as_str().unwrap_or("?"),
        c["node"].as_str().unwrap_or("?"),
        c["state"].as_str().unwrap_or("?"),
        c["last_error"]
            .as_str()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    ));
    let fleet = &view["fleet"];
    if let Some(e) = fleet["error"].as_str() {
        out.push_str(&format!("  the fleet cannot be read now: {e}\n"));
        return out;
    }
    for n in fleet["nodes"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "node {:<12} {}  {} identities, {} spare slots free, slowest beat {} ms, v{}\n",
            n["node"].as_str().unwrap_or("?"),
            n["advertise"].as_str().unwrap_or("?"),
            n["identities"].as_array().map_or(0, Vec::len),
            n["spare"],
            n["beat_ms"].as_u64().unwrap_or(0),
            n["version"].as_str().unwrap_or("?"),
        ));
    }
    for i in fleet["identities"].as_array().into_iter().flatten() {
        let breakers: Vec<String> = i["breakers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(s, b)| {
                let left = b["open_for_secs"]
                    .as_f64()
                    .map(|x| format!(" {x:.0} s"))
                    .unwrap_or_default();
                format!("{s} {}{left}", b["state"].as_str().unwrap_or("?"))
            })
            .collect();
        out.push_str(&format!(
            "  {:<16} {:<14} {}\n",
            i["fleet_id"].as_str().unwrap_or("?"),
            match (i["owner"].as_str(), i["hosted"].as_bool()) {
                (Some(o), Some(true)) => format!("held by {o}"),
                (Some(o), _) => format!("no host ({o} gone)"),
                (None, _) => "no host".to_string(),
            },
            if breakers.is_empty() {
                "no traffic yet".to_string()
            } else {
                breakers.join(", ")
            }
        ));
    }
    out.push_str(&unhosted(&fleet["unhosted"]));
    out
}

/// The identities without a host, longest waiting first.
fn unhosted(u: &Value) -> String {
    let count = u["count"].as_u64().unwrap_or(0);
    if count == 0 {
        return "no identity is without a host\n".into();
    }
    let mut out = format!(
        "{count} {} without a host (their daemon is gone and no daemon had room):\n",
        if count == 1 { "identity" } else { "identities" }
    );
    let silent = u["silent"].as_u64().unwrap_or(0);
    if silent > 0 {
        out.push_str(&format!(
            "  ({silent} of them on a daemon silent for two beats: adopted once its registration lapses and a beat more passed)\n"
        ));
    }
    let listed = u["listed"].as_array().map_or(&[][..], Vec::as_slice);
    for i in listed {
        let signed: Vec<&str> = (i["signed_in"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        let on = if i["silent"] == true {
            "on silent"
        } else {
            "last on"
        };
        out.push_str(&format!(
            "  {:<16} waiting {:>5} s, {on} {}{}\n",
            i["fleet_id"].as_str().unwrap_or("?"),
            i["waiting_secs"].as_u64().unwrap_or(0),
            i["last_node"].as_str().unwrap_or("?"),
            if signed.is_empty() {
                String::new()
            } else {
                format!(", signed in to {}", signed.join(", "))
            }
        ));
    }
    if (listed.len() as u64) < count {
        out.push_str(&format!("  … and {} more\n", count - listed.len() as u64));
    }
    out.push_str("  room for them: restart their daemon, start another, or raise cluster.spare_slots or cluster.adopt_beyond_spares\n");
    out
}
