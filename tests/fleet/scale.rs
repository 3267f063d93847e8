//! The fleet at scale (issue 36), shortened for the suite: six daemons ×
//! two identities on one real `redis-server`, more callers than the
//! fleet's in-flight bound, a site-wide rate limit, and one daemon
//! SIGKILLed under load. The testbed's log judges what the site saw;
//! Redis's own counters judge what the fleet cost it.
//! `scripts/fleet-bench.sh` runs the long form and prints the figures
//! docs/fleet.md quotes.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::fleet::{Redis, held, most_at_once, node, rest, status, within};
use common::shop;
use idpool_testbed::{LogEntry, SiteLimit};
use serde_json::json;

/// The fleet's in-flight bound on testshop: one place per daemon.
const BOUND: usize = 6;
const NODES: usize = 6;
const TTL: u64 = 3;
/// Callers per daemon: three times the bound in all.
const CALLERS: usize = 3;

/// Every command Redis ran so far (those inside scripts included).
async fn commands(redis: &Redis) -> u64 {
    redis
        .cli(&["INFO", "stats"])
        .await
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_commands_processed")
}

/// The testbed's clock (ms since it started), as its log last saw it.
fn shop_ms(env: &common::Env) -> u64 {
    env.testbed.log().last().map_or(0, |e| e.done_ms)
}

/// `CALLERS` callers on each of `fleet` calling `get_reviews` until `until`:
/// (calls that succeeded, calls that failed, and the first failure).
async fn load(fleet: &[&Daemon], until: Instant, tag: &str) -> (u32, u32, Option<String>) {
    let callers = fleet
        .iter()
        .enumerate()
        .flat_map(|(i, d)| (0..CALLERS).map(move |k| (i, *d, k)))
        .map(|(i, d, k)| async move {
            let (mut ok, mut failed, mut first) = (0u32, 0u32, None);
            while Instant::now() < until {
                let (code, v) = rest(
                    d,
                    "get_reviews",
                    json!({"item": format!("B0{tag}{i}X{k}"), "strategy": "testshop"}),
                )
                .await;
                if code == 200 {
                    ok += 1;
                } else {
                    failed += 1;
                    first.get_or_insert_with(|| format!("{code} {v}"));
                    // A caller that does what the answer says.
                    let wait = v["retry_after"].as_f64().unwrap_or(0.2).clamp(0.05, 2.0);
                    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                }
            }
            (ok, failed, first)
        });
    futures_util::future::join_all(callers)
        .await
        .into_iter()
        .fold((0, 0, None), |(o, f, first), (o2, f2, first2)| {
            (o + o2, f + f2, first.or(first2))
        })
}

