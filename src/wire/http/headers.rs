//! The slot's browser's header sets, as the HTTP tier sends them: per
//! request kind, default values and order ([`HeaderSet`]), the request's own
//! headers on top, and on an origin that asked for client hints
//! ([`AskedSets`]) the hints it asked for.

use std::sync::Arc;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use crate::error::{Error, Result};
use crate::request::FetchRequest;

/// One kind of request as the browser sends it: default values (not the
/// per-request headers, whose values are empty in the profile) and order.
pub(super) struct HeaderSet {
    pub defaults: HeaderMap,
    pub order: wreq::header::OrigHeaderMap,
}

/// Replace the emulation's default headers, their order and the HEADERS
/// priority with the browser's; the header set.
fn apply_navigation(
    emulation: &mut wreq::Emulation,
    nav: &crate::wire::fingerprint::NavigationProfile,
    h1: Option<&[String]>,
) -> Result<HeaderSet> {
    let set = header_set(nav, h1)?;
    emulation.headers = set.defaults.clone();
    emulation.orig_headers = set.order.clone();
    if let (Some((weight, exclusive, dep)), Some(h2)) =
        (nav.priority, emulation.http2_options.as_mut())
    {
        let weight = u8::try_from(weight.clamp(1, 256) - 1).unwrap_or(u8::MAX);
        h2.headers_stream_dependency = Some(wreq::http2::StreamDependency::new(
            wreq::http2::StreamId::from(dep),
            weight,
            exclusive,
        ));
    }
    Ok(set)
}

/// A captured profile as wreq takes it: every name in order, and the values
/// that are not the request's own (the jar's cookie, the body's headers).
/// With the browser's HTTP/1.1 names (`h1`), one order serves both
/// protocols ([`merge_order`](crate::wire::fingerprint::merge_order)): over
/// HTTP/1.1 the names go out in Chromium's case and place, `Host` first and
/// its `Connection: keep-alive` second; over HTTP/2 those two fall away.
fn header_set(
    p: &crate::wire::fingerprint::RequestProfile,
    h1: Option<&[String]>,
) -> Result<HeaderSet> {
    let mut defaults = HeaderMap::new();
    let mut order = wreq::header::OrigHeaderMap::new();
    let h2: Vec<String> = p.headers.iter().map(|(k, _)| k.clone()).collect();
    let merged = h1.and_then(|h1| {
        let m = crate::wire::fingerprint::merge_order(h1, &h2);
        if m.is_none() {
            tracing::debug!("calibration: HTTP/1.1 and HTTP/2 orders disagree; HTTP/2's is kept");
        }
        m
    });
    for name in merged.as_deref().unwrap_or(&h2) {
        let lower = name.to_ascii_lowercase();
        if lower == "connection" {
            defaults.insert(
                http::header::CONNECTION,
                HeaderValue::from_static("keep-alive"),
            );
        }
        if HeaderName::from_bytes(lower.as_bytes()).is_err() {
            return Err(Error::config(format!(
                "captured header name `{name}` is not valid"
            )));
        }
        order.insert(name.clone());
    }
    for (k, v) in &p.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| Error::config(format!("captured header name `{k}` is not valid")))?;
        if v.is_empty() {
            continue;
        }
        let value = HeaderValue::from_str(v)
            .map_err(|_| Error::config(format!("captured header `{k}` has an invalid value")))?;
        defaults.append(name, value);
    }
    Ok(HeaderSet { defaults, order })
}

/// The browser's XHR headers instead of the navigation defaults: its origin
/// (on a request with a body) and referer, and the request's own headers
/// replacing default values in place.
pub(super) fn xhr_headers(xhr: &HeaderSet, req: &FetchRequest) -> Result<HeaderMap> {
    let mut headers = xhr.defaults.clone();
    let origin = req.url.origin().ascii_serialization();
    if !matches!(req.method, http::Method::GET | http::Method::HEAD)
        && let Ok(v) = HeaderValue::from_str(&origin)
    {
        headers.insert(http::header::ORIGIN, v);
    }
    let referer = req
        .referer
        .as_ref()
        .map_or_else(|| format!("{origin}/"), Url::to_string);
    if let Ok(v) = HeaderValue::from_str(&referer) {
        headers.insert(http::header::REFERER, v);
    }
    own_headers(headers, req)
}

/// `headers` with the request's own on top.
pub(super) fn own_headers(mut headers: HeaderMap, req: &FetchRequest) -> Result<HeaderMap> {
    for (k, v) in &req.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| Error::refused(format!("header name `{k}` is not valid")))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| Error::refused(format!("header `{k}` has an invalid value")))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Every header set a calibration gives, applied to the client's emulation
/// (the navigation's set is its default).
pub(super) struct Sets {
    pub nav: Arc<HeaderSet>,
    pub xhr: Option<Arc<HeaderSet>>,
    pub asked: Option<Arc<AskedSets>>,
}

impl Sets {
    pub fn apply(
        emulation: &mut wreq::Emulation,
        cal: &crate::wire::fingerprint::Calibration,
    ) -> Result<Sets> {
        let h1 = cal.h1.as_ref();
        let nav = apply_navigation(emulation, &cal.navigation, h1.map(|h| &h.navigation[..]))?;
        let xhr = cal
            .xhr
            .as_ref()
            .map(|x| header_set(x, h1.map(|h| &h.xhr[..])))
            .transpose()?;
        let asked = cal
            .asked
            .as_ref()
            .map(|a| AskedSets::new(a, h1))
            .transpose()?;
        Ok(Sets {
            nav: Arc::new(nav),
            xhr: xhr.map(Arc::new),
            asked: asked.map(Arc::new),
        })
    }
}

/// Chromium's header sets on an origin that asked for client hints, and
/// which of their names are hints.
pub(super) struct AskedSets {
    pub nav: HeaderSet,
    pub xhr: Option<HeaderSet>,
    pub hints: Vec<HeaderName>,
}

impl AskedSets {
    pub fn new(
        a: &crate::wire::fingerprint::Asked,
        h1: Option<&crate::wire::fingerprint::H1Names>,
    ) -> Result<Self> {
        Ok(AskedSets {
            nav: header_set(&a.navigation, h1.map(|h| &h.navigation[..]))?,
            xhr: a
                .xhr
                .as_ref()
                .map(|x| header_set(x, h1.map(|h| &h.xhr[..])))
                .transpose()?,
            hints: a
                .hints
                .iter()
                .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
                .collect(),
        })
    }

    /// `headers` without the hints the origin did not ask for; the hints
    /// left in.
    pub fn keep_asked(&self, headers: &mut HeaderMap, asked: &[String]) -> Vec<String> {
        let mut sent = Vec::new();
        for name in &self.hints {
            if asked.iter().any(|a| a == name.as_str()) {
                if headers.contains_key(name) {
                    sent.push(name.as_str().to_string());
                }
            } else {
                headers.remove(name);
            }
        }
        sent
    }
}
