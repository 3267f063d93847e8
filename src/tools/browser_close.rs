//! `browser_close`: end a browser session; its sites' cookies go back to
//! the slot's jar.

use serde_json::{Value, json};

use super::browsing::{SessionArg, owner};
use super::spec::{Annotations, Description, Role, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::pool::Pool;
use crate::lease::cascade::RunOptions;

pub const SPEC: Spec = Spec {
    name: "browser_close",
    role: Role::Operator,
    title: "Close a browser session",
    description: Description::Fixed(
        "Close the session's tab; the cookies of the sites it visited go back into the slot's jar.",
    ),
    input: input_schema::<SessionArg>,
    strategy_enum: false,
    output: || {
        result_schema(
            json!({"session": {"type": "string"}, "closed": {"type": "boolean"}, "cookies_synced": {"type": "integer"}}),
            &["session", "closed"],
        )
    },
    annotations: Annotations::SESSION,
    progress: false,
    budget: crate::tools::Budget::Items,
    also_runs: None,
    route: None,
    run: |pool, args, opts| crate::tools::plain(run(pool, args, opts)),
};

pub async fn run(pool: &Pool, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: SessionArg = parse("browser_close", args)?;
    let n = pool.services().browsing.close(&a.session, &owner(opts)).await?;
    Ok(json!({"session": a.session, "closed": true, "cookies_synced": n}))
}
