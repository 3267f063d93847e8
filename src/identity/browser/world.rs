//! Every script idpool runs in a page runs in the page's utility world: an
//! isolated world that shares the DOM with the page but none of its
//! JavaScript, so a page that wraps `document.querySelector` or puts a
//! getter on `document.readyState` never sees idpool's reads, and no frame
//! of idpool's appears on any stack the page can inspect.
//!
//! chromiumoxide makes that world in every frame (`Page.createIsolatedWorld`
//! when a frame appears, and `Page.addScriptToEvaluateOnNewDocument` with a
//! world name, which runs in that world only); this module finds its
//! context for the main frame and evaluates there. The page's main world is
//! never asked anything: there is no fallback to it.

use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, ResolveNodeParams};
use chromiumoxide::cdp::js_protocol::runtime::{
    EvaluateParams, ExecutionContextId, RemoteObjectId,
};
use chromiumoxide::error::CdpError;
use chromiumoxide::js::EvaluationResult;

/// How long a new document's utility world may take to appear.
const CONTEXT_WAIT: Duration = Duration::from_secs(5);

/// The utility world's context of the page's main frame, waiting for it
/// while a new document is being set up.
pub async fn context(page: &Page) -> Result<ExecutionContextId, CdpError> {
    let started = Instant::now();
    loop {
        if let Some(id) = page.secondary_execution_context().await? {
            return Ok(id);
        }
        if started.elapsed() >= CONTEXT_WAIT {
            return Err(CdpError::msg("the page's utility world did not appear"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Evaluate `expression` in the utility world, awaiting a promise and
/// returning the value by value.
pub async fn eval(
    page: &Page,
    expression: impl Into<String>,
) -> Result<EvaluationResult, CdpError> {
    let expression = expression.into();
    // A navigation between finding the context and using it destroys the
    // context: find the new one once.
    for attempt in 0..2 {
        let params = EvaluateParams::builder()
            .expression(expression.clone())
            .context_id(context(page).await?)
            .await_promise(true)
            .return_by_value(true)
            .build()
            .map_err(CdpError::msg)?;
        match page.evaluate_expression(params).await {
            Err(e) if attempt == 0 && gone_context(&e) => continue,
            other => return other,
        }
    }
    Err(CdpError::msg("the page's utility world kept changing"))
}

/// A node as an object of the utility world (for `Runtime.callFunctionOn`).
pub async fn resolve(page: &Page, node: BackendNodeId) -> Result<Option<RemoteObjectId>, CdpError> {
    let params = ResolveNodeParams::builder()
        .backend_node_id(node)
        .execution_context_id(context(page).await?)
        .build();
    Ok(page.execute(params).await?.result.object.object_id)
}

fn gone_context(e: &CdpError) -> bool {
    let text = e.to_string();
    text.contains("Cannot find context") || text.contains("context was destroyed")
}
