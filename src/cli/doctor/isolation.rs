//! The isolation check: whether the slots' browsers can be locked into a
//! network namespace of the daemon's, and what they expose when they are
//! not (`browser.isolate = false`). A daemon that wants the namespace and
//! cannot make one does not start, so that is a failure here.

use idpool::config::Config;
use idpool::wire::netns;

use super::{Check, Status, bad, ok};

pub(super) fn check(cfg: &Config) -> Check {
    const NAME: &str = "isolation";
    let base = cfg.pool.base_port;
    if !cfg.browser.isolate {
        return bad(
            Status::Warn,
            NAME,
            format!(
                "browser.isolate = false: {}",
                netns::shared_exposure(base)
            ),
            match netns::probe() {
                Ok(how) => format!(
                    "this machine can lock the browsers away ({how}): remove `isolate = false` from [browser]"
                ),
                Err(_) => "run the daemon where network namespaces can be made (CAP_SYS_ADMIN, or unprivileged user namespaces) and remove `isolate = false`".to_string(),
            },
        );
    }
    match netns::probe() {
        Ok(how) => ok(
            NAME,
            format!(
                "the browsers run in a loopback-only network namespace ({how}): {}",
                netns::ISOLATED_EXPOSURE
            ),
        ),
        Err(why) => bad(
            Status::Fail,
            NAME,
            format!("no network namespace can be made ({why}): the daemon will not start"),
            format!(
                "give it CAP_SYS_ADMIN or allow unprivileged user namespaces, or accept the exposure with `isolate = false` under [browser] ({})",
                netns::shared_exposure(base)
            ),
        ),
    }
}
