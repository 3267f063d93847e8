//! `browser_type`: type into an element of the last snapshot.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::services::browsing::Step;

super::browsing::step_spec!(
    "browser_type",
    "Type in a browser session",
    "Type `text` into the element `ref` (focused first, real key events); `submit: true` presses Enter after. Returns the page's snapshot.",
    ACTS_ON_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// The element's ref from the last snapshot.
    r#ref: String,
    /// What to type.
    text: String,
    /// Press Enter afterwards.
    #[serde(default)]
    submit: bool,
    /// What the element is, in words (not used to find it).
    element: Option<String>,
}

/// The typing.
fn step(a: &Args) -> Result<Step<'_>> {
    let _ = &a.element;
    Ok(Step::Type {
        r#ref: &a.r#ref,
        text: &a.text,
        submit: a.submit,
    })
}
