//! A slot's cookie jar: `cookie_store` behind a lock, shared with the slot's wreq
//! client through wreq's `CookieStore` trait, and persisted as JSON.
//!
//! Every road in is judged by the same rules first (`rules`): a response's
//! `Set-Cookie` (`set_cookies`, `set_cookie`), the browser's cookies and
//! session files (`import`), and a jar file read back (`open`). A cookie
//! for a public suffix, a `Secure` one from plain http, or a prefixed name
//! without what its prefix demands never reaches the store.
//!
//! The jar module alone writes cookie files. A save writes a temp file (mode 0600),
//! fsyncs it, renames it over the jar and fsyncs the folder, so a crash at any
//! instant leaves either the old jar or the new one, never half of one.

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cookie_store::{Cookie as StoredCookie, CookieStore as Store};
use http::{HeaderValue, Uri, Version};
use parking_lot::{Mutex, RwLock};
use url::Url;

use crate::error::{Error, ErrorKind, Result};

mod cookie;
mod roads;
mod rules;

use cookie::unix_now;
pub use cookie::{PortableCookie, domains_related};
use roads::{import_one, read_store, store_set_cookie};

pub use rules::{Reason, Refusal, is_public_suffix, is_secure_origin};

/// One slot's cookies.
pub struct Jar {
    store: RwLock<Store>,
    path: PathBuf,
    /// Set when cookies changed since the last save.
    dirty: AtomicBool,
    /// Serialises savers so two saves never interleave their renames.
    save_lock: Mutex<()>,
    /// Unix seconds of the last successful save (0: never).
    last_saved: AtomicU64,
    /// Why the last save failed, until one succeeds (a full disk, say).
    save_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for Jar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jar")
            .field("path", &self.path)
            .field("count", &self.count())
            .finish()
    }
}

/// What an import did: how many cookies the jar took, and each one it
/// refused, with its position in the list it was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub taken: usize,
    pub refused: Vec<Refusal>,
}

impl ImportReport {
    /// Whether the entry at `index` was refused.
    pub fn refused_entry(&self, index: usize) -> bool {
        self.refused.iter().any(|r| r.entry == Some(index))
    }
}

/// What happened when a jar was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenNote {
    Loaded(usize),
    Fresh,
    /// The file could not be read as a jar and was moved to this path.
    MovedAside(PathBuf),
}

impl Jar {
    /// A jar kept in memory only (the calibration client's); never saved.
    pub fn in_memory() -> Jar {
        Jar {
            store: RwLock::new(Store::new()),
            path: PathBuf::new(),
            dirty: AtomicBool::new(false),
            save_lock: Mutex::new(()),
            last_saved: AtomicU64::new(0),
            save_error: Mutex::new(None),
        }
    }

