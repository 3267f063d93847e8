//! The gate every HTTP request of the daemon passes before it is served (MCP
//! over Streamable HTTP and legacy SSE, the control API, the status page):
//! Host and Origin checks against DNS rebinding and cross-site calls, the API
//! key a request presents, and the JSON-RPC error it is turned away with.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The key a request came with (name and role, before any cap): what a
/// session is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(pub String);

/// Header a bridge (`idpool mcp`) uses to lower its role (`IDPOOL_ROLE`).
pub const ROLE_CAP_HEADER: &str = "x-idpool-role";

/// A JSON-RPC error as an HTTP response.
pub fn reject(status: StatusCode, code: i32, message: impl Into<String>) -> Response {
    let body =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message.into()}});
    let mut r = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"idpool\""),
        );
    }
    r
}

/// The key from `Authorization: Bearer`, `x-api-key`, or (where `query_allowed`)
/// `?key=`.
pub(crate) fn presented_key(req: &Request<Body>, query_allowed: bool) -> Option<String> {
    key_from(req.headers(), req.uri(), query_allowed)
}

/// [`presented_key`] from the parts of a request.
pub(crate) fn key_from(
    h: &HeaderMap,
    uri: &axum::http::Uri,
    query_allowed: bool,
) -> Option<String> {
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
        && let Some(k) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
    {
        return Some(k.trim().to_string());
    }
    if let Some(v) = h.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim().to_string());
    }
    if query_allowed {
        let q = uri.query().unwrap_or("");
        return url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "key")
            .map(|(_, v)| v.into_owned());
    }
    None
}

fn is_loopback_name(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Split `host[:port]` (IPv6 in brackets).
fn split_host(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let port = rest[end + 1..].strip_prefix(':');
            return (&authority[..end + 2], port);
        }
        return (authority, None);
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (authority, None),
    }
}

/// DNS-rebinding protection: the Host header must name this server.
pub(crate) fn check_host(
    headers: &HeaderMap,
    allowed: &[String],
    listen: std::net::SocketAddr,
) -> Result<(), String> {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        // HTTP/1.0 without Host, or HTTP/2 with :authority only (axum maps it).
        return Ok(());
    };
    let (name, _) = split_host(host);
    if is_loopback_name(name)
        || allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name))
        || (!listen.ip().is_loopback() && allowed.is_empty())
    {
        Ok(())
    } else {
        Err(format!(
            "Host `{host}` is not allowed (server.allowed_hosts)"
        ))
    }
}

/// A browser Origin must be loopback, the server itself (same origin, when
/// the Host is loopback or in `allowed_hosts`), or listed in
/// `server.allowed_origins`.
pub(crate) fn check_origin(
    headers: &HeaderMap,
    allowed: &[String],
    allowed_hosts: &[String],
) -> Result<(), String> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (host_name, _) = split_host(host);
    let host_trusted = is_loopback_name(host_name)
        || allowed_hosts
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(host_name));
    let ok = url::Url::parse(origin).ok().is_some_and(|u| {
        let loopback =
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(is_loopback_name);
        let same_origin = host_trusted
            && !host.is_empty()
            && matches!(u.scheme(), "http" | "https")
            && origin
                .split_once("://")
                .is_some_and(|(_, rest)| rest.trim_end_matches('/').eq_ignore_ascii_case(host));
        loopback || same_origin || allowed.iter().any(|a| origin_listed(a, origin, &u))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Origin `{origin}` is not allowed (server.allowed_origins)"
        ))
    }
}

