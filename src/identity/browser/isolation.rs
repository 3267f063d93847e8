//! Where the slots' browsers run: in the daemon's loopback-only network
//! namespace (`crate::wire::netns`), or — only when `browser.isolate = false` says
//! so — beside the daemon on the machine's shared loopback. A pool that
//! wants the namespace and cannot make one does not start: running the
//! browsers where every local user can reach their DevTools ports is a
//! choice the operator makes, never a fallback.

use std::sync::Arc;

use crate::config::BrowserConfig;
use crate::error::{Error, Result};

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
    /// What the browsers expose to other processes of the machine.
    pub exposes: String,
    /// Chromium's own sandbox is on (it cannot start as root: then
    /// `--no-sandbox`, with a warning).
    pub sandbox: bool,
}

/// The browsers' namespace when `browser.isolate` (the default); an error
/// naming the setting when it cannot be made.
pub(crate) fn isolate(
    browser: &BrowserConfig,
    base_port: u16,
) -> Result<(Option<Arc<crate::wire::netns::Netns>>, Isolation)> {
    let sandbox = browser.sandbox && !crate::identity::browser::launcher::running_as_root();
    if !browser.sandbox {
        tracing::info!(
            "browser.sandbox = false: the slots' browsers run with --no-sandbox (the container is the sandbox)"
        );
    } else if !sandbox {
        tracing::warn!(
            "running as root: Chromium's sandbox cannot start, so the slots' browsers run with --no-sandbox (run idpool as its own user to keep it)"
        );
    }
    if !browser.isolate {
        let exposes = crate::wire::netns::shared_exposure(base_port);
        tracing::warn!(
            "browser.isolate = false: the slots' Chromium share the daemon's network: {exposes}"
        );
        return Ok((
            None,
            Isolation {
                isolated: false,
                via: None,
                reason: Some("browser.isolate = false".to_string()),
                exposes,
                sandbox,
            },
        ));
    }
    match crate::wire::netns::Netns::create() {
        Ok(ns) => Ok((
            Some(Arc::new(ns)),
            Isolation {
                isolated: true,
                via: Some(crate::wire::netns::Netns::how()),
                reason: None,
                exposes: crate::wire::netns::ISOLATED_EXPOSURE.to_string(),
                sandbox,
            },
        )),
        Err(reason) => Err(not_isolated(&reason, base_port)),
    }
}

/// The start-up error of a pool that wants its browsers locked away and
/// cannot lock them.
fn not_isolated(reason: &str, base_port: u16) -> Error {
    Error::config(format!(
        "browser.isolate = true, but {reason}. The pool does not start with its browsers on the \
         machine's network unless told to: give the daemon CAP_SYS_ADMIN or allow unprivileged \
         user namespaces (`idpool doctor` checks), or set `isolate = false` under [browser] to accept this exposure: {}",
        crate::wire::netns::shared_exposure(base_port)
    ))
}