    /// Open the jar at `path`. A missing file gives an empty jar (`Fresh`: the
    /// pool may seed it); a corrupt file is moved aside as `<name>.corrupt-<unix>`.
    pub fn open(path: &Path) -> Result<(Jar, OpenNote)> {
        let mut dirty = false;
        let (store, note) = match File::open(path) {
            Ok(file) => match read_store(BufReader::new(file)) {
                Ok((store, dropped)) => {
                    // Planted before the rules held (or written by hand):
                    // dropped now, and the next save leaves them out.
                    for r in &dropped {
                        tracing::warn!(jar = %path.display(), cookie = %r.name, domain = %r.domain, reason = %r.reason, "cookie dropped from the jar on load");
                    }
                    if !dropped.is_empty() {
                        dirty = true;
                    }
                    let n = store.iter_unexpired().count();
                    (store, OpenNote::Loaded(n))
                }
                Err(why) => {
                    let aside = path.with_file_name(format!(
                        "{}.corrupt-{}",
                        path.file_name()
                            .and_then(|n| n.to_str())
                            .unwrap_or("cookies.json"),
                        unix_now()
                    ));
                    fs::rename(path, &aside).map_err(|e| {
                        Error::io(
                            format!("cannot move corrupt jar {} aside", path.display()),
                            e,
                        )
                    })?;
                    tracing::warn!(jar = %path.display(), moved_to = %aside.display(), %why, "corrupt cookie jar moved aside; the slot starts with an empty jar");
                    (Store::new(), OpenNote::MovedAside(aside))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Store::new(), OpenNote::Fresh),
            Err(e) => {
                return Err(Error::io(
                    format!("cannot read cookie jar {}", path.display()),
                    e,
                ));
            }
        };
        let jar = Jar {
            store: RwLock::new(store),
            path: path.to_path_buf(),
            dirty: AtomicBool::new(dirty),
            save_lock: Mutex::new(()),
            last_saved: AtomicU64::new(0),
            save_error: Mutex::new(None),
        };
        Ok((jar, note))
    }

    /// Where the jar lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unexpired cookies held.
    pub fn count(&self) -> usize {
        self.store.read().iter_unexpired().count()
    }

    /// Whether cookies changed since the last save.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Unix time of the last save this process made, if any.
    /// Why the last save failed; `None` once one succeeds.
    pub fn save_error(&self) -> Option<String> {
        self.save_error.lock().clone()
    }

    pub fn last_saved(&self) -> Option<u64> {
        match self.last_saved.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }

    /// `(name, value)` pairs that would be sent to `url`.
    pub fn cookies_for(&self, url: &Url) -> Vec<(String, String)> {
        self.store
            .read()
            .get_request_values(url)
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Store one `Set-Cookie` value as if received from `url`, or say why not.
    pub fn set_cookie(&self, set_cookie: &str, url: &Url) -> std::result::Result<(), Refusal> {
        let result = store_set_cookie(&mut self.store.write(), set_cookie, url);
        if result.is_ok() {
            self.dirty.store(true, Ordering::Release);
        }
        result
    }

    /// Store one `Set-Cookie` value as if received from `url`; whether it took.
    pub fn insert_set_cookie(&self, set_cookie: &str, url: &Url) -> bool {
        self.set_cookie(set_cookie, url).is_ok()
    }

    /// Every unexpired cookie that belongs to `domain` or one of its subdomains, or
    /// that a request to `domain` would carry: what goes into the browser.
    pub fn export_for_domain(&self, domain: &str) -> Vec<PortableCookie> {
        let domain = domain.trim_start_matches('.').to_ascii_lowercase();
        self.export_where(|d| domains_related(d, &domain))
    }

    /// Every unexpired cookie (a session export).
    pub fn export_all(&self) -> Vec<PortableCookie> {
        self.export_where(|_| true)
    }

    fn export_where(&self, keep: impl Fn(&str) -> bool) -> Vec<PortableCookie> {
        let store = self.store.read();
        store
            .iter_unexpired()
            .filter_map(|c| {
                let (d, host_only) = match &c.domain {
                    cookie_store::CookieDomain::HostOnly(d) => (d.clone(), true),
                    cookie_store::CookieDomain::Suffix(d) => (d.clone(), false),
                    _ => return None,
                };
                keep(&d).then(|| PortableCookie {
                    name: c.name().to_string(),
                    value: c.value().to_string(),
                    domain: d,
                    host_only,
                    path: String::from(&c.path),
                    secure: c.secure().unwrap_or(false),
                    http_only: c.http_only().unwrap_or(false),
                    expires: match &c.expires {
                        cookie_store::CookieExpiration::AtUtc(t) => Some(t.unix_timestamp()),
                        cookie_store::CookieExpiration::SessionEnd => None,
                    },
                    same_site: c.same_site().map(|s| s.to_string()),
                })
            })
            .collect()
    }

    /// Store cookies that came from elsewhere (the browser, a session file),
    /// each judged by the jar's rules first; what took and what was refused
    /// (each named, with its reason, and logged without its value).
    pub fn import(&self, cookies: &[PortableCookie]) -> ImportReport {
        let mut report = ImportReport::default();
        {
            let mut store = self.store.write();
            for (i, c) in cookies.iter().enumerate() {
                match import_one(&mut store, c) {
                    Ok(()) => report.taken += 1,
                    Err(reason) => report.refused.push(Refusal {
                        entry: Some(i),
                        name: c.name.clone(),
                        domain: c.domain.clone(),
                        reason,
                    }),
                }
            }
        }
        for r in &report.refused {
            tracing::warn!(jar = %self.path.display(), cookie = %r.name, domain = %r.domain, reason = %r.reason, "cookie refused on import");
        }
        if report.taken > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        report
    }

    /// Forget every cookie (a retired identity) and move the file aside to
    /// `aside`, kept for the operator; the jar starts empty.
    pub fn retire(&self, aside: &Path) -> Result<()> {
        let _guard = self.save_lock.lock();
        *self.store.write() = Store::new();
        self.dirty.store(false, Ordering::Release);
        match std::fs::rename(&self.path, aside) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(
                format!("cannot move {} aside", self.path.display()),
                e,
            )),
        }
    }

    /// Save when something changed. Returns whether a write happened.
    pub fn save_if_dirty(&self) -> Result<bool> {
        if !self.is_dirty() {
            return Ok(false);
        }
        self.save().map(|()| true)
    }

    /// Write the jar: temp file (0600) + fsync + rename + fsync of the folder.
    pub fn save(&self) -> Result<()> {
        let _guard = self.save_lock.lock();
        // Clear first: a cookie arriving while we write marks the jar dirty again.
        self.dirty.store(false, Ordering::Release);
        let json = {
            let store = self.store.read();
            let cookies: Vec<&StoredCookie<'static>> = store.iter_unexpired().collect();
            serde_json::to_vec_pretty(&cookies)
        }
        .map_err(|e| {
            Error::new(ErrorKind::Internal, "cannot serialise cookie jar").with_source(e)
        })?;
        let result = crate::fsutil::write_atomically(&self.path, &json);
        match &result {
            Ok(()) => {
                self.last_saved.store(unix_now(), Ordering::Release);
                *self.save_error.lock() = None;
            }
            Err(e) => {
                // Kept dirty: the next save tries again; the file on disk is
                // the previous jar, whole.
                self.dirty.store(true, Ordering::Release);
                *self.save_error.lock() = Some(e.with_cause());
            }
        }
        result
    }
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

#[cfg(test)]
mod tests;
