//! Where the slots' browsers run: in the daemon's loopback-only network
//! namespace when it can make one (`crate::netns`), else beside the daemon,
//! said loudly.

use std::sync::Arc;

/// Whether the slots' browsers run in a network namespace of their own.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Isolation {
    /// `true`: DevTools ports reachable by the daemon alone, the egress the
    /// browsers' only way out.
    pub isolated: bool,
    /// How, when isolated: `"privileged"` (root, or `CAP_SYS_ADMIN`) or
    /// `"user namespace"` (a daemon run as its own user).
    pub via: Option<&'static str>,
    /// Why not, when not.
    pub reason: Option<String>,
    /// Chromium's own sandbox is on (it cannot start as root: then
    /// `--no-sandbox`, with a warning).
    pub sandbox: bool,
}

/// The browsers' namespace when `wanted` and the system allows it; a loud
/// warning when it does not.
pub(super) fn isolate(
    wanted: bool,
    sandbox_wanted: bool,
) -> (Option<Arc<crate::netns::Netns>>, Isolation) {
    let sandbox = sandbox_wanted && !crate::browser::launcher::running_as_root();
    if !sandbox_wanted {
        tracing::info!(
            "browser.sandbox = false: the slots' browsers run with --no-sandbox (the container is the sandbox)"
        );
    } else if !sandbox {
        tracing::warn!(
            "running as root: Chromium's sandbox cannot start, so the slots' browsers run with --no-sandbox (run idpool as its own user to keep it)"
        );
    }
    if !wanted {
        tracing::warn!(
            "browser.isolate = false: the slots' Chromium share the daemon's network; their DevTools ports are open to every local process"
        );
        let reason = Some("browser.isolate = false".to_string());
        return (
            None,
            Isolation {
                isolated: false,
                via: None,
                reason,
                sandbox,
            },
        );
    }
    match crate::netns::Netns::create() {
        Ok(ns) => (
            Some(Arc::new(ns)),
            Isolation {
                isolated: true,
                via: Some(crate::netns::Netns::how()),
                reason: None,
                sandbox,
            },
        ),
        Err(reason) => {
            tracing::warn!(
                "browsers NOT isolated: {reason}; the slots' Chromium share the daemon's network and their DevTools ports are open to every local process"
            );
            (
                None,
                Isolation {
                    isolated: false,
                    via: None,
                    reason: Some(reason),
                    sandbox,
                },
            )
        }
    }
}
