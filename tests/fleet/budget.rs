//! The fleet's budget scripts on a real redis-server, called as a daemon
//! calls them: the site's first word starts a measurement, the first cut
//! starts from what the fleet measured the site take since, counting
//! only answers to requests reserved since (their generation), and a
//! pushback to a request reserved before the last cut is old news.

use std::time::Duration;

use idpool::cluster::{Cluster, Cut, CutAsk, PaceAsk};
use idpool::config::ClusterConfig;
use idpool::routing::budget::MEASURING;

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

fn pace(taken: u64, refused: u64, grow: f64, generation: u64) -> PaceAsk {
    PaceAsk {
        rate: None,
        adaptive: true,
        grow,
        taken,
        refused,
        generation,
        cap: None,
        max_wait: Duration::from_secs(30),
    }
}

/// Pushbacks from two identities to requests reserved under `generation`:
/// the answer that cut, else the last.
async fn push_back(c: &Cluster, estimate: f64, generation: u64) -> Cut {
    let mut last: Option<Cut> = None;
    for identity in ["n0/0", "n1/0"] {
        let ask = CutAsk {
            identity: identity.into(),
            identities: 2,
            window: Duration::from_secs(30),
            accepted: estimate,
            floor: 6.0,
            cap: None,
            generation,
            measuring: MEASURING,
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
    let p = c
        .pace("shop", pace(0, 0, 0.0, 0))
        .await
        .expect("pace script");
    assert_eq!(
        (p.turn, p.rate, p.generation),
        (Ok(Duration::ZERO), None, 0)
    );

    // One identity's pushback is its own business; two are the site's:
    // its first word starts the measurement (paced by a rate that paces
    // nothing), not a cut from a guess.
    let first = push_back(&c, 6000.0, 0).await;
    assert!(first.measuring && !first.cut, "{first:?}");
    assert_eq!(first.to, Some(MEASURING), "{first:?}");
    assert_eq!(first.generation, 1);
    // Not again within the spacing.
    assert!(!push_back(&c, 6000.0, 1).await.cut);

    // 20 starts reserved, 10 answers taken under this generation, and 10
    // refusals to requests reserved before the cut, then the next cut:
    // from about 20 starts in 2–3 s, every counted answer taken (400–600 a
    // minute, whatever the caller guesses): the old refusals say nothing
    // about the rate in force (counted, they would halve it).
    for k in 0..20 {
        let p = if k < 10 {
            pace(1, 0, 0.0, 1)
        } else {
            pace(0, 1, 0.0, 0)
        };
        let p = c.pace("shop", p).await.expect("pace script");
        assert_eq!(p.turn, Ok(Duration::ZERO), "{p:?}");
        assert_eq!((p.rate, p.generation), (Some(MEASURING), 1));
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // A pushback to a request reserved before the first cut: old news.
    let old = push_back(&c, 6000.0, 0).await;
    assert!(!old.cut, "{old:?}");
    assert_eq!((old.to, old.generation), (Some(MEASURING), 1), "{old:?}");
    let second = push_back(&c, 6000.0, 1).await;
    assert!(second.cut, "{second:?}");
    assert_eq!(second.generation, 2);
    assert!(near(second.accepted, 300.0, 580.0), "{second:?}");
    let (to, accepted) = (second.to.unwrap_or(0.0), second.accepted.unwrap_or(0.0));
    assert!((to - 0.7 * accepted).abs() <= 1.0, "{second:?}");

    // Successes grow it, handed on with a reservation.
    let p = c
        .pace("shop", pace(0, 0, 30.0, 2))
        .await
        .expect("pace script");
    assert!(near(p.rate, to + 29.9, to + 30.1), "{p:?} after {second:?}");
    let rate = p.rate.unwrap_or(0.0);

    // An idle spell is measured as idle, not as the fleet's rate: nothing
    // for three buckets, then 4 starts all taken, then a pushback 2 s
    // later: 4 starts over about 4 s (the idle bucket and the one filling),
    // about 60 a minute (the spell stretched back to the start that handed
    // on the growth: 5 in 8 s, under 40).
    tokio::time::sleep(Duration::from_millis(6100)).await;
    for _ in 0..4 {
        let p = c
            .pace("shop", pace(1, 0, 0.0, 2))
            .await
            .expect("pace script");
        assert!(p.turn.is_ok(), "{p:?}");
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let third = push_back(&c, 6000.0, 2).await;
    assert!(third.cut, "{third:?}");
    assert!(near(third.accepted, 45.0, 59.0), "{third:?}");
    assert_eq!(third.from, Some(rate), "{third:?}");
    // Nothing taken since: the floor.
    for _ in 0..3 {
        let _ = c
            .pace("shop", pace(0, 1, 0.0, 3))
            .await
            .expect("pace script");
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let fourth = push_back(&c, 6000.0, 3).await;
    assert_eq!(
        (fourth.accepted, fourth.to),
        (Some(0.0), Some(6.0)),
        "{fourth:?}"
    );
}
