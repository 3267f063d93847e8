//! Identity calibration: a slot's HTTP tier learns to send what its own
//! Chromium sends, and reports what still differs.
//!
//! One calibration run, per slot, when its browser first launches and again
//! whenever the Chromium version changes (or on `idpool calibrate`):
//! 1. the slot's Chromium visits the daemon's loopback listener
//!    (`listener`): a navigation, then a page whose script makes a
//!    same-origin form POST, the shape of a shop's AJAX call;
//! 2. the capture becomes the HTTP tier's header sets, HTTP/2 priority and
//!    TLS options ([`crate::wire::fingerprint::Calibration`]);
//! 3. the calibrated HTTP tier makes the same visit, and the two captures
//!    are compared into a [`Report`] with the residual by name.
//!
//! The [`Record`] is kept in `<slot>/calibration.json` and applied at the next
//! start, so the HTTP tier is calibrated before the browser is needed again.

pub mod check;
pub mod listener;
mod page;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::HttpConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::identity::browser::SlotBrowser;
use crate::identity::profile::Profile;
use crate::request::{FetchRequest, RequestKind};
use crate::wire::fingerprint::residual::compare;
use crate::wire::fingerprint::{Calibration, Capture, Report};
use crate::wire::http::HttpClient;

/// One slot's calibration, as saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The Chromium version it was made with (see `BrowserFacts::version`).
    pub chromium: String,
    /// The profile's user agent then: a changed profile recalibrates.
    pub user_agent: String,
    /// Unix seconds.
    pub at: u64,
    /// What the browser sent.
    pub browser: Capture,
    /// What the calibrated HTTP tier sent.
    pub http: Capture,
    /// What the HTTP tier took from the browser.
    pub calibration: Calibration,
    pub report: Report,
    /// What the browser's self-check found (`check`); `None` in records made
    /// before it existed.
    #[serde(default)]
    pub browser_check: Option<check::BrowserCheck>,
}

impl Record {
    pub fn path(slot_dir: &Path) -> PathBuf {
        slot_dir.join("calibration.json")
    }

    /// The saved record, if there is a readable one.
    pub fn load(slot_dir: &Path) -> Option<Record> {
        let path = Self::path(slot_dir);
        let text = std::fs::read_to_string(&path).ok()?;
        match serde_json::from_str(&text) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "unreadable calibration record ignored; the slot recalibrates at its next browser launch");
                None
            }
        }
    }

    pub fn save(&self, slot_dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("calibration record: {e}")))?;
        crate::fsutil::write_atomically(&Self::path(slot_dir), &json)
    }
}

/// The daemon's calibration listener (started on first use) and its
/// throwaway certificate, whose SPKI pin every slot's Chromium gets at launch.
pub struct Calibrator {
    cert: listener::Cert,
    host: &'static str,
    port: u16,
    /// Until the first run starts the listener.
    socket: parking_lot::Mutex<Option<listener::Socket>>,
    /// Also serialises runs: one calibration at a time across slots.
    listener: tokio::sync::Mutex<Option<listener::Listener>>,
    closed: std::sync::atomic::AtomicBool,
    /// Shutdown cuts a running run's page work (the launch it may start
    /// is never cut: a half-started Chromium would outlive the pool).
    cut: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Calibrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calibrator")
            .field("spki", &self.cert.spki)
            .finish()
    }
}

const WAIT_FOR: &str = "#done";
/// How long a run queues behind other slots' runs.
const QUEUE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

