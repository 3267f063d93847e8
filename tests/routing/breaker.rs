//! Acceptance: captcha pages open slot 0's breaker for that strategy only; the
//! router skips it there and still uses it elsewhere; after the cooldown exactly
//! one half-open trial goes through. Empty pages and 5xx never change a breaker.
//!
//! The network parts run on real time; the cooldown is crossed with paused tokio
//! time (`pause` + `advance`), so the test never sleeps through 300 seconds.

use crate::common;

use std::time::Duration;

use idpool::request::FetchRequest;
use idpool::routing::BreakerState;
use idpool::strategy::Outcome;
use idpool_testbed::{FaultKind, RateLimit};

#[tokio::test]
async fn three_captchas_open_the_breaker_for_that_strategy_only() {
    let env = common::Env::new(2).await;
    // Two requests per identity, then captcha pages for ten minutes.
    env.testbed
        .set_modes(|m| m.rate_limit = Some(RateLimit::captcha(2, 600, 600)));
    let pool = env.pool();
    let product = env.url("/product/B0BRK1");

    let mut outcomes = Vec::new();
    for _ in 0..5 {
        let f = pool
            .fetch(FetchRequest::get(product.clone()), Some(0))
            .await
            .expect("fetch");
        outcomes.push(f.outcome);
        if f.outcome == Outcome::HardBlock {
            assert!(f.response.text().contains("validateCaptcha"));
        }
    }
    assert_eq!(
        outcomes,
        [
            Outcome::Ok,
            Outcome::Ok,
            Outcome::HardBlock,
            Outcome::HardBlock,
            Outcome::HardBlock
        ]
    );
    assert_eq!(pool.breaker(0, "testbed").state, BreakerState::Open);
    assert_eq!(pool.breaker(1, "testbed").state, BreakerState::Closed);
    assert_eq!(pool.breaker(0, "alt").state, BreakerState::Closed);

    // The router skips slot 0 for `testbed`...
    for _ in 0..6 {
        let lease = pool.next_slot("testbed", None).await.expect("lease");
        assert_eq!(lease.slot(), 1);
        assert!(!lease.is_trial());
    }
    // ...and still uses it for another strategy, over the network too.
    let mut alt_slots = Vec::new();
    for _ in 0..2 {
        let f = pool
            .fetch(FetchRequest::get(env.alt_url("/product/B0ALT1")), None)
            .await
            .expect("alt fetch");
        assert_eq!(f.strategy, "alt");
        alt_slots.push(f.slot);
    }
    alt_slots.sort();
    assert_eq!(alt_slots, [0, 1]);

    // Cross the 300 s cooldown on paused time.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(300)).await;
    assert_eq!(pool.breaker(0, "testbed").state, BreakerState::HalfOpen);
    let mut trial = None;
    for _ in 0..2 {
        let lease = pool.next_slot("testbed", None).await.expect("lease");
        if lease.slot() == 0 {
            assert!(lease.is_trial());
            trial = Some(lease);
        }
    }
    let trial = trial.expect("slot 0 got its half-open trial");
    // While the trial is out, nobody else gets slot 0.
    for _ in 0..6 {
        let lease = pool.next_slot("testbed", None).await.expect("lease");
        assert_eq!(lease.slot(), 1, "a second half-open trial was admitted");
    }
    tokio::time::resume();

    // The identity is still captcha'd: the trial fails and the breaker re-opens for
    // twice as long.
    let result = trial
        .http(FetchRequest::get(product.clone()), |_, _| ())
        .await
        .map(|(f, ())| f);
    let f = trial.close(result).expect("trial");
    assert_eq!(f.outcome, Outcome::HardBlock);
    let b = pool.breaker(0, "testbed");
    assert_eq!(b.state, BreakerState::Open);
    assert!(b.open_for_secs.expect("open") > 300.0, "{b:?}");

    // Next trial after the doubled cooldown, with the site's memory wiped: success closes.
    env.testbed.shared.reset();
    env.testbed.set_modes(|m| m.rate_limit = None);
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(600)).await;
    tokio::time::resume();
    let f = pool
        .fetch(FetchRequest::get(product.clone()), Some(0))
        .await
        .expect("second trial");
    assert_eq!(f.outcome, Outcome::Ok);
    assert_eq!(pool.breaker(0, "testbed").state, BreakerState::Closed);
}

#[tokio::test]
async fn empty_pages_and_5xx_never_change_a_breaker() {
    let env = common::Env::new(1).await;
    env.testbed
        .set_modes(|m| m.rate_limit = Some(RateLimit::captcha(2, 600, 600)));
    let pool = env.pool();
    // Two hard blocks on record (captcha after two requests).
    for _ in 0..4 {
        pool.fetch(FetchRequest::get(env.url("/product/B0E1")), Some(0))
            .await
            .expect("fetch");
    }
    assert_eq!(pool.breaker(0, "testbed").failures, 2);
    env.testbed.shared.reset();
    env.testbed.set_modes(|m| m.rate_limit = None);

    for _ in 0..5 {
        let f = pool
            .fetch(
                FetchRequest::get(env.url("/product-reviews/EMPTY42?page=1")),
                Some(0),
            )
            .await
            .expect("empty");
        assert_eq!(f.outcome, Outcome::Empty);
    }
    env.testbed.set_modes(|m| {
        m.fault = Some(idpool_testbed::Fault {
            kind: FaultKind::Error,
            path_prefix: None,
            remaining: Some(5),
            delay_ms: 0,
            status: 503,
            size_mb: 0,
        })
    });
    for _ in 0..5 {
        let f = pool
            .fetch(FetchRequest::get(env.url("/product/B0E1")), Some(0))
            .await
            .expect("5xx");
        assert_eq!(f.response.status, 503);
        assert_eq!(f.outcome, Outcome::Failed);
    }
    let b = pool.breaker(0, "testbed");
    assert_eq!((b.state, b.failures), (BreakerState::Closed, 2), "{b:?}");
}

#[tokio::test]
async fn login_wall_is_a_hard_block() {
    let env = common::Env::new(1).await;
    let pool = env.pool();
    let f = pool
        .fetch(FetchRequest::get(env.url("/product/LOGIN7")), None)
        .await
        .expect("fetch");
    assert!(f.response.final_url.path().starts_with("/ap/signin"));
    assert_eq!(f.outcome, Outcome::HardBlock);
    assert_eq!(pool.breaker(0, "testbed").failures, 1);
}
