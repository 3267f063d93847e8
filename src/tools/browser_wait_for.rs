//! `browser_wait_for`: wait for text, an element or a time.

use schemars::JsonSchema;
use serde::Deserialize;

use super::spec::invalid;
use crate::error::Result;
use crate::request::Until;
use crate::services::browsing::Step;

super::browsing::step_spec!(
    "browser_wait_for",
    "Wait in a browser session",
    "Wait until `text` appears on the page, an element matches `selector`, or `time` seconds pass (one of them; at most the browser's operation timeout), then return the page's snapshot.",
    READS_SITES
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// Text to wait for.
    text: Option<String>,
    /// CSS selector to wait for.
    selector: Option<String>,
    /// Seconds to wait (at most 30).
    time: Option<f64>,
}

/// The wait: for one of text, a selector or a time.
fn step(a: &Args) -> Result<Step<'_>> {
    let until = match (&a.text, &a.selector, a.time) {
        (Some(t), None, None) => Until::Text(t.clone()),
        (None, Some(s), None) => {
            if let Some(p) = crate::diag::css_problem(s) {
                return Err(invalid(format!("`selector`: {p}")));
            }
            Until::Selector(s.clone())
        }
        (None, None, Some(t)) if t.is_finite() && (0.0..=30.0).contains(&t) => {
            Until::Time(std::time::Duration::from_secs_f64(t))
        }
        (None, None, Some(_)) => return Err(invalid("`time` is 0 to 30 seconds")),
        _ => return Err(invalid("give one of `text`, `selector` or `time`")),
    };
    Ok(Step::WaitFor(until))
}
