//! One request of the HTTP tier and its complete response.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, RETRY_AFTER};
use url::Url;

use crate::request::FetchRequest;

// What a request is, is plain data every layer names (`crate::request`);
// how a redirect turns it into the next one is the wire's.
impl FetchRequest {
    /// Where a redirect `resp` to this request points, as the next request
    /// a browser would send: `None` when `resp` is no redirect (or has no
    /// usable `Location`). 303, and 301/302 of a POST, become a GET without
    /// a body; credentials set by hand do not cross to another origin.
    pub fn redirected(&self, resp: &FetchResponse) -> Option<FetchRequest> {
        if !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        let location = resp.headers.get(http::header::LOCATION)?.to_str().ok()?;
        let to = self.url.join(location).ok()?;
        let mut next = self.clone();
        let becomes_get = resp.status == 303
            || (matches!(resp.status, 301 | 302) && self.method == http::Method::POST);
        if becomes_get {
            next.method = http::Method::GET;
            next.body = None;
            next.headers.retain(|(k, _)| {
                !k.eq_ignore_ascii_case("content-type") && !k.eq_ignore_ascii_case("content-length")
            });
        }
        if to.origin() != self.url.origin() {
            next.headers.retain(|(k, _)| {
                !["authorization", "cookie", "proxy-authorization"]
                    .iter()
                    .any(|h| k.eq_ignore_ascii_case(h))
            });
        }
        next.url = to;
        Some(next)
    }
}

/// A complete response: the body has been read to the end.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    pub status: u16,
    pub final_url: Url,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Names of the cookies this response set (browser tier: the browser's
    /// cookies for the strategy's cookie domain after the page).
    pub cookies_set: Vec<String>,
    pub elapsed: Duration,
    pub http_version: String,
}

impl FetchResponse {
    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        self.text_ref().into_owned()
    }

    /// The body as text, borrowed when it is valid UTF-8 (the usual case).
    pub fn text_ref(&self) -> std::borrow::Cow<'_, str> {
        utf8_text(&self.body)
    }

    /// The `Content-Type` header, when it is text.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    pub fn retry_after(&self) -> Option<&str> {
        self.headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok())
    }
}

/// `bytes` as text: borrowed when valid UTF-8, else lossy. `str::from_utf8`
/// checks ASCII a word at a time; the lossy decoder goes byte by byte, which
/// cost more than the HTTP/2 stack on a tier-1 call.
pub fn utf8_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}
