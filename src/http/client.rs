//! Building and using one slot's impersonating client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header::{
    ACCEPT_LANGUAGE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, SET_COOKIE, USER_AGENT,
};
use url::Url;

use super::Guard;
use super::cert::RootStore;
use crate::config::HttpConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::jar::Jar;
use crate::profile::Profile;

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

/// A slot's HTTP client. Cheap to share; concurrent requests need no lock.
#[derive(Clone)]
pub struct HttpClient {
    client: wreq::Client,
    guard: Arc<Guard>,
    cfg: HttpConfig,
    /// The browser's XHR header set, when calibrated.
    xhr: Option<Arc<HeaderSet>>,
    /// The browser's navigation header set, when calibrated (the
    /// emulation's defaults hold it too; plain `http://` needs it apart).
    nav: Option<Arc<HeaderSet>>,
}

/// One kind of request as the browser sends it: default values (not the
/// per-request headers, whose values are empty in the profile) and order.
struct HeaderSet {
    defaults: HeaderMap,
    order: wreq::header::OrigHeaderMap,
}

impl HttpClient {
    /// Build the client for `profile`, storing cookies in `jar`.
    pub fn new(
        profile: &Profile,
        jar: Arc<Jar>,
        cfg: HttpConfig,
        roots: &RootStore,
        guard: Arc<Guard>,
    ) -> Result<Self> {
        Self::calibrated(profile, jar, cfg, roots, guard, None)
    }

    /// Like [`HttpClient::new`], sending requests as the slot's own browser
    /// does (`cal`, from its capture): navigations and XHRs with its header
    /// lists, order and values, its HTTP/2 HEADERS priority, and the TLS
    /// options wreq exposes set from its ClientHello.
    pub fn calibrated(
        profile: &Profile,
        jar: Arc<Jar>,
        cfg: HttpConfig,
        roots: &RootStore,
        guard: Arc<Guard>,
        cal: Option<&crate::fingerprint::Calibration>,
    ) -> Result<Self> {
        let mut emulation = wreq::IntoEmulation::into_emulation(
            wreq_util::Emulation::builder()
                .profile(profile.emulation.0)
                .platform(profile.platform)
                .build(),
        );
        // Override in place so the emulation's header order is kept.
        set_header(
            &mut emulation.headers,
            USER_AGENT,
            &profile.user_agent,
            "user_agent",
        )?;
        set_header(
            &mut emulation.headers,
            ACCEPT_LANGUAGE,
            &profile.accept_language,
            "accept_language",
        )?;
        // The client hints follow the user agent (the real Chromium's major).
        let hints = HeaderName::from_static("sec-ch-ua");
        if let Some(v) = &profile.sec_ch_ua
            && emulation.headers.contains_key(&hints)
        {
            set_header(&mut emulation.headers, hints, v, "sec-ch-ua")?;
        }
        let (mut xhr, mut nav) = (None, None);
        if let Some(cal) = cal {
            let h1 = cal.h1.as_ref();
            nav = Some(Arc::new(apply_navigation(
                &mut emulation,
                &cal.navigation,
                h1.map(|h| &h.navigation[..]),
            )?));
            if let Some(hello) = &cal.hello {
                super::tls_match::apply(&mut emulation, hello);
            }
            xhr = cal
                .xhr
                .as_ref()
                .map(|x| header_set(x, h1.map(|h| &h.xhr[..])))
                .transpose()?
                .map(Arc::new);
        }
        let redirect_guard = guard.clone();
        let max_redirects = cfg.max_redirects;
        let policy = wreq::redirect::Policy::custom(move |attempt| {
            if attempt.previous.len() > max_redirects {
                return attempt.error(RedirectRefused(format!(
                    "more than {max_redirects} redirects"
                )));
            }
            let guard = redirect_guard.clone();
            attempt.pending(move |attempt| async move {
                let target = Url::parse(&attempt.uri.to_string());
                match target {
                    Ok(url) => match guard.check(&url).await {
                        Ok(()) => attempt.follow(),
                        Err(e) => attempt.error(RedirectRefused(format!(
                            "redirect to {url} refused: {}",
                            e.message()
                        ))),
                    },
                    Err(e) => {
                        attempt.error(RedirectRefused(format!("invalid redirect target ({e})")))
                    }
                }
            })
        });
        let mut builder = wreq::Client::builder()
            .emulation(emulation)
            .cookie_provider(jar)
            .tcp_nodelay(true)
            .tls_cert_store(roots.0.clone())
            .connect_timeout(Duration::from_secs(cfg.connect_timeout_secs))
            .timeout(Duration::from_secs(cfg.timeout_secs))
            .redirect(policy);
        builder = route(builder, profile, &guard)?;
        let client = builder.build().map_err(|e| {
            Error::new(
                ErrorKind::Internal,
                format!("cannot build HTTP client for profile `{}`", profile.name),
            )
            .with_source(e)
        })?;
        Ok(HttpClient {
            client,
            guard,
            cfg,
            xhr,
            nav,
        })
    }

