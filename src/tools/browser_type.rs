//! `browser_type`: type into an element of the last snapshot.

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

pub async fn run(
    browsing: &Browsing,
    args: Value,
    opts: &RunOptions,
) -> Result<crate::tools::Output> {
    let (view, args) = super::browsing::view_args("browser_type", args, opts)?;
    let a: Args = parse("browser_type", args)?;
    let _ = &a.element;
    let step = Step::Type {
        r#ref: &a.r#ref,
        text: &a.text,
        submit: a.submit,
    };
    run_step(browsing, &a.session, opts, step, &view).await
}
