//! `browser_select`: choose options of a <select>.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::browsing::run_step;
use super::spec::parse;
use crate::error::Result;
use crate::lease::cascade::RunOptions;
use crate::services::Browsing;
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

pub async fn run(
    browsing: &Browsing,
    args: Value,
    opts: &RunOptions,
) -> Result<crate::tools::Output> {
    let (view, args) = super::browsing::view_args("browser_select", args, opts)?;
    let a: Args = parse("browser_select", args)?;
    let step = Step::Select {
        r#ref: &a.r#ref,
        values: &a.values,
    };
    run_step(browsing, &a.session, opts, step, &view).await
}
