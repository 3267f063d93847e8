//! What a browser call does beyond loading the page.

/// How a browser call treats the page beyond loading it.
#[derive(Debug, Clone, Default)]
pub struct BrowseOptions {
    /// CSS selector to wait for.
    pub wait_for: Option<String>,
    /// Steps on the page before it is read.
    pub actions: Vec<crate::browser::actions::Action>,
    pub capture: crate::browser::Capture,
}
