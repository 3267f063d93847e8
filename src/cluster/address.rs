//! Which addresses may receive the cluster key without `cluster.peers`.

use std::net::IpAddr;

/// Why `ip` may not receive the cluster key without `cluster.peers`
/// (`None`: it may). Public addresses are judged by the SSRF guard's own
/// classification; of the non-public ones, those no daemon can answer on
/// (unspecified, multicast, broadcast, link-local) are refused too.
pub fn refused_address(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if !crate::wire::http::is_private(ip) {
        return Some("a public address (list it in cluster.peers to forward there)");
    }
    let nowhere = match ip {
        IpAddr::V4(v4) => {
            v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast() || v4.is_link_local()
        }
        IpAddr::V6(v6) => {
            v6.is_unspecified() || v6.is_multicast() || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    };
    nowhere.then_some(
        "an address no daemon answers on (unspecified, multicast, broadcast or link-local)",
    )
}
