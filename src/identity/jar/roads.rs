//! The roads into the store: a response's `Set-Cookie` (also through
//! wreq's `CookieStore` adapter, the HTTP tier's road), a cookie from the
//! browser or a session file, and a jar file read back. Each is judged by
//! `rules` before the store sees it.

use cookie_store::{Cookie as StoredCookie, CookieStore as Store};
use http::{HeaderValue, Uri, Version};
use std::sync::atomic::Ordering;
use url::Url;

use super::rules::{self, Reason, Refusal};
use super::{Jar, PortableCookie, unix_now};

/// One `Set-Cookie` from `url`: judged, then stored.
pub(super) fn store_set_cookie(
    store: &mut Store,
    set_cookie: &str,
    url: &Url,
) -> std::result::Result<(), Refusal> {
    let host = url.host_str().unwrap_or_default();
    let mut raw = cookie::Cookie::parse(set_cookie).map_err(|e| Refusal {
        entry: None,
        name: String::new(),
        domain: host.to_string(),
        reason: Reason::NotTaken(format!("not a cookie: {e}")),
    })?;
    let refusal = |raw: &cookie::Cookie<'_>, reason| Refusal {
        entry: None,
        name: raw.name().to_string(),
        domain: raw.domain().unwrap_or(host).to_string(),
        reason,
    };
    if let Err(reason) = rules::judge_response(&mut raw, url) {
        return Err(refusal(&raw, reason));
    }
    // `insert_raw`, not `store_response_cookies`: that one logs the whole
    // Set-Cookie, value included, at debug.
    match store.insert_raw(&raw, url) {
        Ok(_) => Ok(()),
        Err(e) => Err(refusal(&raw, Reason::NotTaken(e.to_string()))),
    }
}

/// One cookie from the browser or a session file: judged, rebuilt as its
/// own host would have set it (attributes set one by one, so nothing in a
/// field can add an attribute), then stored.
pub(super) fn import_one(store: &mut Store, c: &PortableCookie) -> std::result::Result<(), Reason> {
    let host = c.domain.trim_start_matches('.');
    rules::judge_held(&c.name, &c.value, host, c.host_only, &c.path, c.secure)?;
    let scheme = if c.secure { "https" } else { "http" };
    let url = Url::parse(&format!("{scheme}://{host}/")).map_err(|_| Reason::NotADomain)?;
    let mut raw = cookie::Cookie::new(c.name.clone(), c.value.clone());
    raw.set_path(c.path.clone());
    if !c.host_only {
        raw.set_domain(host.to_string());
    }
    if let Some(exp) = c.expires {
        let left = exp.saturating_sub(unix_now() as i64).max(0);
        raw.set_max_age(cookie::time::Duration::seconds(left));
    }
    if c.secure {
        raw.set_secure(true);
    }
    if c.http_only {
        raw.set_http_only(true);
    }
    if let Some(ss) = &c.same_site {
        match ss.to_ascii_lowercase().as_str() {
            "strict" => raw.set_same_site(cookie::SameSite::Strict),
            "lax" => raw.set_same_site(cookie::SameSite::Lax),
            "none" => raw.set_same_site(cookie::SameSite::None),
            _ => {}
        }
    }
    store
        .insert_raw(&raw, &url)
        .map(|_| ())
        .map_err(|e| Reason::NotTaken(e.to_string()))
}

/// A jar file's cookies, less those the rules refuse (planted before they
/// held), which come back as refusals.
pub(super) fn read_store(
    reader: impl std::io::Read,
) -> std::result::Result<(Store, Vec<Refusal>), String> {
    let cookies: Vec<StoredCookie<'static>> =
        serde_json::from_reader(reader).map_err(|e| e.to_string())?;
    let mut dropped = Vec::new();
    let kept: Vec<StoredCookie<'static>> = cookies
        .into_iter()
        .filter(|c| {
            let (domain, host_only) = match &c.domain {
                cookie_store::CookieDomain::HostOnly(d) => (d.as_str(), true),
                cookie_store::CookieDomain::Suffix(d) => (d.as_str(), false),
                _ => return true,
            };
            let path = String::from(&c.path);
            let secure = c.secure().unwrap_or(false);
            match rules::judge_held(c.name(), c.value(), domain, host_only, &path, secure) {
                Ok(()) => true,
                Err(reason) => {
                    dropped.push(Refusal {
                        entry: None,
                        name: c.name().to_string(),
                        domain: domain.to_string(),
                        reason,
                    });
                    false
                }
            }
        })
        .collect();
    let store = Store::from_cookies(kept.into_iter().map(Ok::<_, String>), false)?;
    Ok((store, dropped))
}

/// The adapter wreq needs: wreq 6 has no cookie_store integration of its own.
impl wreq::cookie::CookieStore for Jar {
    fn set_cookies(&self, headers: &mut dyn Iterator<Item = &HeaderValue>, uri: &Uri) {
        let Ok(url) = Url::parse(&uri.to_string()) else {
            return;
        };
        let mut took = false;
        let mut store = self.store.write();
        for value in headers.filter_map(|h| h.to_str().ok()) {
            match store_set_cookie(&mut store, value, &url) {
                Ok(()) => took = true,
                Err(r) => {
                    tracing::debug!(cookie = %r.name, domain = %r.domain, reason = %r.reason, "Set-Cookie refused");
                }
            }
        }
        drop(store);
        if took {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// One `cookie` field per cookie over HTTP/2 (Chromium sends "crumbs",
    /// RFC 9113 §8.2.3), one joined field over HTTP/1.1.
    fn cookies(&self, uri: &Uri, version: Version) -> wreq::cookie::Cookies {
        let Ok(url) = Url::parse(&uri.to_string()) else {
            return wreq::cookie::Cookies::Empty;
        };
        let pairs: Vec<String> = self
            .store
            .read()
            .get_request_values(&url)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        if pairs.is_empty() {
            return wreq::cookie::Cookies::Empty;
        }
        if version == Version::HTTP_2 {
            let values: Vec<HeaderValue> = pairs
                .iter()
                .filter_map(|p| HeaderValue::from_str(p).ok())
                .collect();
            return wreq::cookie::Cookies::Uncompressed(values);
        }
        match HeaderValue::from_str(&pairs.join("; ")) {
            Ok(v) => wreq::cookie::Cookies::Compressed(v),
            Err(_) => wreq::cookie::Cookies::Empty,
        }
    }
}
