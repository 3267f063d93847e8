//! What the `browser_*` tools share: the caller as a session's owner, the
//! session argument, and a step's answer (the page's snapshot after it, as
//! playwright-mcp answers).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Output, Provenance};
use crate::error::Result;
use crate::lease::cascade::RunOptions;
use crate::pool::Pool;
use crate::services::browsing::{Owner, Step, Stepped};

/// A `browser_*` step tool's [`Spec`](super::Spec): operator, no progress,
/// answered with the page's snapshot; its file has `Args` and `run`.
macro_rules! step_spec {
    ($name:literal, $title:literal, $description:literal, $annotations:ident) => {
        pub const SPEC: $crate::tools::Spec = $crate::tools::Spec {
            name: $name,
            role: $crate::tools::Role::Operator,
            title: $title,
            description: $crate::tools::Description::Fixed($description),
            input: $crate::tools::input_schema::<Args>,
            strategy_enum: false,
            output: $crate::tools::browsing::step_schema,
            annotations: $crate::tools::Annotations::$annotations,
            progress: false,
            route: None,
            run: |pool, args, opts| Box::pin(run(pool, args, opts)),
        };
    };
}
pub(crate) use step_spec;

/// The caller, as sessions are bound to it.
pub fn owner(opts: &RunOptions) -> Owner {
    Owner {
        key: opts.caller.clone(),
        mcp_session: opts.session.clone(),
    }
}

/// The argument every step takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArg {
    /// The id `browser_open` returned.
    pub session: String,
}

/// The result schema of a step.
pub fn step_schema() -> Value {
    super::spec::result_schema(
        json!({
            "session": {"type": "string"}, "slot": {"type": "integer"},
            "url": {"type": "string"}, "title": {"type": "string"},
            "snapshot": {"type": "string", "description": "The page's accessibility tree; `[ref=eN]` names an element for browser_click, browser_type and browser_select (valid until the next snapshot)."},
            "selected": {"type": "array", "items": {"type": "string"}},
        }),
        &["session"],
    )
}

/// Run `step` on the session and answer with the page after it.
pub async fn run_step(
    pool: &Pool,
    session: &str,
    opts: &RunOptions,
    step: Step<'_>,
) -> Result<Output> {
    let done = pool
        .services()
        .browsing
        .step(session, &owner(opts), step, opts.scope.as_deref())
        .await?;
    Ok(Output::served(answer(session, &done), acted(&done)))
}

/// A step acts as its session's slot, in the browser, once.
pub fn acted(done: &Stepped) -> Provenance {
    Provenance {
        slot: done.slot,
        tier: 3,
        attempts: 1,
    }
}

pub fn answer(session: &str, done: &Stepped) -> Value {
    let mut v = json!({"session": session});
    if let Some(s) = &done.snapshot {
        v["url"] = json!(s.url);
        v["title"] = json!(s.title);
        v["snapshot"] = json!(s.text);
    }
    if !done.selected.is_empty() {
        v["selected"] = json!(done.selected);
    }
    v
}
