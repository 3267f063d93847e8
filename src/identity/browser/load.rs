//! One navigation of a slot's working tab: the jar's cookies for the
//! request's cookie domain pushed in, the page loaded and settled, the
//! request's actions and captures, and the browser's cookies taken back
//! into the jar (even when the page itself failed).

use std::time::Instant;

use chromiumoxide::{Browser, Page};

use super::request::BrowserRequest;
use super::{PageResult, actions, page};
use crate::error::Result;
use crate::identity::jar::Jar;

/// `(deadline, limit)`: when waiting stops, and the most of the page's
/// HTML read out of the browser.
pub(super) async fn load(
    tab: &Page,
    browser: &Browser,
    req: &BrowserRequest,
    jar: Option<&Jar>,
    probe: &page::Probe<'_>,
    (deadline, limit): (Instant, usize),
) -> Result<PageResult> {
    let sync = jar.zip(req.cookie_domain.as_deref());
    if let Some((jar, domain)) = sync {
        page::push_cookies(tab, &jar.export_for_domain(domain)).await?;
    }
    let filming = match &req.tape {
        Some(tape) => {
            tape.action("navigate", super::tape::without_credentials(&req.url));
            match super::tape::film(tab, tape.clone()).await {
                Ok(f) => Some(f),
                Err(e) => {
                    tape.action("error", format!("cannot film the tab: {}", e.message()));
                    None
                }
            }
        }
        None => None,
    };
    let mut result = super::settle::navigate(
        tab,
        &req.url,
        req.wait_for.as_deref(),
        probe,
        deadline,
        limit,
    )
    .await;
    if let Ok(page) = result.as_mut() {
        let tape = req.tape.as_deref();
        let acted = actions::after(
            tab,
            (&req.actions, req.capture),
            page,
            deadline,
            (limit, tape),
        )
        .await;
        if let Err(e) = acted {
            if let Some(f) = filming {
                f.stop().await;
            }
            return Err(e);
        }
    }
    if let Some(f) = filming {
        if let (Some(tape), Ok(page)) = (&req.tape, &result) {
            tape.action(
                "loaded",
                format!(
                    "{} ({})",
                    super::tape::without_credentials(&page.final_url),
                    page.status
                ),
            );
        }
        f.stop().await;
    }
    if let Some((jar, domain)) = sync {
        let cookies = page::pull_cookies(browser, domain).await?;
        jar.import(&cookies);
        if let Ok(page) = result.as_mut() {
            page.cookies = cookies;
        }
    }
    result
}
