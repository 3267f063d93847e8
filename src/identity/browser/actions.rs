//! What a caller does on a loaded page before it is captured (Firecrawl's
//! `actions`): click, type, press a key, scroll, wait. Clicks and keys are
//! real input events (CDP `Input.*`), not `element.click()` in script. And
//! the captures after them: a PNG screenshot (the viewport or the full
//! page) and a PDF.

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::ScrollIntoViewIfNeededParams;
use chromiumoxide::cdp::browser_protocol::page::{CaptureScreenshotFormat, PrintToPdfParams};
use chromiumoxide::page::ScreenshotParams;
use std::time::Instant;

use super::page::cdp;
use crate::error::{Error, ErrorKind, Result};
use crate::request::{Action, Capture, Captured, Direction};

/// Run `actions` in order on `page`, each bounded by `deadline`; each is
/// logged on `tape` (typed text as its length only).
pub async fn run(
    page: &Page,
    actions: &[Action],
    deadline: Instant,
    tape: Option<&super::tape::Tape>,
) -> Result<()> {
    for (i, a) in actions.iter().enumerate() {
        if let Some(t) = tape {
            t.action(a.name(), a.logged());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(left, step(page, a, deadline))
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Timeout,
                    format!("actions[{i}] ({}) did not finish in time", a.name()),
                )
            })?
            .map_err(|e| {
                Error::new(
                    e.kind(),
                    format!("actions[{i}] ({}): {}", a.name(), e.message()),
                )
            })?;
    }
    Ok(())
}

impl Action {
    /// What a recording's action log says of this step: never the typed text.
    pub fn logged(&self) -> String {
        match self {
            Action::Click { selector } => selector.clone(),
            Action::Type { selector, text } => format!(
                "{selector}: {} characters typed (not recorded)",
                text.chars().count()
            ),
            Action::Press { key } => key.clone(),
            Action::Scroll {
                selector: Some(s), ..
            } => s.clone(),
            Action::Scroll { direction, .. } => format!("{direction:?}").to_lowercase(),
            Action::Wait {
                milliseconds: Some(ms),
                ..
            } => format!("{ms} ms"),
            Action::Wait {
                selector: Some(s), ..
            } => format!("until {s}"),
            Action::Wait { .. } => String::new(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Action::Click { .. } => "click",
            Action::Type { .. } => "type",
            Action::Press { .. } => "press",
            Action::Scroll { .. } => "scroll",
            Action::Wait { .. } => "wait",
        }
    }
}

async fn find(page: &Page, selector: &str) -> Result<chromiumoxide::Element> {
    page.find_element(selector).await.map_err(|_| {
        Error::new(
            ErrorKind::NotFound,
            format!("no element matches `{selector}`"),
        )
    })
}

async fn step(page: &Page, action: &Action, deadline: Instant) -> Result<()> {
    match action {
        Action::Click { selector } => {
            let e = find(page, selector).await?;
            super::tab::click(page, e.backend_node_id).await?;
        }
        Action::Type { selector, text } => {
            let e = find(page, selector).await?;
            super::tab::click(page, e.backend_node_id).await?;
            e.type_str(text).await.map_err(cdp("type"))?;
        }
        Action::Press { key } => super::tab::press(page, key).await?,
        Action::Scroll {
            selector: Some(selector),
            ..
        } => {
            let e = find(page, selector).await?;
            page.execute(
                ScrollIntoViewIfNeededParams::builder()
                    .backend_node_id(e.backend_node_id)
                    .build(),
            )
            .await
            .map_err(cdp("scroll"))?;
        }
        Action::Scroll {
            direction,
            selector: None,
        } => {
            let sign = if *direction == Direction::Up { "-" } else { "" };
            super::world::eval(
                page,
                format!("window.scrollBy(0, {sign}window.innerHeight)"),
            )
            .await
            .map_err(cdp("scroll"))?;
        }
        Action::Wait {
            milliseconds: Some(ms),
            ..
        } => tokio::time::sleep(Duration::from_millis(*ms)).await,
        Action::Wait {
            selector: Some(selector),
            ..
        } => {
            super::tab::wait_for(
                page,
                &crate::request::Until::Selector(selector.clone()),
                deadline,
            )
            .await?
        }
        Action::Wait { .. } => {}
    }
    // Let the page react (a click's handler, a submitted form's navigation).
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// After the page settled: the request's `actions`, then the page read
/// again (the actions changed it), then what it asked to `capture`.
pub async fn after(
    page: &Page,
    (actions, want): (&[Action], Capture),
    result: &mut super::PageResult,
    deadline: Instant,
    (limit, tape): (usize, Option<&super::tape::Tape>),
) -> Result<()> {
    if !actions.is_empty() {
        run(page, actions, deadline, tape).await?;
        (result.html, result.cut_from) = super::page::content(page, limit).await?;
        if let Ok(Some(url)) = page.url().await {
            result.final_url = url;
        }
    }
    if want != Capture::default() {
        result.captured = capture(page, want).await?;
    }
    Ok(())
}

/// Take the captures `want` asks for.
pub async fn capture(page: &Page, want: Capture) -> Result<Captured> {
    let mut out = Captured::default();
    if let Some(full_page) = want.screenshot {
        let params = ScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .full_page(full_page)
            .build();
        out.viewport = super::world::eval(page, "[window.innerWidth, window.innerHeight]")
            .await
            .ok()
            .and_then(|r| r.into_value::<(u32, u32)>().ok());
        out.png = Some(
            page.screenshot(params)
                .await
                .map_err(cdp("take a screenshot"))?,
        );
    }
    if want.pdf {
        let params = PrintToPdfParams {
            print_background: Some(true),
            ..Default::default()
        };
        out.pdf = Some(
            page.pdf(params)
                .await
                .map_err(cdp("print the page as PDF"))?,
        );
    }
    Ok(out)
}
