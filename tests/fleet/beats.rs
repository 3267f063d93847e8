//! The heartbeat's registration script on a real redis-server: a daemon
//! whose beats stop is counted out of the fleet's bound shares after two
//! beats (half a lease TTL), while its registration, and with it every
//! lease it holds, lives a whole TTL.

use std::time::Duration;

use idpool::cluster::{Cluster, NodeInfo};
use idpool::config::ClusterConfig;

use crate::common::{Env, fleet::Redis};

fn link(redis: &Redis, node: &str) -> Cluster {
    let cfg = ClusterConfig {
        redis_url: Some(redis.url()),
        node: Some(node.into()),
        lease_ttl_secs: 3,
        ..ClusterConfig::default()
    };
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
    Cluster::open(&cfg, listen)
        .expect("cluster config")
        .expect("a fleet")
}

fn info(node: &str) -> NodeInfo {
    NodeInfo {
        node: node.into(),
        advertise: "http://127.0.0.1:9".into(),
        identities: vec![format!("{node}/0")],
        spare: 0,
        version: "test".into(),
        sent: Default::default(),
        stale: false,
    }
}

/// `(name, stale)` of every daemon `c`'s registration reads back.
async fn beat(c: &Cluster, node: &str) -> Vec<(String, bool)> {
    let live = c.register(&info(node)).await.expect("register script");
    live.into_iter().map(|n| (n.node, n.stale)).collect()
}

#[tokio::test]
async fn a_silent_daemon_leaves_the_shares_after_two_beats_and_the_fleet_after_its_ttl() {
    let env = Env::new(1).await;
    let redis = Redis::start(&env).await;
    let (a, b) = (link(&redis, "a"), link(&redis, "b"));
    assert_eq!(a.beat_every(), Duration::from_millis(750));
    assert_eq!(a.fresh_within(), Duration::from_millis(1500));

    beat(&a, "a").await;
    let both = beat(&b, "b").await;
    assert_eq!(both, [("a".into(), false), ("b".into(), false)]);

    // `a` stops beating. Within two beats it is still counted.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        beat(&b, "b").await,
        [("a".into(), false), ("b".into(), false)]
    );
    // Past two beats: still registered (its leases hold), counted out.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        beat(&b, "b").await,
        [("a".into(), true), ("b".into(), false)]
    );
    // Back again: counted again.
    beat(&a, "a").await;
    assert_eq!(
        beat(&b, "b").await,
        [("a".into(), false), ("b".into(), false)]
    );
    // Silent past its TTL: gone.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(beat(&b, "b").await, [("b".into(), false)]);
    // A clean shutdown leaves at once.
    beat(&a, "a").await;
    a.unregister().await.expect("unregister");
    assert_eq!(beat(&b, "b").await, [("b".into(), false)]);
}