/// The places `d` holds in testshop's fleet-wide bound.
async fn places(d: &Daemon) -> u64 {
    status(d, false).await["strategies"]["testshop"]["in_flight"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn six_daemons_wait_without_spinning_share_a_site_limit_and_outlive_a_killed_one() {
    let env = shop(2).await;
    let path = env.path("strategies/testshop.toml");
    let text = std::fs::read_to_string(&path).expect("testshop");
    std::fs::write(
        &path,
        text.replace(
            "global_max_in_flight = 16",
            &format!("global_max_in_flight = {BOUND}"),
        ),
    )
    .expect("write testshop");
    let redis = Redis::start(&env).await;
    let mut daemons = Vec::new();
    for i in 0..NODES {
        let cluster = format!("lease_ttl_secs = {TTL}\nadopt = true\nspare_slots = 1");
        daemons.push(node(&env, &redis, &format!("n{i}"), 2, &cluster, "").await);
    }
    let fleet: Vec<&Daemon> = daemons.iter().collect();
    // Each daemon holds its share of the bound: one place.
    for d in &fleet {
        let seen = within(Duration::from_secs(3 * TTL), || async {
            places(d).await == 1
        })
        .await;
        assert!(seen.is_some(), "{}", status(d, false).await["strategies"]);
    }

    // 1. More callers than places, slow answers: callers wait without
    // spinning, and the shop never has more than the bound at once.
    common::slow(&env, "/", 100);
    let idle_from = commands(&redis).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_per_sec = (commands(&redis).await - idle_from) as f64 / 3.0;
    let (from_ms, from_cmds, t0) = (shop_ms(&env), commands(&redis).await, Instant::now());
    let (ok, failed, first) = load(&fleet, t0 + Duration::from_secs(6), "LOAD").await;
    let secs = t0.elapsed().as_secs_f64();
    let cmds = commands(&redis).await - from_cmds;
    let log = env.testbed.log();
    let seen: Vec<&LogEntry> = log.iter().filter(|e| e.at_ms >= from_ms).collect();
    let most = most_at_once(seen.iter().copied());
    let net_per_call = (cmds as f64 - idle_per_sec * secs) / f64::from(ok.max(1));
    println!(
        "bound {BOUND}, {} callers: {ok} calls in {secs:.1} s ({:.0}/s), {} requests, at most {most} at once; \
         Redis {cmds} commands ({:.0}/s; idle {idle_per_sec:.1}/s), {net_per_call:.2} per call net of idle",
        NODES * CALLERS,
        f64::from(ok) / secs,
        seen.len(),
        cmds as f64 / secs
    );
    assert_eq!(failed, 0, "calls failed: {first:?}");
    assert!(ok >= 30, "only {ok} calls in {secs:.1} s");
    assert!(
        most <= BOUND,
        "the shop had {most} requests at once (bound {BOUND})"
    );
    assert!(
        (cmds as f64) < 10.0 * f64::from(ok),
        "Redis ran {cmds} commands for {ok} calls"
    );
    assert!(
        net_per_call <= 5.0,
        "{net_per_call:.2} Redis commands per call net of the idle heartbeat"
    );
    env.testbed.set_modes(|m| m.fault = None);

    // 2. A site-wide limit of 10 requests a second (429, Retry-After: 1):
    // the fleet's one adaptive budget settles under it, near it.
    env.testbed.set_modes(|m| {
        m.site_limit = Some(SiteLimit {
            max_per_sec: 10,
            retry_after: Some(1),
        })
    });
    let (from_ms, t0) = (shop_ms(&env), Instant::now());
    let (ok, failed, first) = load(&fleet, t0 + Duration::from_secs(30), "LIMIT").await;
    println!("first failure under the limit: {first:?}");
    env.testbed.set_modes(|m| m.site_limit = None);
    let log = env.testbed.log();
    // Judged after the first 10 s, whole seconds only.
    let (lo, hi) = (from_ms / 1000 + 10, shop_ms(&env) / 1000);
    let judged: Vec<&LogEntry> = log
        .iter()
        .filter(|e| e.path.starts_with('/') && (lo..hi).contains(&(e.at_ms / 1000)))
        .collect();
    let seconds = hi.saturating_sub(lo).max(1) as f64;
    let mut shape = std::collections::BTreeMap::<u64, (u32, u32)>::new();
    for e in log.iter().filter(|e| e.at_ms >= from_ms) {
        let x = shape.entry(e.at_ms / 1000 - from_ms / 1000).or_default();
        x.0 += 1;
        x.1 += u32::from(e.status == 429);
    }
    println!("per second (sent, refused): {shape:?}");
    let per_sec = judged.len() as f64 / seconds;
    let refused = judged.iter().filter(|e| e.status == 429).count();
    let share = refused as f64 / judged.len().max(1) as f64;
    let budget = status(fleet[0], false).await["strategies"]["testshop"].clone();
    println!(
        "site limit 10/s: {ok} calls ok, {failed} failed; over {seconds} s after the first 10: \
         {per_sec:.1} requests/s, {refused} refused ({:.1} %); the fleet's budget: {budget}",
        share * 100.0
    );
    assert!(
        (7.0..=10.0).contains(&per_sec),
        "the fleet sent {per_sec:.1} requests/s under a limit of 10"
    );
    assert!(
        share <= 0.05,
        "{refused} of {} requests refused",
        judged.len()
    );
    assert_eq!(budget["scope"], json!("fleet"), "{budget}");

    // 3. A daemon SIGKILLed under load: its place goes to the others within
    // one lease TTL, its identities are adopted within two,
    // no identity is ever held twice, no call to the others fails.
    common::slow(&env, "/", 100);
    let survivors = &fleet[..NODES - 1];
    // Nobody adopted anything under the load: every daemon holds its own.
    for (i, d) in fleet.iter().enumerate() {
        assert_eq!(held(d).await, [format!("n{i}/0"), format!("n{i}/1")]);
    }
    let until = Instant::now() + Duration::from_secs(4 * TTL);
    let loaded = load(survivors, until, "KILL");
    let watch = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        fleet[NODES - 1].signal(libc::SIGKILL);
        let killed = Instant::now();
        // n0 is first by name: of 6 places among 5 daemons, it holds 2
        // (both waits count from the kill).
        let freed = within(Duration::from_secs(2 * TTL), || async {
            places(fleet[0]).await == 2
        })
        .await
        .map(|_| killed.elapsed());
        let twice = parking_lot::Mutex::new(None);
        let adopted = within(Duration::from_secs(2 * TTL), || async {
            let mut all = BTreeSet::new();
            for d in survivors {
                for id in held(d).await {
                    if !all.insert(id.clone()) {
                        *twice.lock() = Some(id);
                    }
                }
            }
            all.len() == 2 * NODES
        })
        .await
        .map(|_| killed.elapsed());
        let twice = twice.lock().take();
        (freed, adopted, twice)
    };
    let ((ok, failed, first), (freed, adopted, twice)) = tokio::join!(loaded, watch);
    println!(
        "n{} SIGKILLed: its place was free after {freed:?}, its identities adopted after {adopted:?} \
         (TTL {TTL} s); {ok} calls to the others, {failed} failed",
        NODES - 1
    );
    let ttl = Duration::from_secs(TTL);
    // A daemon two beats (half a TTL) silent is counted out of the shares,
    // seen at the others' next beat (a quarter of a TTL later at most).
    assert!(
        freed.is_some_and(|d| d <= ttl),
        "the dead daemon's place was not given back within one lease TTL: {freed:?}"
    );
    assert!(
        adopted.is_some_and(|d| d <= 2 * ttl),
        "its identities were not adopted within 2 TTLs: {adopted:?}"
    );
    assert_eq!(twice, None, "an identity was held by two daemons");
    assert_eq!(failed, 0, "calls to the survivors failed: {first:?}");
    env.testbed.set_modes(|m| m.fault = None);
}
