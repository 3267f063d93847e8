//! The fleet check (`[cluster]`): the fleet's Redis answers, every live
//! daemon's slowest heartbeat of the last minute is under a third of the
//! lease TTL (a daemon whose beats take longer may lapse while alive, and
//! lose its identities to adoption), and no identity is without a host.

use idpool::cluster::Cluster;
use idpool::config::Config;

use super::{Check, Status, bad, ok};

pub(super) async fn check(cfg: &Config) -> Check {
    const NAME: &str = "fleet";
    let cluster = match Cluster::open(&cfg.cluster, cfg.server.listen) {
        Ok(Some(c)) => c,
        Ok(None) => return ok(NAME, "no [cluster]: a single daemon"),
        Err(e) => {
            return bad(
                Status::Fail,
                NAME,
                e.to_string(),
                "fix [cluster] in the config",
            );
        }
    };
    let (nodes, unhosted) = match (cluster.nodes().await, cluster.unhosted(0).await) {
        (Ok(n), Ok(u)) => (n, u.count),
        (Err(e), _) | (_, Err(e)) => {
            return bad(
                Status::Fail,
                NAME,
                format!("the fleet's Redis: {e}"),
                "start Redis or fix cluster.redis_url (IDPOOL_REDIS_URL)",
            );
        }
    };
    let ttl = cluster.lease_ttl();
    let slow: Vec<String> = (nodes.iter())
        .filter(|n| u128::from(n.beat_ms) * 3 > ttl.as_millis())
        .map(|n| format!("{} ({} ms)", n.node, n.beat_ms))
        .collect();
    if !slow.is_empty() {
        return bad(
            Status::Warn,
            NAME,
            format!(
                "heartbeats slower than a third of the lease TTL ({} s): {}",
                ttl.as_secs(),
                slow.join(", ")
            ),
            "raise cluster.lease_ttl_secs to at least three times the slowest beat, or give the slow daemons more CPU",
        );
    }
    if unhosted > 0 {
        return bad(
            Status::Warn,
            NAME,
            format!("{unhosted} identities have no daemon (theirs is gone and no daemon had room)"),
            "restart their daemon, start another, or raise cluster.spare_slots or cluster.adopt_beyond_spares (`idpool fleet` lists them)",
        );
    }
    let slowest = nodes.iter().map(|n| n.beat_ms).max().unwrap_or(0);
    ok(
        NAME,
        format!(
            "{} live daemons, slowest heartbeat {slowest} ms (lease TTL {} s), every identity hosted",
            nodes.len(),
            ttl.as_secs()
        ),
    )
}
