//! Building and using one slot's impersonating client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header::{ACCEPT_LANGUAGE, HeaderMap, HeaderName, HeaderValue, SET_COOKIE, USER_AGENT};
use url::Url;

use super::Guard;
use super::cert::RootStore;
use super::headers::{AskedSets, HeaderSet, own_headers, xhr_headers};
use super::hints::Memory;
pub use super::request::{FetchResponse, utf8_text};
use crate::config::HttpConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::request::{FetchRequest, RequestKind};
use wreq::cookie::CookieStore;

use super::Persona;

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
    /// Both on an origin that asked for client hints, when calibrated
    /// with such a sample.
    asked: Option<Arc<AskedSets>>,
    /// Which origins asked for which hints (the slot's, shared by every
    /// client it builds).
    hints: Arc<Memory>,
}

impl HttpClient {
    /// Build the client for `profile`, storing cookies in `jar`.
    pub fn new(
        profile: &Persona,
        jar: Arc<dyn CookieStore>,
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
        profile: &Persona,
        jar: Arc<dyn CookieStore>,
        cfg: HttpConfig,
        roots: &RootStore,
        guard: Arc<Guard>,
        cal: Option<&crate::wire::fingerprint::Calibration>,
    ) -> Result<Self> {
        let mut emulation = wreq::IntoEmulation::into_emulation(
            wreq_util::Emulation::builder()
                .profile(profile.emulation)
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
        let (mut xhr, mut nav, mut asked) = (None, None, None);
        if let Some(cal) = cal {
            let sets = super::headers::Sets::apply(&mut emulation, cal)?;
            (nav, xhr, asked) = (Some(sets.nav), sets.xhr, sets.asked);
            if let Some(hello) = &cal.hello {
                super::tls_match::apply(&mut emulation, hello);
            }
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
            asked,
            hints: Arc::new(Memory::in_memory()),
        })
    }

    /// The same client, remembering client hints in `hints` (the slot's).
    pub fn with_hints(mut self, hints: Arc<Memory>) -> Self {
        self.hints = hints;
        self
    }

    /// How many redirects a request may follow.
    pub fn max_redirects(&self) -> usize {
        self.cfg.max_redirects
    }

    /// Which origins asked this client for which client hints.
    pub fn hints(&self) -> &Arc<Memory> {
        &self.hints
    }

    /// The same client without the SSRF guard, trusting `extra_pem` too,
    /// its cookies in `jar`: for the daemon's own loopback calibration
    /// listener only.
    pub(crate) fn for_calibration(
        profile: &Persona,
        jar: Arc<dyn CookieStore>,
        cfg: HttpConfig,
        cal: Option<&crate::wire::fingerprint::Calibration>,
        extra_pem: &str,
    ) -> Result<Self> {
        let roots = RootStore::only(extra_pem)?;
        let guard = Arc::new(Guard::new(
            vec!["127.0.0.1".into(), "127.0.0.2".into()],
            true,
        ));
        let mut profile = profile.clone();
        profile.proxy = None; // the listener is on loopback
        Self::calibrated(&profile, jar, cfg, &roots, guard, cal)
    }

    /// Send `req` and read the whole body (so the connection can be reused).
    /// A navigation's `Accept-CH` is remembered for its origin; when its
    /// `Critical-CH` names a hint the origin now asks for and this request
    /// lacked, it is sent again once, as Chromium does.
    pub async fn fetch(&self, req: &FetchRequest) -> Result<FetchResponse> {
        self.guard.check(&req.url).await?;
        let (resp, sent) = self.send(req).await?;
        if req.kind != RequestKind::Navigation || !self.hints.learn(&resp.final_url, &resp.headers)
        {
            return Ok(resp);
        }
        let sendable: Vec<String> = match (&self.asked, self.hints.asked(&resp.final_url)) {
            (Some(a), Some(asked)) => asked
                .into_iter()
                .filter(|h| a.hints.iter().any(|n| n.as_str() == h))
                .collect(),
            _ => return Ok(resp),
        };
        if resp.final_url != req.url || !super::hints::retry_for(&resp.headers, &sendable, &sent) {
            return Ok(resp);
        }
        tracing::debug!(url = %req.url, "Critical-CH: the navigation goes again with the hints asked for");
        Ok(self.send(req).await?.0)
    }

    /// One request as the browser would send it to its origin now; the
    /// client hints it carried.
    async fn send(&self, req: &FetchRequest) -> Result<(FetchResponse, Vec<String>)> {
        let started = Instant::now();
        let mut builder = self.client.request(req.method.clone(), req.url.as_str());
        // `priority` is HTTP/2's (and 3's): Chromium sends none over
        // HTTP/1.1, which plain `http://` always is.
        let plain = req.url.scheme() == "http";
        let asked = self
            .asked
            .as_ref()
            .and_then(|a| Some((a, self.hints.asked(&req.url)?)));
        let set = match (req.kind, &asked) {
            (RequestKind::Xhr, Some((a, _))) => a.xhr.as_ref().or(self.xhr.as_deref()),
            (RequestKind::Xhr, None) => self.xhr.as_deref(),
            (_, Some((a, _))) => Some(&a.nav),
            _ if plain => self.nav.as_deref(),
            _ => None,
        };
        let mut sent = Vec::new();
        if let Some(set) = set {
            let mut headers = match req.kind {
                RequestKind::Xhr => xhr_headers(set, req)?,
                _ => own_headers(set.defaults.clone(), req)?,
            };
            if plain {
                headers.remove(HeaderName::from_static("priority"));
            }
            if let Some((a, names)) = &asked {
                sent = a.keep_asked(&mut headers, names);
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
        if !req.follow {
            builder = builder.redirect(wreq::redirect::Policy::none());
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
        let resp = FetchResponse {
            status,
            final_url,
            headers,
            body,
            cookies_set,
            elapsed: started.elapsed(),
            http_version,
        };
        Ok((resp, sent))
    }
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
    profile: &Persona,
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
