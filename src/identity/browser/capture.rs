//! What a browser call captures of a page once its actions are done.

/// What to capture once the actions are done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capture {
    /// A PNG: `Some(true)` of the full page, `Some(false)` of the viewport.
    pub screenshot: Option<bool>,
    pub pdf: bool,
}

/// What the captures gave.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub png: Option<Vec<u8>>,
    /// The viewport (`innerWidth`, `innerHeight`) when the PNG was taken.
    pub viewport: Option<(u32, u32)>,
    pub pdf: Option<Vec<u8>>,
}
