//! The roads into the store: a response's `Set-Cookie` (also through
//! wreq's `CookieStore` adapter, the HTTP tier's road), a cookie from the
//! browser or a session file, and a jar file read back. Each is judged by
//! `rules` before the store sees it.

use cookie_store::{Cookie as StoredCookie, CookieStore as Store};
use url::Url;

use super::cookie::{PortableCookie, unix_now};
use super::rules::{self, Reason, Refusal};

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