impl Calibrator {
    /// The certificate and the bound (not yet served) socket.
    pub fn new() -> Result<Calibrator> {
        let socket = listener::Socket::bind()?;
        Ok(Calibrator {
            cert: listener::Cert::generate()?,
            host: socket.host,
            port: socket.port,
            socket: parking_lot::Mutex::new(Some(socket)),
            listener: tokio::sync::Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
            cut: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// The listener's address (127.0.0.2, else 127.0.0.1), which a slot's
    /// Chromium reaches directly even behind a proxy.
    pub fn host(&self) -> &'static str {
        self.host
    }

    /// The listener's address (a slot's egress lets it through).
    pub fn addr(&self) -> std::net::SocketAddr {
        let ip = self.host.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST);
        std::net::SocketAddr::new(std::net::IpAddr::V4(ip), self.port)
    }

    /// The SPKI pin of the listener's certificate.
    pub fn spki(&self) -> &str {
        &self.cert.spki
    }

    /// Stop the listener (daemon shutdown).
    pub async fn shutdown(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        // A run in progress holds the listener: cut its page work, which
        // would wait for pages the ending egress no longer brings.
        self.cut.cancel();
        if let Ok(mut guard) = tokio::time::timeout(QUEUE_TIMEOUT, self.listener.lock()).await
            && let Some(l) = guard.take()
        {
            l.stop().await;
        }
    }

    /// One calibration run of `slot`'s browser against an HTTP client built
    /// from its profile (the browser launches if needed). Nothing is applied
    /// here: the pool's slot applies the record.
    pub async fn run(&self, slot: Subject<'_>) -> Result<Record> {
        let closed = || {
            Error::new(
                ErrorKind::Refused,
                "calibration: the daemon is shutting down",
            )
        };
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(closed());
        }
        let mut guard = tokio::time::timeout(QUEUE_TIMEOUT, self.listener.lock())
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Timeout,
                    "calibration: other slots' runs took too long",
                )
            })?;
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(closed());
        }
        if guard.is_none() {
            let socket = self.socket.lock().take().ok_or_else(|| {
                Error::new(ErrorKind::Internal, "calibration listener socket gone")
            })?;
            *guard = Some(listener::Listener::start(socket, &self.cert)?);
        }
        let Some(l) = guard.as_ref() else {
            return Err(Error::new(
                ErrorKind::Internal,
                "calibration listener vanished",
            ));
        };
        // The browser is launched first, whole; what follows is cut by
        // shutdown, and works on that launch only: a browser closed under
        // the run (`reset_slot`, idle, shutdown) is not launched again for it.
        let launch = {
            let _turn = slot.browser.upkeep_turn().await?;
            slot.browser.launches()
        };
        tokio::select! {
            r = self.visits(slot, launch, l) => r,
            () = self.cut.cancelled() => Err(closed()),
        }
    }

    /// A run's work on its launched browser and the HTTP tier: the visits,
    /// the self-check, the comparison.
    async fn visits(
        &self,
        slot: Subject<'_>,
        launch: u64,
        l: &listener::Listener,
    ) -> Result<Record> {
        let base = new_run(l);
        browser_visit(slot.browser, launch, &base)
            .await
            .map_err(|e| {
                e.context(format!(
                    "slot {}: calibration visit of the browser",
                    slot.id
                ))
            })?;
        let browser = take(l, "browser")?;
        let browser_check = self_check(slot, launch, l).await?;
        let ua = |c: &Capture| {
            c.navigation
                .headers
                .iter()
                .find(|(k, _)| k == "user-agent")
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        if ua(&browser) != slot.profile.user_agent {
            return Err(Error::new(
                ErrorKind::Internal,
                format!(
                    "calibration: the browser sent user agent `{}`, not the profile's",
                    ua(&browser)
                ),
            ));
        }
        let chromium = slot.browser.facts().version.unwrap_or_default();
        let calibration = Calibration::from_browser(&browser).ok_or_else(|| {
            Error::new(
                ErrorKind::Internal,
                "the browser's calibration navigation carried no user agent",
            )
        })?;
        let base = new_run(l);
        // A jar of its own: the run's cookies are not the slot's.
        let client = HttpClient::for_calibration(
            &slot.profile.persona(),
            std::sync::Arc::new(crate::identity::jar::Jar::in_memory()),
            slot.http,
            Some(&calibration),
            &self.cert.pem,
        )?;
        http_visit(&client, &base).await.map_err(|e| {
            e.context(format!(
                "slot {}: calibration visit of the HTTP tier",
                slot.id
            ))
        })?;
        let http = take(l, "HTTP tier")?;
        let report = compare(&browser, &http);
        Ok(Record {
            chromium,
            user_agent: slot.profile.user_agent.clone(),
            at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            browser,
            http,
            calibration,
            report,
            browser_check: Some(browser_check),
        })
    }
}

