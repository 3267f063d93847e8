//! Found when the fresh-clone CI's bench stopped its cold daemon right
//! after three browser calls: the daemon "ignored SIGTERM for 30 s", was
//! SIGKILLed, and its Chromium lived on. The calibration that runs behind
//! a slot's first browser call held the browser's turn on the self-check
//! page while shutdown ended the calibration listener under it; closing
//! the browser waited for that page's operation to time out. Shutdown now
//! cancels a running calibration.

use std::time::Duration;

use crate::common;

/// Shutdown at any moment of a calibration run ends it at once, browser
/// and all. The run is cut at several points after its browser launched
/// (the visit, the self-check page, its worker and frame): the bound, 20 s,
/// is under the 30 s a page operation waits before it gives up, which is
/// what the hang waited for.
#[tokio::test]
async fn shutdown_cancels_a_running_calibration_and_ends_the_browser() {
    let env = common::Env::new(1).await;
    for delay_ms in [0u64, 60, 120, 180, 240, 300, 400, 500] {
        let pool = env.pool();
        let slot = pool.leases().slots_for_tests()[0].clone();
        let run = tokio::spawn(async move { slot.calibrate_now().await });
        let launched = async {
            while !pool.leases().slots_for_tests()[0].browser_facts().running {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), launched)
            .await
            .expect("the calibration launched the browser");
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        tokio::time::timeout(Duration::from_secs(20), common::shutdown_and_check(&pool))
            .await
            .unwrap_or_else(|_| panic!("{delay_ms} ms into the run: shutdown waited for it"));
        let _ = run.await.expect("the run's task");
        // The next pool starts without a calibration record: each run
        // launches and calibrates anew.
        let _ = std::fs::remove_file(env.path("data/slots/0/calibration.json"));
    }
}
