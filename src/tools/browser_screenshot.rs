//! `browser_screenshot`: a PNG of a browser session's page.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::browsing::owner;
use super::spec::{Annotations, Role, Run, Spec, input_schema, parse, result_schema};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::cascade::RunOptions;
use crate::services::Browsing;
use crate::services::browsing::Step;

pub const SPEC: Spec = Spec::new(
    "browser_screenshot",
    Role::Operator,
    "Screenshot of a browser session",
    "A PNG of the session's page (the viewport, or `full_page`), as MCP image content.",
    Run::Browsing(|browsing, args, opts| Box::pin(run(browsing, args, opts))),
)
.input(input_schema::<Args>)
.output(|| {
    result_schema(
        json!({"session": {"type": "string"}, "screenshot": {"type": "object"}}),
        &["session", "screenshot"],
    )
})
.annotations(Annotations::READS_SITES);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id `browser_open` returned.
    session: String,
    /// The whole page rather than the viewport.
    #[serde(default)]
    full_page: bool,
}

pub async fn run(
    browsing: &Browsing,
    args: Value,
    opts: &RunOptions,
) -> Result<crate::tools::Output> {
    use base64::Engine as _;
    let a: Args = parse("browser_screenshot", args)?;
    let done = browsing
        .step(
            &a.session,
            &owner(opts),
            Step::Screenshot {
                full_page: a.full_page,
            },
            opts.scope.as_deref(),
            &Default::default(),
        )
        .await?;
    let by = super::browsing::acted(&done);
    let png = done
        .png
        .ok_or_else(|| Error::new(ErrorKind::Internal, "the browser took no screenshot"))?;
    let (width, height) = super::scrape::png_size(&png)
        .ok_or_else(|| Error::new(ErrorKind::Internal, "the browser's screenshot is not a PNG"))?;
    let body = json!({
        "session": a.session,
        "screenshot": {"mime_type": "image/png", "bytes": png.len(), "width": width, "height": height},
        "media": [{"type": "image", "mime_type": "image/png",
                   "data": base64::engine::general_purpose::STANDARD.encode(&png)}],
    });
    Ok(crate::tools::Output::served(body, by))
}
