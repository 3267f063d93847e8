//! `browser_click`: click an element of the last snapshot.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::services::browsing::Step;

super::browsing::step_spec!(
    "browser_click",
    "Click in a browser session",
    "Click the element `ref` (from the last snapshot) with a real mouse click, then return the page's snapshot.",
    ACTS_ON_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// The element's ref from the last snapshot (`e12`).
    r#ref: String,
    /// What the element is, in words (for the audit log; not used to find it).
    element: Option<String>,
}

/// The click.
fn step(a: &Args) -> Result<Step<'_>> {
    let _ = &a.element;
    Ok(Step::Click(&a.r#ref))
}
