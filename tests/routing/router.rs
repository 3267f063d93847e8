//! The router on paused time: when every breaker is open (fail at once with
//! `retry_after`, or wait), rests after a rate limit, politeness intervals,
//! Retry-After, in-flight limits, pinning, lease release.

use std::time::Duration;

use idpool::config::Config;
use idpool::error::ErrorKind;
use idpool::pool::Pool;
use idpool::routing::BreakerState;
use idpool::strategy::Outcome;
use tokio::time::Instant;

fn pool(slots: usize, min_interval_ms: u64, max_in_flight: usize) -> (tempfile::TempDir, Pool) {
    pool_with(slots, min_interval_ms, max_in_flight, "")
}

/// [`pool`] with more TOML in idpool.toml.
fn pool_with(
    slots: usize,
    min_interval_ms: u64,
    max_in_flight: usize,
    extra: &str,
) -> (tempfile::TempDir, Pool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = |rel: &str, text: String| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    // The breakers and politeness alone decide here: a lease takes its turn
    // in the request budget before it is handed out, and the adaptive
    // budget (cut when two identities are blocked) is the budget tests'.
    w(
        "strategies/s.toml",
        format!(
            "name = \"s\"\nhosts = [\"s.test\"]\n[politeness]\nmin_interval_ms = {min_interval_ms}\nmax_in_flight = {max_in_flight}\nglobal_max_in_flight = 64\nadaptive = false\n"
        ),
    );
    w(
        "strategies/t.toml",
        "name = \"t\"\nhosts = [\"t.test\"]\n[politeness]\nmin_interval_ms = 0\n".into(),
    );
    // Slots declared one by one in `extra` replace the size.
    let size = if extra.contains("[[pool.slot]]") {
        String::new()
    } else {
        format!("size = {slots}\n")
    };
    w(
        "idpool.toml",
        format!(
            "[pool]\n{size}data_dir = \"data\"\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n{extra}\n"
        ),
    );
    let cfg = Config::load_file(&dir.path().join("idpool.toml")).expect("config");
    let pool = Pool::open(&cfg).expect("pool");
    (dir, pool)
}

