//! What a browser call does beyond loading the page, and how the page's
//! answer reads as the lease's (headers, the egress's refusals).

use crate::error::{Error, Result};

/// How a browser call treats the page beyond loading it.
#[derive(Debug, Clone, Default)]
pub struct BrowseOptions {
    /// CSS selector to wait for.
    pub wait_for: Option<String>,
    /// Steps on the page before it is read.
    pub actions: Vec<crate::request::Action>,
    pub capture: crate::request::Capture,
}

/// The main document's response headers, as the browser reported them.
pub(super) fn page_headers(pairs: &[(String, String)]) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (k, v) in pairs {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v),
        ) {
            headers.append(k, v);
        }
    }
    headers
}

/// A navigation whose main document the egress refused (the page itself, or
/// where a redirect sent it) is the guard's refusal, not the site's answer:
/// the egress's `403` would otherwise read as a block, its failed tunnel as a
/// network error.
pub(super) fn refused_main_document(
    page: Result<crate::identity::browser::PageResult>,
    refusals: &[crate::wire::egress::Refusal],
) -> Result<crate::identity::browser::PageResult> {
    let refusal = |what: &str, r: &crate::wire::egress::Refusal| {
        Error::refused(format!("{what}; the browser's egress refused {r}")).retryable(false)
    };
    match page {
        Ok(page) => {
            let landed = url::Url::parse(&page.final_url)
                .ok()
                .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)));
            match refusals.iter().find(|r| Some(&r.target) == landed.as_ref()) {
                Some(r) => Err(refusal(
                    &format!("the browser was sent to {}", page.final_url),
                    r,
                )),
                None => Ok(page),
            }
        }
        Err(e) if e.message().contains("ERR_TUNNEL_CONNECTION_FAILED") => match refusals.last() {
            Some(r) => Err(refusal(e.message(), r)),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}
