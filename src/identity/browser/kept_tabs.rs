//! A turn's tabs of their own, for interactive sessions: opened with the
//! slot's identity, kept through tab recycling until closed, and the
//! cookies they share with the working tab.

use chromiumoxide::Page;

use super::Turn;
use super::page::{self, cdp};
use crate::error::Result;
use crate::identity::jar::PortableCookie;

impl Turn<'_> {
    /// A new tab with the slot's identity (user agent, language, timezone),
    /// kept when the working tab is recycled, until [`Turn::close_tab`].
    pub(crate) async fn open_tab(&mut self) -> Result<Page> {
        let identity = self.browser.identity.clone();
        let (browser, _) = self.running().await?;
        let tab = browser
            .new_page("about:blank")
            .await
            .map_err(cdp("open a tab"))?;
        page::prepare(&tab, &identity).await?;
        self.browser
            .kept_tabs
            .lock()
            .insert(tab.target_id().clone());
        Ok(tab)
    }

    /// Close a tab [`Turn::open_tab`] opened.
    pub(crate) async fn close_tab(&mut self, tab: Page) {
        self.browser.kept_tabs.lock().remove(tab.target_id());
        let _ = tab.close().await;
    }

    /// The browser's cookies related to `domain`.
    pub(crate) async fn cookies(&mut self, domain: &str) -> Result<Vec<PortableCookie>> {
        let (browser, _) = self.running().await?;
        page::pull_cookies(browser, domain).await
    }

    /// Put `cookies` into the browser.
    pub(crate) async fn push_cookies(
        &mut self,
        tab: &Page,
        cookies: &[PortableCookie],
    ) -> Result<()> {
        page::push_cookies(tab, cookies).await
    }
}