    /// The same client without the SSRF guard, trusting `extra_pem` too: for
    /// the daemon's own loopback calibration listener only.
    pub(crate) fn for_calibration(
        profile: &Profile,
        cfg: HttpConfig,
        cal: Option<&crate::fingerprint::Calibration>,
        extra_pem: &str,
    ) -> Result<Self> {
        let roots = RootStore::only(extra_pem)?;
        let guard = Arc::new(Guard::new(
            vec!["127.0.0.1".into(), "127.0.0.2".into()],
            true,
        ));
        let jar = Arc::new(Jar::in_memory());
        let mut profile = profile.clone();
        profile.proxy = None; // the listener is on loopback
        Self::calibrated(&profile, jar, cfg, &roots, guard, cal)
    }

    /// Send `req` and read the whole body (so the connection can be reused).
    pub async fn fetch(&self, req: FetchRequest) -> Result<FetchResponse> {
        self.guard.check(&req.url).await?;
        let started = Instant::now();
        let mut builder = self.client.request(req.method.clone(), req.url.as_str());
        // `priority` is HTTP/2's (and 3's): Chromium sends none over
        // HTTP/1.1, which plain `http://` always is.
        let plain = req.url.scheme() == "http";
        let set = match req.kind {
            RequestKind::Xhr => self.xhr.as_ref(),
            _ if plain => self.nav.as_ref(),
            _ => None,
        };
        if let Some(set) = set {
            let mut headers = match req.kind {
                RequestKind::Xhr => xhr_headers(set, &req)?,
                _ => own_headers(set.defaults.clone(), &req)?,
            };
            if plain {
                headers.remove(HeaderName::from_static("priority"));
            }
            builder = builder
                .default_headers(false)
                .headers(headers)
                .orig_headers(set.order.clone());
        } else {
            for (k, v) in &req.headers {
                builder = builder.header(k.as_str(), v.as_str());
            }
        }
        if let Some(body) = req.body.clone() {
            builder = builder.body(body);
        }
        let resp = builder.send().await.map_err(|e| net_error(&req.url, e))?;
        let status = resp.status().as_u16();
        let final_url = Url::parse(&resp.uri().to_string()).unwrap_or_else(|_| req.url.clone());
        let headers = resp.headers().clone();
        let http_version = format!("{:?}", resp.version());
        let cookies_set = headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|s| s.split('=').next())
            .map(|n| n.trim().to_string())
            .collect();
        let deadline = Duration::from_secs(self.cfg.timeout_secs);
        // The client's timeout covers the body too; this bounds a stalled stream regardless.
        let body =
            tokio::time::timeout(deadline, read_body(resp, &req.url, self.cfg.max_body_bytes))
                .await
                .map_err(|_| {
                    Error::new(
                        ErrorKind::Timeout,
                        format!("reading the body of {} timed out", req.url),
                    )
                })??;
        Ok(FetchResponse {
            status,
            final_url,
            headers,
            body,
            cookies_set,
            elapsed: started.elapsed(),
            http_version,
        })
    }
}

/// The browser's XHR headers instead of the navigation defaults: its origin
/// (on a request with a body) and referer, and the request's own headers
/// replacing default values in place.
fn xhr_headers(xhr: &HeaderSet, req: &FetchRequest) -> Result<HeaderMap> {
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
fn own_headers(mut headers: HeaderMap, req: &FetchRequest) -> Result<HeaderMap> {
    for (k, v) in &req.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| Error::refused(format!("header name `{k}` is not valid")))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| Error::refused(format!("header `{k}` has an invalid value")))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// The whole body, refused past `limit` bytes. A body that arrives in one
/// chunk is kept as it came; more chunks go into one buffer sized from
/// Content-Length.
async fn read_body(resp: wreq::Response, url: &Url, limit: usize) -> Result<Bytes> {
    let expected = resp
        .content_length()
        .map_or(0, |n| usize::try_from(n).unwrap_or(limit).min(limit));
    let mut first: Option<Bytes> = None;
    let mut body = BytesMut::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| net_error(url, e))?;
        let had = first.as_ref().map_or(0, Bytes::len) + body.len();
        if had + chunk.len() > limit {
            return Err(Error::new(
                ErrorKind::Network,
                format!("response body of {url} is larger than http.max_body_bytes ({limit})"),
            )
            .retryable(false));
        }
        if first.is_none() && body.is_empty() {
            first = Some(chunk);
            continue;
        }
        if let Some(f) = first.take() {
            body.reserve(expected.max(f.len() + chunk.len()));
            body.extend_from_slice(&f);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match first {
        Some(one) => one,
        None => body.freeze(),
    })
}

