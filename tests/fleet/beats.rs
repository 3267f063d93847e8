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
        identities: vec![format!("{node}/0"), format!("{node}/1")],
        spare: 0,
        version: "test".into(),
        sent: Default::default(),
        taken: Default::default(),
        beat_ms: 0,
        stale: false,
        silent_ms: 0,
    }
}

/// `(name, stale)` of every daemon `c`'s registration reads back.
async fn beat(c: &Cluster, node: &str) -> Vec<(String, bool)> {
    let fids = [format!("{node}/0")];
    let beat = c
        .register(&info(node), &fids, true)
        .await
        .expect("register script");
    assert_eq!(beat.owners, [node], "its own lease");
    beat.live.into_iter().map(|n| (n.node, n.stale)).collect()
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
    a.unregister(&["a/0".to_string()])
        .await
        .expect("unregister");
    assert_eq!(beat(&b, "b").await, [("b".into(), false)]);
}

/// A daemon whose beats stop for longer than its TTL: what it held is
/// without a host from the first beat of another daemon that sees it gone,
/// and adoptable only a beat after that. Back before then (a late beat,
/// not a dead daemon), it keeps everything; gone for good, its identities
/// go to the daemon that adopts them, once.
#[tokio::test]
async fn a_late_daemon_keeps_its_identities_and_a_dead_ones_wait_a_beat_for_adoption() {
    let env = Env::new(1).await;
    let redis = Redis::start(&env).await;
    let (a, b, c) = (link(&redis, "a"), link(&redis, "b"), link(&redis, "c"));
    let a_fids = ["a/0".to_string(), "a/1".to_string()];
    let mut a_info = info("a");
    a_info.identities = a_fids.to_vec();
    let first = a.register(&a_info, &a_fids, true).await.expect("a beats");
    assert_eq!(first.owners, ["a", "a"], "both leases are a's");
    assert_eq!(first.unhosted, 0);
    // One batched check: b's own, one that is a's (live: left to it), one
    // of b's that nobody holds yet (taken).
    let check = ["b/0".to_string(), "a/1".to_string(), "b/1".to_string()];
    let beat = b.register(&info("b"), &check, true).await.expect("b beats");
    assert_eq!(beat.owners, ["b", "a", "b"]);

    // a is silent past its TTL: b's next beat finds it gone.
    let beat = until_unhosted(2, &[(&b, "b"), (&c, "c")]).await;
    assert_eq!(beat.unhosted, 2, "a's two identities have no host");
    let list = b.unhosted(10).await.expect("list");
    let mut listed: Vec<&str> = list.oldest.iter().map(|(f, _)| f.as_str()).collect();
    listed.sort();
    assert_eq!(listed, ["a/0", "a/1"]);
    // Not adoptable within a beat of that: a may only be late.
    assert_eq!(
        b.adopt("a/0", b.beat_every()).await.expect("adopt"),
        Some("a".to_string()),
        "the lease still names a, and nobody took it"
    );
    // a was late, not dead: its next beat takes both back.
    let back = a
        .register(&a_info, &a_fids, false)
        .await
        .expect("a is back");
    assert_eq!(back.owners, ["a", "a"]);
    assert_eq!(back.unhosted, 0, "none without a host any more");
    silent(900, &[(&b, "b"), (&c, "c")]).await;
    assert_eq!(
        b.adopt("a/0", b.beat_every()).await.expect("adopt"),
        Some("a".to_string()),
        "a live daemon's identity is never adopted"
    );

    // Now a dies for good: found gone by the first beat past its TTL.
    let beat = until_unhosted(2, &[(&b, "b"), (&c, "c")]).await;
    assert_eq!(beat.unhosted, 2);
    assert_eq!(
        b.adopt("a/0", b.beat_every()).await.expect("adopt"),
        Some("a".to_string()),
        "within a beat of being found gone: not yet"
    );
    silent(800, &[(&b, "b"), (&c, "c")]).await;
    assert_eq!(
        b.adopt("a/0", b.beat_every()).await.expect("adopt"),
        Some("b".to_string()),
        "a beat later: adopted"
    );
    // b's holdings name it at once: were b to die before its next beat,
    // a/0 would be listed again, not lost.
    let held = redis.cli(&["HGET", "idpool:holdings", "b"]).await;
    let held: Vec<String> = serde_json::from_str(held.trim()).expect("holdings JSON");
    assert_eq!(held, ["b/0", "b/1", "a/0"], "the adopter's holdings");
    assert_eq!(
        c.adopt("a/0", c.beat_every()).await.expect("adopt"),
        Some("b".to_string()),
        "once"
    );
    assert_eq!(b.unhosted(10).await.expect("list").count, 1);
    // Given back (a failed seat): without a host again, from now.
    b.release("a/0").await.expect("release");
    let list = c.unhosted(10).await.expect("list");
    assert_eq!(list.count, 2);
    // A clean shutdown: what it held has no host at once.
    let mut c_info = info("c");
    c_info.identities = vec!["c/0".into()];
    c.register(&c_info, &["c/0".to_string()], true)
        .await
        .expect("c beats");
    c.unregister(&["c/0".to_string()])
        .await
        .expect("unregister");
    assert_eq!(b.unhosted(10).await.expect("list").count, 3);
}

/// Beat `beating` (every 100 ms) until `n` identities are without a host:
/// the beat that found them.
async fn until_unhosted(n: usize, beating: &[(&Cluster, &str)]) -> idpool::cluster::Beat {
    for _ in 0..100 {
        for (c, node) in beating {
            let fids = [format!("{node}/0")];
            let beat = c.register(&info(node), &fids, true).await.expect("beat");
            if beat.unhosted >= n {
                return beat;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never {n} identities without a host");
}

/// `ms` in which only `beating` beat (every 400 ms, holding their `/0`):
/// the last beat's answer.
async fn silent(ms: u64, beating: &[(&Cluster, &str)]) -> idpool::cluster::Beat {
    let end = tokio::time::Instant::now() + Duration::from_millis(ms);
    loop {
        let mut last = None;
        for (c, node) in beating {
            let fids = [format!("{node}/0")];
            last = Some(c.register(&info(node), &fids, true).await.expect("beat"));
        }
        if tokio::time::Instant::now() >= end {
            return last.expect("one daemon beats");
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}
