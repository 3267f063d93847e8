//! Pages a hostile site might send, for the tests of the pool's bounds:
//! `/hostile/nested/{n}` nests `n` `<div>`s around one line of text;
//! `/hostile/grow/{mib}` is a small page whose script writes `mib` MiB of
//! text into itself once loaded; `/hostile/shout/{mib}` logs a string of
//! `mib` MiB to the console (what DevTools carries to whoever listens).

use axum::Router;
use axum::extract::Path;
use axum::response::Html;
use axum::routing::get;

/// The text at the bottom of a nested page.
pub const NESTED_TEXT: &str = "the bottom of the well";

/// The deepest page served (a page of 1,000,000 levels is 11 MB).
const MAX_NESTED: usize = 1_000_000;

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/hostile/nested/{n}", get(nested))
        .route("/hostile/grow/{mib}", get(grow))
        .route("/hostile/shout/{mib}", get(shout))
}

async fn nested(Path(n): Path<usize>) -> Html<String> {
    let n = n.min(MAX_NESTED);
    Html(format!(
        "<!doctype html><html><head><title>Nested</title></head><body>{}{NESTED_TEXT}{}</body></html>",
        "<div>".repeat(n),
        "</div>".repeat(n)
    ))
}

async fn grow(Path(mib): Path<usize>) -> Html<String> {
    let mib = mib.min(256);
    Html(format!(
        "<!doctype html><html><head><title>Grow</title></head><body><p id=s>small</p><script>\
         const p = document.createElement('pre'); p.textContent = 'x'.repeat({mib} * 1048576); \
         document.body.appendChild(p);</script></body></html>"
    ))
}

async fn shout(Path(mib): Path<usize>) -> Html<String> {
    let mib = mib.min(256);
    Html(format!(
        "<!doctype html><html><head><title>Shout</title></head><body><p id=s>loud</p><script>\
         console.log('x'.repeat({mib} * 1048576));</script></body></html>"
    ))
}
