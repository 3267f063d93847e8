//! What the `browser_*` tools share: the caller as a session's owner, the
//! session argument, and a step's answer (the page's snapshot after it, as
//! playwright-mcp answers).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Output, Provenance};
use crate::error::Result;
use crate::lease::cascade::RunOptions;
use crate::services::Browsing;
use crate::services::browsing::{Owner, Shown, Step, Stepped, View};
use crate::tools::budget;

/// A `browser_*` step tool: its [`Spec`](super::Spec) (operator, no
/// progress, answered with the page's snapshot) and its `run`, which parses
/// the file's `Args`, takes the step its `fn step(&Args) -> Result<Step>`
/// reads from them, runs it on the session and answers with the page after
/// it. The file has `Args` and `step`.
macro_rules! step_spec {
    ($name:literal, $title:literal, $description:literal, $annotations:ident) => {
        pub const SPEC: $crate::tools::Spec = $crate::tools::Spec::new(
            $name,
            $crate::tools::Role::Operator,
            $title,
            $description,
            $crate::tools::Run::Browsing(|browsing, args, opts| {
                Box::pin(run(browsing, args, opts))
            }),
        )
        .input(|| $crate::tools::browsing::with_view($crate::tools::input_schema::<Args>(), $name))
        .output($crate::tools::browsing::step_schema)
        .annotations($crate::tools::Annotations::$annotations)
        .budget($crate::tools::Budget::Own);

        /// Run the step on the session; the page after it.
        pub async fn run(
            browsing: &$crate::services::Browsing,
            args: serde_json::Value,
            opts: &$crate::lease::cascade::RunOptions,
        ) -> $crate::error::Result<$crate::tools::Output> {
            let (view, args) = $crate::tools::browsing::view_args($name, args, opts)?;
            let a: Args = $crate::tools::parse($name, args)?;
            let step = step(&a)?;
            $crate::tools::browsing::run_step(browsing, &a.session, opts, step, &view).await
        }
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

/// How a step's answer shows the page: the [`View`], the budget, and
/// (`browser_snapshot`) where the piece starts.
#[derive(Debug, Clone, Default)]
pub struct ViewArgs {
    pub view: View,
    pub max_chars: usize,
    pub start_index: usize,
}

/// Whether `tool` takes the view argument `name`: `browser_wait_for`'s
/// `selector` is what it waits for; only `browser_snapshot` reads on
/// from `start_index`.
fn takes(tool: &str, name: &str) -> bool {
    match name {
        "selector" => tool != "browser_wait_for",
        "start_index" => tool == "browser_snapshot",
        _ => true,
    }
}

/// Take the view arguments out of a step's arguments (the rest are the
/// step's own).
pub fn view_args(tool: &str, mut args: Value, opts: &RunOptions) -> Result<(ViewArgs, Value)> {
    let mut v = ViewArgs {
        max_chars: opts.answer_chars,
        ..ViewArgs::default()
    };
    let Some(o) = args.as_object_mut() else {
        return Ok((v, args));
    };
    let flag = |o: &mut serde_json::Map<String, Value>, name: &str| match o.remove(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(other) => Err(super::invalid(format!(
            "argument `{name}` must be true or false, got {other}"
        ))),
    };
    v.view.interactive_only = flag(o, "interactive_only")?;
    v.view.changes_only = flag(o, "changes_only")?;
    if let Some(m) = o.remove("max_chars").filter(|m| !m.is_null()) {
        v.max_chars = budget::checked_max(&m)?;
    }
    if takes(tool, "selector") {
        match o.remove("selector") {
            None | Some(Value::Null) => {}
            Some(Value::String(sel)) => {
                if let Some(p) = crate::diag::css_problem(&sel) {
                    return Err(super::invalid(format!("`selector`: {p}")));
                }
                v.view.selector = Some(sel);
            }
            Some(other) => {
                return Err(super::invalid(format!(
                    "argument `selector` must be a CSS selector, got {other}"
                )));
            }
        }
    }
    if takes(tool, "start_index") {
        match o.remove("start_index") {
            None | Some(Value::Null) => {}
            Some(n) => {
                v.start_index = n
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        super::invalid(format!(
                            "argument `start_index` must be a whole number, got {n}"
                        ))
                    })?;
            }
        }
    }
    Ok((v, args))
}

