//! The fleet's budget scripts on a real redis-server, called as a daemon
//! calls them: the first cut starts from the caller's estimate, later ones
//! from what the fleet measured the site take since the cut before.

use std::time::Duration;

use idpool::cluster::{Cluster, Cut, CutAsk, PaceAsk};
use idpool::config::ClusterConfig;

use crate::common::{Env, fleet::Redis};

fn link(redis: &Redis) -> Cluster {
    let cfg = ClusterConfig {
        redis_url: Some(redis.url()),
        node: Some("budget-test".into()),
        ..ClusterConfig::default()
    };
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
    Cluster::open(&cfg, listen)
        .expect("cluster config")
        .expect("a fleet")
}

fn pace(taken: u64, refused: u64, grow: f64) -> PaceAsk {
    PaceAsk {
        rate: None,
        adaptive: true,
        grow,
        taken,
        refused,
        cap: None,
        max_wait: Duration::from_secs(30),
    }
}

/// Pushbacks from two identities: the answer that cut, else the last.
async fn push_back(c: &Cluster, estimate: f64) -> Cut {
    let mut last: Option<Cut> = None;
    for identity in ["n0/0", "n1/0"] {
        let ask = CutAsk {
            identity: identity.into(),
            identities: 2,
            window: Duration::from_secs(30),
            accepted: estimate,
            floor: 6.0,
            cap: None,
        };
        let cut = c.cut("shop", &ask).await.expect("cut script");
        if !last.is_some_and(|l| l.cut) {
            last = Some(cut);
        }
    }
    last.expect("two pushbacks")
}

fn near(x: Option<f64>, lo: f64, hi: f64) -> bool {
    x.is_some_and(|x| (lo..=hi).contains(&x))
}

#[tokio::test]
async fn a_fleet_cut_starts_from_what_the_site_took_since_the_last_one() {
    let env = Env::new(1).await;
    let redis = Redis::start(&env).await;
    let c = link(&redis);

    // No rate in force: nothing to pace by.
    let p = c.pace("shop", pace(0, 0, 0.0)).await.expect("pace script");
    assert_eq!((p.turn, p.rate), (Ok(Duration::ZERO), None));

    // One identity's pushback is its own business; two are the site's.
    // The first cut starts from the caller's estimate.
    let first = push_back(&c, 6000.0).await;
    assert!(first.cut, "{first:?}");
    assert_eq!((first.from, first.to), (None, Some(4200.0)), "{first:?}");
    assert_eq!(first.accepted, Some(6000.0));
    // Not again within the spacing.
    assert!(!push_back(&c, 6000.0).await.cut);

    // 20 starts reserved, 10 answers taken and 10 refused, then the next
    // cut: from about 20 starts in 2–3 s, half of them taken (200–300 a
    // minute, whatever the caller guesses), not from the rate in force.
    for k in 0..20 {
        let p = c
            .pace("shop", pace(u64::from(k < 10), u64::from(k >= 10), 0.0))
            .await
            .expect("pace script");
        assert!(p.turn.is_ok(), "{p:?}");
        assert_eq!(p.rate, Some(4200.0));
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let second = push_back(&c, 6000.0).await;
    assert!(second.cut, "{second:?}");
    assert!(near(second.accepted, 150.0, 290.0), "{second:?}");
    let (to, accepted) = (second.to.unwrap_or(0.0), second.accepted.unwrap_or(0.0));
    assert!((to - 0.7 * accepted).abs() <= 1.0, "{second:?}");

    // Successes grow it, handed on with a reservation.
    let p = c.pace("shop", pace(0, 0, 30.0)).await.expect("pace script");
    assert!(near(p.rate, to + 29.9, to + 30.1), "{p:?} after {second:?}");
    let rate = p.rate.unwrap_or(0.0);

    // An idle spell is measured as idle, not as the fleet's rate: nothing
    // for three buckets, then 4 starts all taken, then a pushback 2 s
    // later: 4 starts over about 4 s (the idle bucket and the one filling),
    // about 60 a minute (the spell stretched back to the start that handed
    // on the growth: 5 in 8 s, under 40).
    tokio::time::sleep(Duration::from_millis(6100)).await;
    for _ in 0..4 {
        let p = c.pace("shop", pace(1, 0, 0.0)).await.expect("pace script");
        assert!(p.turn.is_ok(), "{p:?}");
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let third = push_back(&c, 6000.0).await;
    assert!(third.cut, "{third:?}");
    assert!(near(third.accepted, 45.0, 59.0), "{third:?}");
    assert_eq!(third.from, Some(rate), "{third:?}");
    // Nothing taken since: the floor.
    for _ in 0..3 {
        let _ = c.pace("shop", pace(0, 1, 0.0)).await.expect("pace script");
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let fourth = push_back(&c, 6000.0).await;
    assert_eq!(
        (fourth.accepted, fourth.to),
        (Some(0.0), Some(6.0)),
        "{fourth:?}"
    );
}
