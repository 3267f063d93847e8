//! `browser_select`: choose options of a <select>.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::services::browsing::Step;

super::browsing::step_spec!(
    "browser_select",
    "Choose options in a browser session",
    "Select `values` (option values or labels) in the <select> `ref`, then return the page's snapshot.",
    ACTS_ON_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// The <select>'s ref from the last snapshot.
    r#ref: String,
    /// Option values or labels to select.
    values: Vec<String>,
}

/// The choice.
fn step(a: &Args) -> Result<Step<'_>> {
    Ok(Step::Select {
        r#ref: &a.r#ref,
        values: &a.values,
    })
}
