//! One HTTP request as a caller asks for it: method, URL, headers, body,
//! what it stands for in a browser, and whether its redirects are followed.
//! The wire (`crate::wire::http`) sends it.

use bytes::Bytes;
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
    /// Follow redirects here (each hop checked by the SSRF guard); `false`:
    /// a redirect comes back as it is, for the caller to judge the hop
    /// (the lease does: grants, robots, pacing) and send it on.
    pub follow: bool,
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
            follow: true,
        }
    }
}