/// Replace the emulation's default headers, their order and the HEADERS
/// priority with the browser's; the header set.
fn apply_navigation(
    emulation: &mut wreq::Emulation,
    nav: &crate::fingerprint::NavigationProfile,
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
/// protocols ([`merge_order`](crate::fingerprint::merge_order)): over
/// HTTP/1.1 the names go out in Chromium's case and place, `Host` first and
/// its `Connection: keep-alive` second; over HTTP/2 those two fall away.
fn header_set(p: &crate::fingerprint::RequestProfile, h1: Option<&[String]>) -> Result<HeaderSet> {
    let mut defaults = HeaderMap::new();
    let mut order = wreq::header::OrigHeaderMap::new();
    let h2: Vec<String> = p.headers.iter().map(|(k, _)| k.clone()).collect();
    let merged = h1.and_then(|h1| {
        let m = crate::fingerprint::merge_order(h1, &h2);
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

fn set_header(map: &mut HeaderMap, name: HeaderName, value: &str, field: &str) -> Result<()> {
    let v = HeaderValue::from_str(value)
        .map_err(|_| Error::config(format!("profile {field} is not a valid header value")))?;
    map.insert(name, v);
    Ok(())
}

fn net_error(url: &Url, e: wreq::Error) -> Error {
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else {
        ErrorKind::Network
    };
    // wreq's Display stops at "client error (Connect)"; BoringSSL's reason is in Debug.
    let detail = format!("{e:?}");
    let what = if e.is_timeout() {
        "timed out"
    } else if detail.contains("CERTIFICATE_VERIFY_FAILED") {
        "TLS handshake failed: certificate not trusted (add its CA to security.extra_root_certs?)"
    } else if e.is_tls() || detail.contains("code: SSL") {
        "TLS handshake failed"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_redirect() {
        "redirect refused"
    } else if e.is_body() || e.is_decode() {
        "body could not be read"
    } else {
        "request failed"
    };
    // A refused redirect is the guard speaking, not the network: don't retry
    // it, and say what the guard said.
    if let Some(why) = refused_redirect(&e) {
        return Error::refused(format!("{url}: {why}")).retryable(false);
    }
    // So is an address the guarded resolver refused, or a name it could
    // not resolve: its own words.
    if let Some(ours) = our_error(&e) {
        return Error::new(ours.kind(), format!("{url}: {}", ours.message()))
            .retryable(ours.kind() != ErrorKind::Refused);
    }
    Error::new(kind, format!("{url}: {what}"))
        .retryable(!e.is_redirect())
        .with_source(e)
}

/// Our redirect policy stopped a redirect (the SSRF guard, the limit): why.
#[derive(Debug)]
struct RedirectRefused(String);

impl std::fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedirectRefused {}

/// Where the client's connections go: through the profile's proxy (or
/// none), names resolved by the guard (the proxy's own exempt).
fn route(
    mut builder: wreq::ClientBuilder,
    profile: &Profile,
    guard: &Arc<Guard>,
) -> Result<wreq::ClientBuilder> {
    let proxy_host = (profile.proxy.as_ref())
        .and_then(|p| Url::parse(p.expose()).ok())
        .and_then(|u| u.host_str().map(str::to_string));
    builder = builder.dns_resolver(super::guard::GuardedResolver::new(
        guard.clone(),
        proxy_host,
    ));
    match &profile.proxy {
        Some(proxy) => {
            let p = wreq::Proxy::all(proxy.expose()).map_err(|_| {
                Error::config(format!("profile `{}`: invalid proxy {proxy}", profile.name))
            })?;
            builder = builder.proxy(p);
        }
        None => builder = builder.no_proxy(),
    }
    Ok(builder)
}

/// Where wreq's error carries one of ours (from [`super::guard::GuardedResolver`]).
fn our_error(e: &wreq::Error) -> Option<&Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<Error>() {
            return Some(r);
        }
        cause = c.source();
    }
    None
}

/// Where wreq's error carries our policy's refusal, its text.
fn refused_redirect(e: &wreq::Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<RedirectRefused>() {
            return Some(r.0.clone());
        }
        cause = c.source();
    }
    None
}
