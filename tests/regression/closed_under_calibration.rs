//! Found when the fresh-clone CI's daemon test closed slot 0's browser
//! (`reset_slot` with `browser: true`) a moment after the call that
//! launched it: the calibration that launch started launched the browser
//! again for its next page, so a browser an operator had just closed came
//! back; and when shutdown cut that calibration in the middle of the
//! launch, the Chromium outlived the daemon. A calibration now works on the
//! launch it started with, and a pool shut down launches nothing.

use std::time::Duration;

use crate::common;

/// The browser closed at any moment of its calibration run stays closed:
/// the run fails (or had finished), no Chromium is left, and the next
/// launch is the next call's. Closing lands at several points of the run
/// (the visits, the self-check page, the HTTP tier's visit).
#[tokio::test]
async fn a_browser_closed_during_its_calibration_stays_closed() {
    let env = common::Env::new(1).await;
    let pool = env.pool();
    let slot = pool.leases().slots_for_tests()[0].clone();
    for delay_ms in [0u64, 50, 150, 300, 500, 800] {
        let run = tokio::spawn({
            let slot = slot.clone();
            async move { slot.calibrate_now().await }
        });
        let launched = async {
            while !slot.browser_facts().running {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), launched)
            .await
            .expect("the calibration launched the browser");
        let launches = slot.browser_facts().launches;
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        // What `reset_slot` does with `browser: true`.
        slot.browser().close().await;
        let outcome = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("the run ends")
            .expect("the run's task");
        let facts = slot.browser_facts();
        assert!(
            !facts.running && facts.launches == launches,
            "{delay_ms} ms into the run: the closed browser was launched again \
             ({} launches, was {launches}; run: {:?})",
            facts.launches,
            outcome.as_ref().map(|r| &r.chromium)
        );
        let left = common::chromium_browsers_under(env.data_dir());
        assert!(left.is_empty(), "{delay_ms} ms: {left:?}");
        if let Err(e) = &outcome {
            assert!(
                e.to_string().contains("closed or replaced"),
                "{delay_ms} ms: the run failed for another reason: {e}"
            );
        }
        // Each round calibrates anew.
        let _ = std::fs::remove_file(env.path("data/slots/0/calibration.json"));
    }
    common::shutdown_and_check(&pool).await;
    // Shut down, the pool launches no browser for anyone.
    let warmed = slot.warm_browser().await;
    assert!(warmed.is_err(), "a shut pool launched: {warmed:?}");
    assert!(common::chromium_browsers_under(env.data_dir()).is_empty());
}

/// A launch cut at any moment, with shutdown right after (what the
/// daemon's exit did to the calibration's launch), leaves no Chromium,
/// without waiting for one.
#[tokio::test]
async fn a_launch_cut_at_shutdown_leaves_no_chromium() {
    let env = common::Env::new(1).await;
    for delay_ms in [5u64, 20, 50, 100, 150, 200, 300] {
        let pool = env.pool();
        let slot = pool.leases().slots_for_tests()[0].clone();
        let launch = tokio::spawn(async move { slot.warm_browser().await });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        launch.abort();
        let _ = launch.await;
        common::shutdown_and_check(&pool).await;
        let left = common::chromium_browsers_under(env.data_dir());
        common::end_browsers_under(env.data_dir());
        assert!(
            left.is_empty(),
            "cut {delay_ms} ms into the launch: {left:?}"
        );
    }
}