/// The browser opens the listener's self-check page and goes through a
/// whole page operation on it: navigation, `wait_for`, a scroll, a click, a
/// wait and the read. What it found, judged; a check that could not run is
/// its own signal (`check`), and the calibration goes on.
async fn self_check(
    slot: Subject<'_>,
    launch: u64,
    l: &listener::Listener,
) -> Result<check::BrowserCheck> {
    let base = {
        let run = l.seen.lock();
        format!("https://{}:{}/calibrate/{}", l.host, l.port, run.token)
    };
    let expect = check::Expect {
        mobile: slot.profile.mobile(),
        // The device's: the profile's, else one of its proxy country's.
        timezone: slot.browser.device().timezone,
        languages: crate::identity::profile::language_tags(&slot.profile.accept_language),
        platform: slot.profile.hints_platform().to_string(),
    };
    let failed = |detail: String| check::BrowserCheck {
        signals: vec![check::Signal {
            name: "check".into(),
            detail,
        }],
        webgl: None,
        seen: serde_json::Value::Null,
    };
    use crate::request::{Action, Direction};
    let req = crate::identity::browser::BrowserRequest {
        url: format!("{base}/check"),
        wait_for: Some("#ready".into()),
        cookie_domain: None,
        actions: vec![
            Action::Scroll {
                direction: Direction::Down,
                selector: None,
            },
            Action::Click {
                selector: "#finish".into(),
            },
            Action::Wait {
                milliseconds: None,
                selector: Some("#done".into()),
            },
        ],
        capture: Default::default(),
        tape: None,
    };
    let normal = |_: &str, _: &str, _: u16| crate::identity::browser::PageState::Normal;
    // The browser gone since the visit fails the run: its check would be
    // another launch's.
    let mut turn = slot.browser.turn_on_launch(launch).await?;
    let page = match turn.navigate(&req, None, &normal).await {
        Ok(p) => p,
        Err(e) if e.kind() == ErrorKind::Unavailable => return Err(e),
        Err(e) => {
            return Ok(failed(format!(
                "the self-check page failed: {}",
                e.message()
            )));
        }
    };
    drop(turn);
    let Some(seen) = check::result_of(&page.html) else {
        return Ok(failed(format!(
            "the self-check page left no result (ready: {})",
            page.wait_for_met
        )));
    };
    let worker_ua = l.seen.lock().seen.get("check/worker.js").and_then(|o| {
        o.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
            .map(|(_, v)| v.clone())
    });
    let result = tokio::task::spawn_blocking({
        let expect = expect.clone();
        move || check::judge(seen, worker_ua.as_deref(), &expect)
    })
    .await;
    Ok(result.unwrap_or_else(|e| failed(format!("judging the self-check failed: {e}"))))
}

/// What a run calibrates: one slot's browser, and the profile and HTTP
/// settings its HTTP tier is built from.
#[derive(Clone, Copy)]
pub struct Subject<'a> {
    pub id: usize,
    pub browser: &'a SlotBrowser,
    pub profile: &'a Profile,
    pub http: HttpConfig,
}

/// The browser opens the listener's start page, then the page that makes
/// its XHR, each until the page says it is done, in one turn (nothing else
/// runs in that browser between them). No cookie sync, no probe.
async fn browser_visit(browser: &SlotBrowser, launch: u64, base: &str) -> Result<()> {
    let normal = |_: &str, _: &str, _: u16| crate::identity::browser::PageState::Normal;
    let mut turn = browser.turn_on_launch(launch).await?;
    let h1 = h1_base(base);
    for url in [
        format!("{base}/start"),
        format!("{base}/page"),
        format!("{h1}/page"),
        format!("{base}/hints/ask"),
        format!("{base}/hints/page"),
    ] {
        let req = crate::identity::browser::BrowserRequest {
            url,
            wait_for: Some(WAIT_FOR.to_string()),
            cookie_domain: None,
            actions: Vec::new(),
            capture: Default::default(),
            tape: None,
        };
        let page = turn.navigate(&req, None, &normal).await?;
        if !page.wait_for_met {
            return Err(Error::new(
                ErrorKind::Network,
                format!(
                    "{}: `{WAIT_FOR}` did not appear (status {})",
                    req.url, page.status
                ),
            ));
        }
    }
    Ok(())
}

/// The run's HTTP/1.1 pages: the same listener over plain `http://`
/// (a loopback address is a secure context, so Chromium sends what it sends
/// an `https://` site over HTTP/1.1).
fn h1_base(base: &str) -> String {
    format!("{}/h1", base.replacen("https://", "http://", 1))
}

