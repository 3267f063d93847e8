//! One request of the HTTP tier and its complete response.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, RETRY_AFTER};
use url::Url;

/// What a request stands for in a browser, which decides its default headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestKind {
    /// A top-level page load (tier 2).
    #[default]
    Navigation,
    /// A page's own fetch/XHR call to its site (tier 1).
    Xhr,
}

/// One request.
#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub method: http::Method,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    pub kind: RequestKind,
    /// The page an XHR comes from (its `referer`; a calibrated slot sends it
    /// in its browser's place).
    pub referer: Option<Url>,
}

impl FetchRequest {
    pub fn get(url: Url) -> Self {
        FetchRequest {
            method: http::Method::GET,
            url,
            headers: Vec::new(),
            body: None,
            kind: RequestKind::Navigation,
            referer: None,
        }
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
