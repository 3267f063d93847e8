//! `crawl_status`: a crawl's pages so far (paged with `start_index`), its
//! status, and a way to cancel it; for the key that started it and admins
//! (another key's crawl is `not found`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::crawl::{answer, not_found, result_properties};
use super::spec::JobDesk;
use super::spec::{Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::Result;
use crate::lease::cascade::RunOptions;

pub const SPEC: Spec = Spec::new(
    "crawl_status",
    Role::Operator,
    "A crawl's status and pages",
    "The status of a crawl started by `crawl` (running, completed, cancelled, failed) and its \
         pages from `start_index` (pass the previous `next_start_index`); `cancel: true` stops it. \
         Only the key that started it (or an admin) sees it.",
    Run::Jobs(|desk, args, opts| crate::tools::plain(run(desk, args, opts))),
)
.input(input_schema::<Args>)
.output(|| result_schema(result_properties(), &["id", "status", "pages"]))
.budget(crate::tools::Budget::Own);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `crawl` returned.
    id: String,
    /// The first page to return (the previous `next_start_index`).
    #[serde(default)]
    start_index: usize,
    /// Stop the crawl (the pages so far are kept).
    #[serde(default)]
    cancel: bool,
    /// Most characters of answer (JSON text): the pages past them come with
    /// `next_start_index` (default: the server's `max_answer_chars`).
    #[schemars(range(min = 1, max = crate::tools::budget::MAX_MAX_CHARS))]
    max_chars: Option<u64>,
}

pub async fn run(desk: &JobDesk, args: Value, opts: &RunOptions) -> Result<Value> {
    let a: Args = parse("crawl_status", args)?;
    // Another key's crawl is answered like one that does not exist.
    let admin = opts.caller_role == Some(crate::config::Role::Admin);
    let job = (desk.jobs.get_for(&a.id, opts.caller.as_deref(), admin))
        .ok_or_else(|| not_found(&a.id))?;
    if a.cancel && job.is_running() {
        job.cancel_token().cancel();
        // It stops between two requests, or in the middle of one.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), job.finished()).await;
    }
    let budget = match a.max_chars {
        Some(m) => crate::tools::budget::checked_max(&m.into())?,
        None => opts.answer_chars,
    };
    Ok(answer(&job.record(), a.start_index, budget))
}
