//! Identity calibration: a slot's HTTP tier learns to send what its own
//! Chromium sends, and reports what still differs.
//!
//! One calibration run, per slot, when its browser first launches and again
//! whenever the Chromium version changes (or on `idpool calibrate`):
//! 1. the slot's Chromium visits the daemon's loopback listener
//!    (`listener`): a navigation, then a page whose script makes a
//!    same-origin form POST, the shape of a shop's AJAX call;
//! 2. the capture becomes the HTTP tier's header sets, HTTP/2 priority and
//!    TLS options ([`crate::fingerprint::Calibration`]);
//! 3. the calibrated HTTP tier makes the same visit, and the two captures
//!    are compared into a [`Report`] with the residual by name.
//!
//! The [`Record`] is kept in `<slot>/calibration.json` and applied at the next
//! start, so the HTTP tier is calibrated before the browser is needed again.

pub mod listener;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::fingerprint::calibration::compare;
use crate::fingerprint::{Calibration, Capture, Report};
use crate::http::{FetchRequest, HttpClient, RequestKind};
use crate::pool::Slot;

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
        crate::pool::write_atomically(&Self::path(slot_dir), &json)
    }
}

/// The daemon's calibration listener (started on first use) and its
/// throwaway certificate, whose SPKI pin every slot's Chromium gets at launch.
pub struct Calibrator {
    cert: listener::Cert,
    /// Also serialises runs: one calibration at a time across slots.
    listener: tokio::sync::Mutex<Option<listener::Listener>>,
}

impl std::fmt::Debug for Calibrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calibrator")
            .field("spki", &self.cert.spki)
            .finish()
    }
}

const WAIT_FOR: &str = "#done";

impl Calibrator {
    pub fn new() -> Result<Calibrator> {
        Ok(Calibrator {
            cert: listener::Cert::generate()?,
            listener: tokio::sync::Mutex::new(None),
        })
    }

    /// The SPKI pin of the listener's certificate.
    pub fn spki(&self) -> &str {
        &self.cert.spki
    }

    /// Stop the listener (daemon shutdown).
    pub async fn shutdown(&self) {
        if let Some(l) = self.listener.lock().await.take() {
            l.stop().await;
        }
    }

    /// One calibration run on `slot` (its browser launches if needed). The
    /// slot is not changed here: [`Slot::calibrate_now`] applies the record.
    pub async fn run(&self, slot: &Slot) -> Result<Record> {
        let mut guard = self.listener.lock().await;
        if guard.is_none() {
            *guard = Some(listener::Listener::start(&self.cert).await?);
        }
        let Some(l) = guard.as_ref() else {
            return Err(Error::new(
                ErrorKind::Internal,
                "calibration listener vanished",
            ));
        };
        let base = format!("https://{}:{}/calibrate", l.host, l.port);
        l.seen.lock().clear();
        slot.browser()
            .visit(&[format!("{base}/start"), format!("{base}/page")], WAIT_FOR)
            .await
            .map_err(|e| {
                e.context(format!(
                    "slot {}: calibration visit of the browser",
                    slot.id
                ))
            })?;
        let browser = take(l, "browser")?;
        let chromium = slot.browser_facts().version.unwrap_or_default();
        let calibration = Calibration::from_browser(&browser).ok_or_else(|| {
            Error::new(
                ErrorKind::Internal,
                "the browser's calibration navigation carried no user agent",
            )
        })?;
        l.seen.lock().clear();
        let client = HttpClient::for_calibration(
            &slot.profile,
            slot.http_config(),
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
        })
    }
}

fn take(l: &listener::Listener, who: &str) -> Result<Capture> {
    let mut seen = l.seen.lock();
    let missing = |what: &str| {
        Error::new(
            ErrorKind::Network,
            format!("calibration: the {who}'s {what} never reached the listener"),
        )
    };
    let navigation = seen.remove("page").ok_or_else(|| missing("navigation"))?;
    let xhr = seen.remove("xhr").ok_or_else(|| missing("XHR"))?;
    Ok(Capture { navigation, xhr })
}

/// What the listener's page makes the browser do, done by the HTTP tier.
async fn http_visit(client: &HttpClient, base: &str) -> Result<()> {
    let url = |p: &str| {
        url::Url::parse(&format!("{base}/{p}"))
            .map_err(|e| Error::new(ErrorKind::Internal, format!("calibration URL ({e})")))
    };
    for p in ["start", "page"] {
        let r = client.fetch(FetchRequest::get(url(p)?)).await?;
        check(p, r.status)?;
    }
    let mut xhr = FetchRequest::get(url("xhr")?);
    xhr.method = http::Method::POST;
    xhr.kind = RequestKind::Xhr;
    xhr.referer = Some(url("page")?);
    xhr.headers = vec![
        ("x-requested-with".into(), "XMLHttpRequest".into()),
        ("accept".into(), "application/json".into()),
        (
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        ),
    ];
    xhr.body = Some(bytes::Bytes::from_static(b"item=calibration&page=1"));
    let r = client.fetch(xhr).await?;
    check("xhr", r.status)
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
