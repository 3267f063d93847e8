//! `browser_open`: an interactive session on an identity: a tab of its own
//! in a slot's Chromium, with the slot's cookies, bound to the caller.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::browsing::{owner, step_schema};
use super::spec::{Annotations, Role, Run, Spec, input_schema, invalid, parse};
use crate::error::Result;
use crate::lease::cascade::RunOptions;
use crate::services::Browsing;

pub const SPEC: Spec = Spec::new(
    "browser_open",
    Role::Operator,
    "Open a browser session",
    "Open a tab in a slot's real Chromium (its identity: cookies, fingerprint, IP) for \
         `url` or a `strategy`'s site, and return a `session` id and, with `url`, the page's \
         snapshot. Then browser_navigate, browser_snapshot, browser_click, browser_type, \
         browser_press, browser_select, browser_wait_for, browser_screenshot; browser_close \
         when done (cookies go back to the slot). Only the caller that opened it can use it; it \
         closes after 10 minutes unused.",
    Run::Browsing(|browsing, args, opts| Box::pin(run(browsing, args, opts))),
)
.input(|| super::browsing::with_view(input_schema::<Args>(), "browser_open"))
.output(step_schema)
.annotations(Annotations::ACTS_ON_SITES)
.strategy_enum()
.budget(crate::tools::Budget::Own);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The page to open (any public http(s) URL).
    url: Option<String>,
    /// A strategy whose site the session is for (its slots, breakers and cookies).
    strategy: Option<String>,
    /// This slot (identity).
    slot: Option<usize>,
}

pub async fn run(
    browsing: &Browsing,
    args: Value,
    opts: &RunOptions,
) -> Result<crate::tools::Output> {
    let (view, args) = super::browsing::view_args("browser_open", args, opts)?;
    let a: Args = parse("browser_open", args)?;
    let url = a
        .url
        .as_deref()
        .map(|u| url::Url::parse(u).map_err(|e| invalid(format!("`{u}` is not a valid URL ({e})"))))
        .transpose()?;
    let (session, first) = browsing
        .open(
            url,
            a.strategy.as_deref(),
            a.slot.or(opts.slot),
            owner(opts),
            opts.scope.as_deref(),
            &view.view,
        )
        .await?;
    let mut v = json!({"session": session.id, "slot": session.slot});
    let by = crate::tools::Provenance {
        slot: session.slot,
        tier: 3,
        attempts: usize::from(first.is_some()),
    };
    if let Some(s) = first {
        super::browsing::show(&mut v, &s, &view);
    }
    Ok(crate::tools::Output::served(v, by))
}
