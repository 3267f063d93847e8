//! `browser_close`: end a browser session; its sites' cookies go back to
//! the slot's jar.

use serde_json::{Value, json};

use super::browsing::{SessionArg, owner};
use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::lease::cascade::RunOptions;
use crate::services::Browsing;

pub const SPEC: Spec = Spec::new(
    "browser_close",
    Role::Operator,
    "Close a browser session",
    "Close the session's tab; the cookies of the sites it visited go back into the slot's jar.",
    Run::Browsing(|browsing, args, opts| crate::tools::plain(run(browsing, args, opts))),
)
.input(input_schema::<SessionArg>)
.output(|| {
    result_schema(
        json!({"session": {"type": "string"}, "closed": {"type": "boolean"}, "cookies_synced": {"type": "integer"}}),
        &["session", "closed"],
    )
})
.annotations(Annotations::SESSION);

pub async fn run(browsing: &Browsing, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: SessionArg = parse("browser_close", args)?;
    let n = browsing.close(&a.session, &owner(opts)).await?;
    Ok(json!({"session": a.session, "closed": true, "cookies_synced": n}))
}
