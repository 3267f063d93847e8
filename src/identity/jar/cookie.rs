//! A cookie as the jar, the browser and the fleet exchange it.

use std::time::{SystemTime, UNIX_EPOCH};

/// A cookie in a form both the jar and the browser understand (and the
/// fleet stores).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortableCookie {
    pub name: String,
    pub value: String,
    /// Without a leading dot.
    pub domain: String,
    /// Sent only to exactly `domain` (no Domain attribute was given).
    pub host_only: bool,
    pub path: String,
    pub secure: bool,
    pub http_only: bool,
    /// Unix seconds; `None` for a session cookie.
    pub expires: Option<i64>,
    pub same_site: Option<String>,
}

/// Whether a cookie of domain `cookie` belongs with `domain`: the same, one
/// of its subdomains, or a parent a request to `domain` carries cookies of
/// (both lower-case, without a leading dot).
pub fn domains_related(cookie: &str, domain: &str) -> bool {
    cookie == domain
        || cookie
            .strip_suffix(domain)
            .is_some_and(|p| p.ends_with('.'))
        || domain
            .strip_suffix(cookie)
            .is_some_and(|p| p.ends_with('.'))
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
