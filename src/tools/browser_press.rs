//! `browser_press`: press a key on the focused element.

use schemars::JsonSchema;
use serde::Deserialize;

use super::spec::invalid;
use crate::error::Result;
use crate::services::browsing::Step;

super::browsing::step_spec!(
    "browser_press",
    "Press a key in a browser session",
    "Press `key` (`Enter`, `Tab`, `Escape`, `ArrowDown`, a letter) on the focused element, then return the page's snapshot.",
    ACTS_ON_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// The key's name.
    key: String,
}

/// The key press, of a named key.
fn step(a: &Args) -> Result<Step<'_>> {
    if a.key.is_empty() {
        return Err(invalid("`key` is empty"));
    }
    Ok(Step::Press(&a.key))
}
