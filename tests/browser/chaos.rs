//! Chaos: browsers killed and hung mid-navigation, the daemon killed under
//! load. What must hold: calls still succeed within the retry budget, every
//! Chromium is reaped, nothing is left behind, and what is on disk (jars, the
//! audit log) is whole.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::shop;
use idpool::identity::browser::process::pid_alive;
use idpool::lease::cascade::{self, RunOptions};
use idpool::pool::Pool;
use idpool::strategy::Strategy;
use serde_json::{Map, Value, json};

/// Requests the testbed has seen for the JavaScript review pages (tier 3).
fn js_hits(env: &common::Env) -> u64 {
    env.testbed
        .stats()
        .by_path
        .iter()
        .filter(|(p, _)| p.starts_with("/js-reviews/"))
        .map(|(_, n)| n)
        .sum()
}

/// A tier-3-only `reviews` call on its own task.
fn browser_call(pool: &Pool, item: &str) -> tokio::task::JoinHandle<idpool::Result<Vec<Value>>> {
    let pool = pool.clone();
    let item = item.to_string();
    tokio::spawn(async move {
        let strategy: Arc<dyn Strategy> =
            pool.registry().get("testshop").expect("testshop").clone();
        let op = strategy
            .operations()
            .get("reviews")
            .expect("reviews")
            .clone();
        let mut args = Map::new();
        args.insert("item".into(), json!(item));
        let bound = op.bind(args)?;
        let opts = RunOptions {
            only_tiers: Some(vec![3]),
            ..RunOptions::default()
        };
        let r = cascade::run(
            &mut idpool::lease::Call::new(pool.leases(), None),
            &strategy,
            &op,
            &bound,
            &opts,
        )
        .await?;
        Ok(r.extracted.items.into_iter().map(Value::Object).collect())
    })
}

/// Wait until the testbed has seen one more tier-3 page than `before`.
async fn navigation_started(env: &common::Env, before: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while js_hits(env) <= before {
        assert!(
            Instant::now() < deadline,
            "no navigation reached the testbed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn reaped(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while pid_alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

fn running_pids(pool: &Pool) -> Vec<u32> {
    pool.slots()
        .iter()
        .filter_map(|s| s.browser_facts().pid)
        .collect()
}

/// Chromium SIGKILLed mid-navigation, 20 times in a row: each call still
/// returns every review (on the other slot, within the retry budget), each
/// killed browser is reaped, and at the end only the pool's own run.
#[tokio::test]
async fn chromium_killed_mid_navigation_twenty_times_calls_still_succeed() {
    let env = shop(2).await;
    let pool = env.pool();
    common::slow(&env, "/js-reviews/", 1200);
    let mut killed = Vec::new();
    for i in 0..20 {
        let item = format!("B0KILL{i}");
        let before = js_hits(&env);
        let call = browser_call(&pool, &item);
        navigation_started(&env, before).await;
        let victims = running_pids(&pool);
        assert!(!victims.is_empty(), "round {i}: a browser is navigating");
        for pid in &victims {
            // SAFETY: a plain signal to a Chromium this test's pool started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        let got = call.await.expect("task").unwrap_or_else(|e| {
            panic!("round {i}: the call failed after its browser was killed: {e}")
        });
        let want: Vec<Value> = common::truth(&item).into_iter().take(10).collect();
        assert_eq!(got, want, "round {i}");
        for pid in &victims {
            assert!(
                reaped(*pid, Duration::from_secs(10)).await,
                "round {i}: Chromium {pid} was not reaped"
            );
        }
        killed.extend(victims);
    }
    let crashes: u64 = pool.slots().iter().map(|s| s.browser_facts().crashes).sum();
    assert_eq!(crashes, killed.len() as u64, "every kill counted once");
    let data = env.path("data");
    let left = common::chromium_browsers_under(&data);
    let running = running_pids(&pool);
    assert!(
        left.iter().all(|(pid, _)| running.contains(pid)),
        "Chromium beyond the pool's own: {left:?} (running: {running:?})"
    );
    common::shutdown_and_check(&pool).await;
}

/// A Chromium stopped with SIGSTOP mid-navigation (hung): the call moves on
/// and succeeds, and the hung browser is killed once its operation times out
/// (`browser.op_timeout_secs`) and reaped, counted as a crash.
#[tokio::test]
async fn a_hung_chromium_is_killed_after_the_operation_timeout_and_reaped() {
    let env = shop(2).await;
    env.write_config_with(
        2,
        true,
        common::free_base_port(2),
        "[browser]\nop_timeout_secs = 4\n",
    );
    let pool = env.pool();
    common::slow(&env, "/js-reviews/", 1200);
    let before = js_hits(&env);
    let call = browser_call(&pool, "B0HUNG1");
    navigation_started(&env, before).await;
    let victims = running_pids(&pool);
    assert_eq!(victims.len(), 1, "one browser navigating: {victims:?}");
    let hung = victims[0];
    // SAFETY: a plain signal to a Chromium this test's pool started.
    unsafe { libc::kill(hung as i32, libc::SIGSTOP) };
    let stopped = Instant::now();
    let got = call
        .await
        .expect("task")
        .unwrap_or_else(|e| panic!("the call failed with a hung browser: {e}"));
    let want: Vec<Value> = common::truth("B0HUNG1").into_iter().take(10).collect();
    assert_eq!(got, want);
    assert!(
        reaped(hung, Duration::from_secs(10)).await,
        "the hung Chromium {hung} is still there {:?} after it was stopped",
        stopped.elapsed()
    );
    let facts: Vec<_> = pool.slots().iter().map(|s| s.browser_facts()).collect();
    let crashed: Vec<_> = facts.iter().filter(|f| f.crashes == 1).collect();
    assert_eq!(crashed.len(), 1, "{facts:?}");
    assert!(
        crashed[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("stopped answering")),
        "{facts:?}"
    );
    common::shutdown_and_check(&pool).await;
}
