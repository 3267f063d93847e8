//! `browser_press`: press a key on the focused element.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::browsing::run_step;
use super::spec::{invalid, parse};
use crate::error::Result;
use crate::lease::cascade::RunOptions;
use crate::services::Browsing;
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

pub async fn run(
    browsing: &Browsing,
    args: Value,
    opts: &RunOptions,
) -> Result<crate::tools::Output> {
    let (view, args) = super::browsing::view_args("browser_press", args, opts)?;
    let a: Args = parse("browser_press", args)?;
    if a.key.is_empty() {
        return Err(invalid("`key` is empty"));
    }
    run_step(browsing, &a.session, opts, Step::Press(&a.key), &view).await
}