/// A fresh token; the run's base URL. Only requests under it are recorded.
fn new_run(l: &listener::Listener) -> String {
    let token = hex::encode(rand::random::<[u8; 8]>());
    let base = format!("https://{}:{}/calibrate/{token}", l.host, l.port);
    *l.seen.lock() = listener::Run {
        token,
        seen: Default::default(),
    };
    base
}

fn take(l: &listener::Listener, who: &str) -> Result<Capture> {
    let mut run = l.seen.lock();
    let seen = &mut run.seen;
    let missing = |what: &str| {
        Error::new(
            ErrorKind::Network,
            format!("calibration: the {who}'s {what} never reached the listener"),
        )
    };
    let mut navigation = seen.remove("page").ok_or_else(|| missing("navigation"))?;
    let mut xhr = seen.remove("xhr").ok_or_else(|| missing("XHR"))?;
    let mut sample = |what: &str| match (
        seen.remove(&format!("{what}/page")),
        seen.remove(&format!("{what}/xhr")),
    ) {
        (Some(navigation), Some(xhr)) => Some(Box::new(Capture {
            navigation,
            xhr,
            h1: None,
            asked: None,
        })),
        _ => {
            tracing::warn!(
                who,
                what,
                "calibration: a sample never reached the listener"
            );
            None
        }
    };
    let mut h1 = sample("h1");
    let mut asked = sample("hints");
    // Each side ran under its own token: the captures name it `{run}`, so
    // paths and referers compare equal.
    let token = run.token.clone();
    let mut all = vec![&mut navigation, &mut xhr];
    for c in [h1.as_deref_mut(), asked.as_deref_mut()]
        .into_iter()
        .flatten()
    {
        all.push(&mut c.navigation);
        all.push(&mut c.xhr);
    }
    for o in all {
        for (_, v) in &mut o.headers {
            if v.contains(&token) {
                *v = v.replace(&token, "{run}");
            }
        }
    }
    Ok(Capture {
        navigation,
        xhr,
        h1,
        asked,
    })
}

/// What the listener's page makes the browser do, done by the HTTP tier.
async fn http_visit(client: &HttpClient, base: &str) -> Result<()> {
    let url = |p: &str| {
        let full = match p.strip_prefix("h1/") {
            Some(rest) => format!("{}/{rest}", h1_base(base)),
            None => format!("{base}/{p}"),
        };
        url::Url::parse(&full)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("calibration URL ({e})")))
    };
    for p in ["start", "page"] {
        let r = client.fetch(&FetchRequest::get(url(p)?)).await?;
        check(p, r.status)?;
    }
    http_xhr(client, &url, "").await?;
    // The same two over HTTP/1.1.
    let r = client.fetch(&FetchRequest::get(url("h1/page")?)).await?;
    check("h1/page", r.status)?;
    http_xhr(client, &url, "h1/").await?;
    // And on an origin that asked for every hint: the HTTP tier learns it
    // from `hints/ask`'s `Accept-CH`, as the browser did.
    for p in ["hints/ask", "hints/page"] {
        let r = client.fetch(&FetchRequest::get(url(p)?)).await?;
        check(p, r.status)?;
    }
    http_xhr(client, &url, "hints/").await
}

/// The listener page's XHR, by the HTTP tier, under `prefix`.
async fn http_xhr(
    client: &HttpClient,
    url: &impl Fn(&str) -> Result<url::Url>,
    prefix: &str,
) -> Result<()> {
    let mut xhr = FetchRequest::get(url(&format!("{prefix}xhr"))?);
    xhr.method = http::Method::POST;
    xhr.kind = RequestKind::Xhr;
    xhr.referer = Some(url(&format!("{prefix}page"))?);
    xhr.headers = vec![
        ("x-requested-with".into(), "XMLHttpRequest".into()),
        ("accept".into(), "application/json".into()),
        (
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        ),
    ];
    xhr.body = Some(bytes::Bytes::from_static(b"item=calibration&page=1"));
    let r = client.fetch(&xhr).await?;
    check(&format!("{prefix}xhr"), r.status)
}

fn check(what: &str, status: u16) -> Result<()> {
    if status == 200 {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Network,
            format!("calibration: /calibrate/{what} answered {status}"),
        ))
    }
}
