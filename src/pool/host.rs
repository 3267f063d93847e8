//! The machine the browsers run on, as the pool found it when it opened.

use std::sync::Arc;

use crate::identity::browser::isolation::Isolation;

/// The machine the browsers run on.
pub struct Host {
    /// The installed Chromium's major version.
    pub chromium_major: Option<u32>,
    /// Whether the browsers run in their own network namespace, and why not.
    pub isolation: Isolation,
    /// The browsers' namespace and its thread, held for the pool's life.
    pub netns: Option<Arc<crate::wire::netns::Netns>>,
    /// `browser.standby`: browsers kept launched ahead of need.
    pub standby: usize,
    pub(super) calibrator: Option<Arc<crate::identity::calibrate::Calibrator>>,
}
