//! `browser_snapshot`: the page's accessibility tree with element refs.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::services::browsing::Step;

super::browsing::step_spec!(
    "browser_snapshot",
    "Snapshot of a browser session",
    "The page's accessibility tree: one line per element (`- button \"Search\" [ref=e6]`); pass a ref to browser_click, browser_type or browser_select (an element keeps its ref while the session lasts). Within `max_chars` (default 20000): a longer tree comes in pieces (`truncated`; read on with `start_index` = `next_start_index`, from the same snapshot). `interactive_only` keeps only the controls, `selector` a part of the page, `changes_only` what changed since the last snapshot. Every browser_* step answers with the page after it and takes the same options.",
    READS_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
}

/// A snapshot, nothing done.
fn step(_: &Args) -> Result<Step<'_>> {
    Ok(Step::Snapshot)
}
