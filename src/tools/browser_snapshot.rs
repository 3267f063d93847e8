//! `browser_snapshot`: the page's accessibility tree with element refs.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::browsing::run_step;
use super::spec::parse;
use crate::error::Result;
use crate::pool::Pool;
use crate::services::browsing::Step;
use crate::lease::cascade::RunOptions;

super::browsing::step_spec!(
    "browser_snapshot",
    "Snapshot of a browser session",
    "The page's accessibility tree: one line per element (`- button \"Search\" [ref=e6]`); pass a ref to browser_click, browser_type or browser_select. Refs hold until the next snapshot.",
    READS_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,

}

pub async fn run(pool: &Pool, args: Value, opts: &RunOptions) -> Result<crate::tools::Output> {
    let a: Args = parse("browser_snapshot", args)?;
    run_step(pool, &a.session, opts, Step::Snapshot).await
}
