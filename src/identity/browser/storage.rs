//! A slot's browser storage from outside its pages: cookies set in the
//! running browser, and `localStorage` read and written per origin.
//!
//! `localStorage` belongs to a document of its origin, so each origin gets
//! a short-lived tab that navigates there with the request intercepted
//! (`Fetch.requestPaused`, answered with an empty page): nothing reaches the
//! network, the site never sees the visit, and the script runs in the
//! origin's own storage (the way Playwright applies a `storageState`).

use std::time::Duration;

use base64::Engine;
use chromiumoxide::cdp::browser_protocol::fetch::{
    EnableParams, EventRequestPaused, FulfillRequestParams, HeaderEntry, RequestPattern,
};
use chromiumoxide::{Browser, Page};
use futures_util::StreamExt;
use serde_json::Value;

use super::Turn;
use super::page::{cdp, push_cookies};
use crate::error::{Error, ErrorKind, Result};
use crate::identity::jar::PortableCookie;
use crate::identity::session::{OriginStorage, StorageItem};

impl Turn<'_> {
    /// Put `cookies` into the browser (launched if need be).
    pub(crate) async fn set_cookies(&mut self, cookies: &[PortableCookie]) -> Result<()> {
        let (_, tab) = self.running().await?;
        push_cookies(&tab, cookies).await
    }

    /// Write each origin's `localStorage` items (others of the origin stay).
    pub(crate) async fn write_local_storage(&mut self, origins: &[OriginStorage]) -> Result<()> {
        let timeout = self.op_timeout();
        let (browser, _) = self.running().await?;
        for o in origins {
            let pairs: Vec<(&str, &str)> = o
                .local_storage
                .iter()
                .map(|i| (i.name.as_str(), i.value.as_str()))
                .collect();
            // The items travel as a JSON string inside the script: no quoting games.
            let items = serde_json::to_string(&pairs)
                .and_then(|j| serde_json::to_string(&j))
                .map_err(|e| Error::new(ErrorKind::Internal, format!("localStorage: {e}")))?;
            let script = format!(
                "(() => {{ for (const [k, v] of JSON.parse({items})) localStorage.setItem(k, v); \
                 return JSON.stringify([location.origin, []]); }})()"
            );
            on_origin(browser, &o.origin, &script, timeout).await?;
        }
        Ok(())
    }

    /// Each origin's `localStorage`; origins with none are left out.
    pub(crate) async fn read_local_storage(
        &mut self,
        origins: &[String],
    ) -> Result<Vec<OriginStorage>> {
        let timeout = self.op_timeout();
        let (browser, _) = self.running().await?;
        let mut out = Vec::new();
        for origin in origins {
            let script = "JSON.stringify([location.origin, Object.entries(localStorage)])";
            let items = on_origin(browser, origin, script, timeout).await?;
            if !items.is_empty() {
                out.push(OriginStorage {
                    origin: origin.clone(),
                    local_storage: items,
                });
            }
        }
        Ok(out)
    }

    fn op_timeout(&self) -> Duration {
        Duration::from_secs(self.browser.cfg.op_timeout_secs)
    }

    /// The browser and its working tab, launched if need be.
    pub(crate) async fn running(&mut self) -> Result<(&Browser, Page)> {
        self.ready().await?;
        let r = self
            .guard
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::Internal, "browser vanished after launch"))?;
        let tab = r
            .page
            .clone()
            .ok_or_else(|| Error::new(ErrorKind::Internal, "browser has no tab"))?;
        Ok((&r.browser, tab))
    }
}

/// Run `script` (which yields `JSON.stringify([origin, entries])`) in a tab
/// of `origin` whose navigation never leaves the browser; the entries.
async fn on_origin(
    browser: &Browser,
    origin: &str,
    script: &str,
    timeout: Duration,
) -> Result<Vec<StorageItem>> {
    let want = url::Url::parse(origin)
        .map(|u| u.origin().ascii_serialization())
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("`{origin}` is not an origin ({e})"),
            )
        })?;
    let tab = browser
        .new_page("about:blank")
        .await
        .map_err(cdp("open a tab"))?;
    let work = async {
        let mut paused = tab
            .event_listener::<EventRequestPaused>()
            .await
            .map_err(cdp("listen to requests"))?;
        let pattern = RequestPattern {
            url_pattern: Some("*".into()),
            resource_type: None,
            request_stage: None,
        };
        tab.execute(EnableParams {
            patterns: Some(vec![pattern]),
            handle_auth_requests: None,
        })
        .await
        .map_err(cdp("intercept requests"))?;
        let answer = async {
            let body = base64::engine::general_purpose::STANDARD
                .encode("<!doctype html><title>idpool storage</title>");
            while let Some(ev) = paused.next().await {
                let mut reply = FulfillRequestParams::new(ev.request_id.clone(), 200);
                reply.response_headers = Some(vec![HeaderEntry::new("content-type", "text/html")]);
                reply.body = Some(body.clone().into());
                let _ = tab.execute(reply).await;
            }
        };
        tokio::select! {
            nav = tab.goto(format!("{want}/")) => { nav.map_err(cdp("open the origin"))?; }
            () = answer => {}
        }
        let got: String = super::world::eval(&tab, script)
            .await
            .map_err(cdp("run the storage script"))?
            .into_value()
            .map_err(|e| Error::new(ErrorKind::Internal, format!("storage script: {e}")))?;
        parse_answer(&got, &want)
    };
    let result = tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "localStorage of {want}: no answer within {} s",
                    timeout.as_secs()
                ),
            ))
        });
    let _ = tab.close().await;
    result
}

fn parse_answer(got: &str, want: &str) -> Result<Vec<StorageItem>> {
    let bad = |why: String| {
        Error::new(
            ErrorKind::Internal,
            format!("localStorage of {want}: {why}"),
        )
    };
    let v: Value = serde_json::from_str(got).map_err(|e| bad(e.to_string()))?;
    if v[0].as_str() != Some(want) {
        return Err(bad(format!("the tab is at {} instead", v[0])));
    }
    let entries = v[1].as_array().cloned().unwrap_or_default();
    Ok(entries
        .iter()
        .filter_map(|e| {
            Some(StorageItem {
                name: e[0].as_str()?.to_string(),
                value: e[1].as_str()?.to_string(),
            })
        })
        .collect())
}