/// Whether the `server.allowed_origins` entry `entry` admits `origin`
/// (parsed as `u`): the same scheme, host and port, or with `scheme://host:*`
/// the same scheme and host on any port.
fn origin_listed(entry: &str, origin: &str, u: &url::Url) -> bool {
    let entry = entry.trim_end_matches('/');
    if entry.eq_ignore_ascii_case(origin.trim_end_matches('/')) {
        return true;
    }
    // `:*` is no port a URL parser takes: parse what is before it and
    // compare everything but the port.
    let (base, any_port) = match entry.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (entry, false),
    };
    let Ok(w) = url::Url::parse(base) else {
        return false;
    };
    // An origin is scheme, host and port: an entry with a path, a query or
    // credentials names no origin.
    let bare = w.path() == "/" && w.query().is_none() && w.username().is_empty();
    bare && (!any_port || w.port().is_none())
        && w.scheme() == u.scheme()
        && w.host_str().is_some()
        && w.host_str() == u.host_str()
        && (any_port || w.port_or_known_default() == u.port_or_known_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: header::HeaderName, v: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(name, HeaderValue::from_str(v).unwrap());
        m
    }

    #[test]
    fn host_and_origin_checks() {
        let lo: std::net::SocketAddr = "127.0.0.1:8790".parse().unwrap();
        assert!(check_host(&h(header::HOST, "127.0.0.1:8790"), &[], lo).is_ok());
        assert!(check_host(&h(header::HOST, "localhost"), &[], lo).is_ok());
        assert!(check_host(&h(header::HOST, "[::1]:8790"), &[], lo).is_ok());
        assert!(check_host(&h(header::HOST, "evil.example.com"), &[], lo).is_err());
        let listed = vec!["mcp.example.com".to_string()];
        assert!(check_host(&h(header::HOST, "mcp.example.com:443"), &listed, lo).is_ok());
        assert!(check_origin(&h(header::ORIGIN, "http://localhost:3000"), &[], &[]).is_ok());
        assert!(check_origin(&h(header::ORIGIN, "http://evil.example.com"), &[], &[]).is_err());
        assert!(check_origin(&h(header::ORIGIN, "null"), &[], &[]).is_err());
        let origins = vec!["https://app.example.com".to_string()];
        assert!(check_origin(&h(header::ORIGIN, "https://app.example.com"), &origins, &[]).is_ok());
        assert!(check_origin(&h(header::ORIGIN, "http://app.example.com"), &origins, &[]).is_err());
        // Same origin (the status page's WebSocket) only for a trusted Host.
        let mut same = h(header::ORIGIN, "http://box.lan:8790");
        same.insert(header::HOST, HeaderValue::from_static("box.lan:8790"));
        assert!(check_origin(&same, &[], &["box.lan".to_string()]).is_ok());
        assert!(check_origin(&same, &[], &[]).is_err());
    }

    #[test]
    fn an_origin_entry_ending_in_colon_star_matches_any_port_of_that_scheme_and_host() {
        let o = |v: &str, allowed: &[&str]| {
            let allowed: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
            check_origin(&h(header::ORIGIN, v), &allowed, &[]).is_ok()
        };
        let any = ["https://app.example.com:*"];
        assert!(o("https://app.example.com:8443", &any));
        assert!(o("https://app.example.com", &any));
        assert!(o("https://APP.example.com:1", &any));
        assert!(!o("http://app.example.com:8443", &any), "another scheme");
        assert!(!o("https://evil.app.example.com:8443", &any), "a subdomain");
        assert!(!o("https://app.example.com.evil.test:8443", &any));
        assert!(!o("https://app.example.co:8443", &any));
        let local = ["http://localhost:*"];
        assert!(o("http://localhost:5173", &local));
        assert!(!o("http://evil.localhost:5173", &local));
        // Without `:*` the port still counts; entries that name no origin
        // match nothing.
        assert!(!o(
            "https://app.example.com:8443",
            &["https://app.example.com"]
        ));
        assert!(o(
            "https://app.example.com:443",
            &["https://app.example.com"]
        ));
        assert!(!o(
            "https://app.example.com:8443",
            &["https://app.example.com:1:*"]
        ));
        assert!(!o(
            "https://app.example.com:8443",
            &["https://app.example.com/x:*"]
        ));
        assert!(!o("https://app.example.com:8443", &["*"]));
    }
}
