//! `browser_navigate`: load a URL in a browser session.

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
    "browser_navigate",
    "Go to a URL in a browser session",
    "Load `url` in the session's tab (through the guard and the slot's egress; robots.txt for hosts no strategy covers) and return the page's snapshot.",
    READS_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// The http(s) URL to load.
    url: String,
}

pub async fn run(
    browsing: &Browsing,
    args: Value,
    opts: &RunOptions,
) -> Result<crate::tools::Output> {
    let (view, args) = super::browsing::view_args("browser_navigate", args, opts)?;
    let a: Args = parse("browser_navigate", args)?;
    let url = url::Url::parse(&a.url)
        .map_err(|e| invalid(format!("`{}` is not a valid URL ({e})", a.url)))?;
    run_step(browsing, &a.session, opts, Step::Navigate(url), &view).await
}
