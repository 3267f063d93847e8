//! A step of an interactive session under its lease (an extension of
//! [`Lease`]): a click, typed text, a key or a choice that makes the tab
//! load a page is a request of the identity like any other. The step takes
//! its turn in the site's pacing; the page it led to passes the gates the
//! first URL passed (the SSRF guard, the caller's grants, robots), is
//! counted as the slot's request and judged under the strategy (blocks,
//! challenges, sign-in walls), and the caller closes the lease with it so
//! the breaker hears of it.

use std::future::Future;

use super::{Fetched, Lease};
use crate::error::Result;

impl Lease {
    /// Run `step` on `tab` (a tab of this lease's slot whose browser turn
    /// the caller holds, showing `from`), and judge the page it led to,
    /// if it loaded one. A page the gates refuse is left at once (the tab
    /// goes blank) and the step fails with their reason.
    pub async fn act<T>(
        &self,
        tab: &chromiumoxide::Page,
        from: &url::Url,
        deadline: std::time::Instant,
        step: impl Future<Output = Result<T>>,
    ) -> Result<(T, Option<Fetched>)> {
        let started = self.pass(from, super::gate::STEP).await?;
        let limit = self.slot_ref().browser().page_limit();
        let (out, page) =
            crate::identity::browser::settle::after(tab, step, deadline, limit).await?;
        let Some(page) = page else {
            return Ok((out, None));
        };
        let to = url::Url::parse(&page.final_url).unwrap_or_else(|_| from.clone());
        if let Err(e) = self.judge_hop(from, "led to", &to).await {
            crate::identity::browser::tab::blank(tab).await;
            self.leases
                .record(&self.strategy, 3, "failed", started.elapsed());
            return Err(e);
        }
        self.slot_ref().count_page();
        let (fetched, ()) = self.judge_landed(page, to, started);
        Ok((out, Some(fetched)))
    }
}
