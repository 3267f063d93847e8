//! What a caller asks of a page in a browser: actions in order, what to
//! capture once they are done (and what the captures gave), and what to
//! wait for. The browser (`crate::identity::browser`) does them.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// One step on the page, in order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Action {
    /// Click the first element matching `selector` (scrolled into view).
    Click { selector: String },
    /// Click the element matching `selector` and type `text` into it.
    Type { selector: String, text: String },
    /// Press a key on the focused element: `Enter`, `Tab`, `Escape`,
    /// `ArrowDown`, a letter...
    Press { key: String },
    /// Scroll one screen `down` (the default) or `up`, or the element
    /// matching `selector` into view.
    Scroll {
        #[serde(default)]
        direction: Direction,
        selector: Option<String>,
    },
    /// Wait `milliseconds` (at most 30000), or until `selector` appears.
    Wait {
        milliseconds: Option<u64>,
        selector: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Down,
    Up,
}

/// Longest single `wait`.
pub const MAX_WAIT_MS: u64 = 30_000;
/// Most actions in one call.
pub const MAX_ACTIONS: usize = 50;

impl Action {
    /// What is wrong with this step, before a browser is touched.
    pub fn problem(&self) -> Option<String> {
        match self {
            Action::Wait {
                milliseconds: None,
                selector: None,
            } => Some("a `wait` needs `milliseconds` or `selector`".into()),
            Action::Wait {
                milliseconds: Some(_),
                selector: Some(_),
            } => Some("a `wait` takes `milliseconds` or `selector`, not both".into()),
            Action::Wait {
                milliseconds: Some(ms),
                ..
            } if *ms > MAX_WAIT_MS => Some(format!("a `wait` is at most {MAX_WAIT_MS} ms")),
            Action::Click { selector }
            | Action::Type { selector, .. }
            | Action::Scroll {
                selector: Some(selector),
                ..
            }
            | Action::Wait {
                selector: Some(selector),
                ..
            } => crate::diag::css_problem(selector),
            Action::Press { key } if key.is_empty() => Some("a `press` needs a `key`".into()),
            _ => None,
        }
    }
}

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

/// What `wait_for` waits for.
#[derive(Debug, Clone)]
pub enum Until {
    Text(String),
    Selector(String),
    Time(Duration),
}
