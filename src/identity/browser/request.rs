//! One browser request: the page, what to wait for, the cookie domain
//! synced around it, the actions on it and what to capture.

use crate::request::{Action, Capture};

/// One browser request.
#[derive(Debug, Clone)]
pub struct BrowserRequest {
    pub url: String,
    pub wait_for: Option<String>,
    /// Domain whose cookies are synced with the jar around the navigation.
    pub cookie_domain: Option<String>,
    /// Steps on the loaded page before it is read.
    pub actions: Vec<Action>,
    /// Screenshot or PDF of the page as the actions left it.
    pub capture: Capture,
    /// Film the navigation and the actions onto this recording.
    pub tape: Option<std::sync::Arc<super::tape::Tape>>,
}