async fn open_breaker(pool: &Pool, slot: usize) {
    for _ in 0..3 {
        pool.next_slot("s", Some(slot))
            .await
            .expect("lease")
            .finish(Outcome::HardBlock);
    }
    assert_eq!(pool.breaker(slot, "s").state, BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn every_breaker_open_fails_at_once_with_retry_after() {
    let (_dir, pool) = pool(3, 0, 8);
    open_breaker(&pool, 1).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    open_breaker(&pool, 2).await;
    open_breaker(&pool, 0).await;
    let before = Instant::now();
    let e = pool
        .next_slot("s", None)
        .await
        .expect_err("no slot admitted");
    // Paused time auto-advances on any sleep: an unchanged clock proves no wait.
    assert_eq!(Instant::now(), before, "next_slot waited");
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    // Slot 1 opened first: it admits its trial in 290 s.
    assert_eq!(e.retry_after(), Some(Duration::from_secs(290)));
    let text = e.to_string();
    assert!(
        text.contains("`s`") && text.contains("3 of 3") && text.contains("retry after 290.0 s"),
        "{text}"
    );
    assert_eq!(
        pool.leases().sites().all_resting("s"),
        Some(Duration::from_secs(290))
    );
    // Other strategies are unaffected.
    assert!(pool.next_slot("t", None).await.is_ok());
    assert_eq!(pool.leases().sites().all_resting("t"), None);
    // The earliest slot's trial, then nothing until it comes back.
    tokio::time::advance(Duration::from_secs(290)).await;
    let trial = pool.next_slot("s", None).await.expect("trial");
    assert!(trial.is_trial() && trial.slot() == 1);
    let e = pool.next_slot("s", None).await.expect_err("one trial");
    assert!(e.to_string().contains("resting"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn wait_mode_waits_for_the_earliest_admission_within_the_queue_bound() {
    let (_dir, pool) = pool_with(
        2,
        0,
        8,
        "[breaker]\nwhen_all_open = \"wait\"\ncooldown_secs = 20\n[http]\nmax_queue_wait_secs = 30\n",
    );
    open_breaker(&pool, 0).await;
    tokio::time::advance(Duration::from_secs(5)).await;
    open_breaker(&pool, 1).await;
    let start = Instant::now();
    let trial = pool
        .next_slot("s", None)
        .await
        .expect("waits, then the trial");
    assert_eq!(Instant::now() - start, Duration::from_secs(15));
    assert!(trial.is_trial() && trial.slot() == 0);
    trial.finish(Outcome::HardBlock); // re-opens for 40 s: more than the queue bound
    let start = Instant::now();
    let e = pool
        .next_slot("s", Some(0))
        .await
        .expect_err("beyond the bound");
    assert_eq!(Instant::now(), start, "no point waiting past the bound");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(40)));
    assert!(e.to_string().contains("slot 0 is resting"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_rests_the_slot_for_the_sites_word() {
    let (_dir, pool) = pool(2, 0, 8);
    let lease = pool.next_slot("s", Some(0)).await.expect("lease");
    lease.wait_asked(Duration::from_secs(7));
    lease.finish(Outcome::RateLimited);
    let b = pool.breaker(0, "s");
    assert_eq!((b.state, b.failures), (BreakerState::Open, 0));
    assert_eq!(b.cause.map(|c| c.as_str()), Some("rate_limited"));
    assert_eq!(b.open_for_secs, Some(7.0));
    // The other slot carries on; slot 0 is left alone for those 7 s.
    for _ in 0..3 {
        assert_eq!(pool.next_slot("s", None).await.expect("lease").slot(), 1);
    }
    tokio::time::advance(Duration::from_secs(7)).await;
    let trial = pool.next_slot("s", Some(0)).await.expect("trial");
    assert!(trial.is_trial());
    trial.finish(Outcome::Ok);
    assert_eq!(pool.breaker(0, "s").state, BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn round_robin_over_admitted_slots() {
    let (_dir, pool) = pool(3, 0, 8);
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(pool.next_slot("s", None).await.expect("lease").slot());
    }
    assert_eq!(seen, [0, 1, 2, 0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn politeness_interval_spaces_requests_per_slot() {
    let (_dir, pool) = pool(1, 2000, 8);
    let start = Instant::now();
    drop(pool.next_slot("s", None).await.expect("lease"));
    drop(pool.next_slot("s", None).await.expect("lease"));
    assert_eq!(Instant::now() - start, Duration::from_millis(2000));
    // Another strategy on the same slot is not held back.
    let t0 = Instant::now();
    drop(pool.next_slot("t", None).await.expect("lease"));
    assert_eq!(Instant::now(), t0);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_for_that_slot_and_strategy_only() {
    let (_dir, pool) = pool(1, 0, 8);
    let lease = pool.next_slot("s", None).await.expect("lease");
    lease.wait_asked(Duration::from_secs(30));
    lease.finish(Outcome::Failed);
    assert_eq!(
        pool.breaker(0, "s").failures,
        0,
        "429 is not a hard block by itself"
    );
    let start = Instant::now();
    drop(pool.next_slot("s", None).await.expect("lease"));
    assert_eq!(Instant::now() - start, Duration::from_secs(30));
    let t0 = Instant::now();
    drop(pool.next_slot("t", None).await.expect("lease"));
    assert_eq!(Instant::now(), t0);
}

#[tokio::test(start_paused = true)]
async fn max_in_flight_waits_for_a_release() {
    let (_dir, pool) = pool(1, 0, 1);
    let held = pool.next_slot("s", None).await.expect("lease");
    let p2 = pool.clone();
    let waiter = tokio::spawn(async move { p2.next_slot("s", None).await.map(|l| l.slot()) });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !waiter.is_finished(),
        "second lease granted while the first is in flight"
    );
    drop(held);
    assert_eq!(waiter.await.expect("join").expect("lease"), 0);
}

#[tokio::test(start_paused = true)]
async fn pinned_slot_and_unknown_slot() {
    let (_dir, pool) = pool(2, 0, 8);
    for _ in 0..3 {
        assert_eq!(pool.next_slot("s", Some(1)).await.expect("lease").slot(), 1);
    }
    let err = pool.next_slot("s", Some(7)).await.expect_err("no slot 7");
    assert!(err.to_string().contains("slot 7 does not exist"), "{err}");
    open_breaker(&pool, 1).await;
    let e = pool.next_slot("s", Some(1)).await.expect_err("resting");
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(300)));
    // Slot 0 is not what the caller asked for: a pin is a pin.
    assert_eq!(pool.leases().sites().all_resting("s"), None);
}

#[tokio::test(start_paused = true)]
async fn dropped_trial_lease_frees_the_half_open_trial() {
    let (_dir, pool) = pool(1, 0, 8);
    open_breaker(&pool, 0).await;
    tokio::time::advance(Duration::from_secs(300)).await;
    let trial = pool.next_slot("s", None).await.expect("lease");
    assert!(trial.is_trial());
    drop(trial); // cancelled: no verdict
    let again = pool.next_slot("s", None).await.expect("lease");
    assert!(again.is_trial());
    again.finish(Outcome::Ok);
    assert_eq!(pool.breaker(0, "s").state, BreakerState::Closed);
}

/// Grants: the router picks only identities the caller's key may use (by
/// slot, by label), refuses a pin on another one by name, and when the
/// granted ones rest it says `not_granted` with the wait instead of moving
/// the call to an identity that would serve it; in "wait" mode it waits
/// for its own identity.
#[tokio::test(start_paused = true)]
async fn a_scope_keeps_the_call_on_its_granted_identities() {
    use idpool::routing::grants::{Grant, Scope};
    let (_dir, pool) = pool_with(
        3,
        0,
        8,
        "[[pool.slot]]\nid = 0\nprofile = \"default\"\n[[pool.slot]]\nid = 1\nprofile = \"default\"\nlabels = [\"de\"]\n[[pool.slot]]\nid = 2\nprofile = \"default\"\nlabels = [\"de\", \"retail\"]\n",
    );
    let scope = |g: &str| Scope::of("k", &[Grant::parse(g).expect("grant")], "get_reviews", 0);
    let leases = pool.leases();
    let one = scope("slots=1").expect("scope");
    for _ in 0..4 {
        let l = leases
            .next_slot("s", None, Some(&one))
            .await
            .expect("lease");
        assert_eq!(l.slot(), 1);
    }
    let de = scope("labels=retail").expect("scope");
    assert_eq!(
        leases
            .next_slot("s", None, Some(&de))
            .await
            .expect("lease")
            .slot(),
        2
    );
    let e = leases
        .next_slot("s", Some(0), Some(&one))
        .await
        .expect_err("pinned elsewhere");
    assert_eq!(e.kind(), ErrorKind::NotGranted);
    assert!(
        e.to_string().contains("slot 0 is not granted to key `k`"),
        "{e}"
    );
    // Another strategy the grant leaves out: nothing to pick.
    let only_t = scope("strategies=t").expect("scope");
    let e = leases
        .next_slot("s", None, Some(&only_t))
        .await
        .expect_err("not s");
    assert_eq!(e.kind(), ErrorKind::NotGranted);
    assert!(leases.next_slot("t", None, Some(&only_t)).await.is_ok());
    // Slot 1 rests: not_granted with its wait; slots 0 and 2 are admitted.
    open_breaker(&pool, 1).await;
    let e = leases
        .next_slot("s", None, Some(&one))
        .await
        .expect_err("rests");
    assert_eq!(e.kind(), ErrorKind::NotGranted);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(300)));
    assert!(
        e.to_string()
            .contains("2 other identity(ies) are not granted"),
        "{e}"
    );
    assert_ne!(
        leases
            .next_slot("s", None, None)
            .await
            .expect("free")
            .slot(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn in_wait_mode_a_scoped_call_waits_for_its_own_identity() {
    use idpool::routing::grants::{Grant, Scope};
    let (_dir, pool) = pool_with(
        2,
        0,
        8,
        "[breaker]\nwhen_all_open = \"wait\"\ncooldown_secs = 5\n[http]\nmax_queue_wait_secs = 30\n",
    );
    let one =
        Scope::of("k", &[Grant::parse("slots=1").expect("grant")], "scrape", 0).expect("scope");
    open_breaker(&pool, 1).await;
    let before = Instant::now();
    let l = pool
        .leases()
        .next_slot("s", None, Some(&one))
        .await
        .expect("its trial, after the cooldown");
    assert_eq!(l.slot(), 1);
    assert!(l.is_trial());
    assert_eq!(Instant::now() - before, Duration::from_secs(5));
}
