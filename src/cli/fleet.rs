//! `idpool slots --fleet`: the fleet as Redis has it, one block per daemon
//! and one line per identity.

use serde_json::Value;

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
            "node {:<12} {}  {} identities, {} spare slots free, v{}\n",
            n["node"].as_str().unwrap_or("?"),
            n["advertise"].as_str().unwrap_or("?"),
            n["identities"].as_array().map_or(0, Vec::len),
            n["spare"],
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
            i["owner"]
                .as_str()
                .map_or_else(|| "(no owner)".to_string(), |o| format!("held by {o}")),
            if breakers.is_empty() {
                "no traffic yet".to_string()
            } else {
                breakers.join(", ")
            }
        ));
    }
    out
}