/// A step's input schema with the view arguments it takes.
pub fn with_view(mut schema: Value, tool: &str) -> Value {
    let mut more = json!({
        "max_chars": {"type": "integer", "minimum": 1, "maximum": budget::MAX_MAX_CHARS,
            "description": "Most characters of snapshot in the answer (default: the server's answer budget, 20000 unless configured); a longer one comes in pieces: `truncated`, then browser_snapshot with `start_index` = `next_start_index`."},
        "interactive_only": {"type": "boolean", "description": "Only links, buttons, fields and other controls (with their labels), one line each: far shorter on a large page."},
        "changes_only": {"type": "boolean", "description": "Only what changed since this session's last snapshot: `+` lines added, `-` lines removed (refs stay the same from one snapshot to the next)."},
        "selector": {"type": "string", "description": "Only the part of the page under the first element this CSS selector matches."},
        "start_index": {"type": "integer", "minimum": 0, "description": "Read on in the last snapshot (not taken again): the previous answer's `next_start_index`."},
    });
    if let Some(m) = more.as_object_mut() {
        m.retain(|k, _| takes(tool, k));
    }
    super::spec::add_properties(&mut schema, more);
    schema
}

/// The result schema of a step.
pub fn step_schema() -> Value {
    super::spec::result_schema(
        json!({
            "session": {"type": "string"}, "slot": {"type": "integer"},
            "url": {"type": "string"}, "title": {"type": "string"},
            "snapshot": {"type": "string", "description": "The page's accessibility tree (or the part the view asked for); `[ref=eN]` names an element for browser_click, browser_type and browser_select. An element keeps its ref from one snapshot to the next."},
            "truncated": {"type": "boolean", "description": "The snapshot is longer than `max_chars`: read on with browser_snapshot `start_index` = `next_start_index`."},
            "start_index": {"type": "integer"},
            "next_start_index": {"type": "integer"},
            "total_chars": {"type": "integer"},
            "selected": {"type": "array", "items": {"type": "string"}},
        }),
        &["session"],
    )
}

/// Run `step` on the session and answer with the page after it.
pub async fn run_step(
    browsing: &Browsing,
    session: &str,
    opts: &RunOptions,
    step: Step<'_>,
    view: &ViewArgs,
) -> Result<Output> {
    // Reading on in the last snapshot: no step, the page is not touched.
    if view.start_index > 0 {
        let shown = browsing.last_shown(session, &owner(opts))?;
        let mut v = json!({"session": session});
        show(&mut v, &shown, view);
        return Ok(Output::plain(v));
    }
    let done = browsing
        .step(
            session,
            &owner(opts),
            step,
            opts.scope.as_deref(),
            &view.view,
        )
        .await?;
    Ok(Output::served(answer(session, &done, view), acted(&done)))
}

/// A step acts as its session's slot, in the browser, once.
pub fn acted(done: &Stepped) -> Provenance {
    Provenance {
        slot: done.slot,
        tier: 3,
        attempts: 1,
    }
}

pub fn answer(session: &str, done: &Stepped, view: &ViewArgs) -> Value {
    let mut v = json!({"session": session});
    if let Some(s) = &done.snapshot {
        show(&mut v, s, view);
    }
    if !done.selected.is_empty() {
        v["selected"] = json!(done.selected);
    }
    v
}

/// The page as the answer shows it: a piece of the snapshot within the
/// budget, and where the next piece starts.
pub fn show(v: &mut Value, s: &Shown, view: &ViewArgs) {
    let (piece, next) =
        crate::services::snapshot_view::piece(&s.text, view.start_index, view.max_chars);
    v["url"] = json!(s.url);
    v["title"] = json!(s.title);
    v["snapshot"] = json!(piece);
    if next.is_some() || view.start_index > 0 {
        v["truncated"] = json!(next.is_some());
        v["start_index"] = json!(view.start_index);
        v["total_chars"] = json!(s.text.chars().count());
        if let Some(n) = next {
            v["next_start_index"] = json!(n);
        }
    }
}
