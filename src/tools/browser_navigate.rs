//! `browser_navigate`: load a URL in a browser session.

use schemars::JsonSchema;
use serde::Deserialize;

use super::spec::invalid;
use crate::error::Result;
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

/// The navigation, to a valid URL.
fn step(a: &Args) -> Result<Step<'_>> {
    let url = url::Url::parse(&a.url)
        .map_err(|e| invalid(format!("`{}` is not a valid URL ({e})", a.url)))?;
    Ok(Step::Navigate(url))
}
