//! A slot's cookie jar: `cookie_store` behind a lock, shared with the slot's wreq
//! client through wreq's `CookieStore` trait, and persisted as JSON.
//!
//! The jar module alone writes cookie files. A save writes a temp file (mode 0600),
//! fsyncs it, renames it over the jar and fsyncs the folder, so a crash at any
//! instant leaves either the old jar or the new one, never half of one.

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use cookie_store::{Cookie as StoredCookie, CookieStore as Store};
use http::{HeaderValue, Uri, Version};
use parking_lot::{Mutex, RwLock};
use url::Url;

use crate::error::{Error, ErrorKind, Result};

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
        let (store, note) = match File::open(path) {
            Ok(file) => match read_store(BufReader::new(file)) {
                Ok(store) => {
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
            dirty: AtomicBool::new(false),
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

    /// Store one `Set-Cookie` value as if received from `url`.
    pub fn insert_set_cookie(&self, set_cookie: &str, url: &Url) -> bool {
        let ok = self.store.write().parse(set_cookie, url).is_ok();
        if ok {
            self.dirty.store(true, Ordering::Release);
        }
        ok
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

    /// Store cookies that came from elsewhere (the browser); returns how many took.
    pub fn import(&self, cookies: &[PortableCookie]) -> usize {
        let mut store = self.store.write();
        let mut n = 0;
        for c in cookies {
            let host = c.domain.trim_start_matches('.');
            let scheme = if c.secure { "https" } else { "http" };
            let Ok(url) = Url::parse(&format!("{scheme}://{host}{}", c.path)) else {
                continue;
            };
            let mut s = format!("{}={}; Path={}", c.name, c.value, c.path);
            if !c.host_only {
                s.push_str(&format!("; Domain={host}"));
            }
            if let Some(exp) = c.expires {
                s.push_str(&format!("; Max-Age={}", (exp - unix_now() as i64).max(0)));
            }
            if c.secure {
                s.push_str("; Secure");
            }
            if c.http_only {
                s.push_str("; HttpOnly");
            }
            if let Some(ss) = &c.same_site {
                s.push_str(&format!("; SameSite={ss}"));
            }
            if store.parse(&s, &url).is_ok() {
                n += 1;
            }
        }
        if n > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        n
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

fn read_store(reader: impl std::io::Read) -> std::result::Result<Store, String> {
    let cookies: Vec<StoredCookie<'static>> =
        serde_json::from_reader(reader).map_err(|e| e.to_string())?;
    Store::from_cookies(cookies.into_iter().map(Ok::<_, String>), false)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The adapter wreq needs: wreq 6 has no cookie_store integration of its own.
impl wreq::cookie::CookieStore for Jar {
    fn set_cookies(&self, headers: &mut dyn Iterator<Item = &HeaderValue>, uri: &Uri) {
        let Ok(url) = Url::parse(&uri.to_string()) else {
            return;
        };
        let cookies: Vec<cookie::Cookie<'static>> = headers
            .filter_map(|h| h.to_str().ok())
            .filter_map(|s| cookie::Cookie::parse(s.to_string()).ok())
            .collect();
        if cookies.is_empty() {
            return;
        }
        self.store
            .write()
            .store_response_cookies(cookies.into_iter(), &url);
        self.dirty.store(true, Ordering::Release);
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
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn save_load_round_trip_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slots/0/cookies.json");
        let (jar, note) = Jar::open(&path).unwrap();
        assert_eq!(note, OpenNote::Fresh);
        let url = Url::parse("https://shop.test/").unwrap();
        assert!(jar.insert_set_cookie("sid=abc; Max-Age=3600; Path=/", &url));
        assert!(jar.insert_set_cookie("sess=1", &url));
        assert!(jar.save_if_dirty().unwrap());
        assert!(!jar.save_if_dirty().unwrap());
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (jar2, note) = Jar::open(&path).unwrap();
        assert_eq!(note, OpenNote::Loaded(2));
        let mut got = jar2.cookies_for(&url);
        got.sort();
        assert_eq!(
            got,
            vec![("sess".into(), "1".into()), ("sid".into(), "abc".into())]
        );
    }

    #[test]
    fn export_and_import_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = Jar::open(&dir.path().join("a.json")).unwrap();
        let url = Url::parse("https://www.shop.test/").unwrap();
        a.insert_set_cookie("host=1; Max-Age=600; Path=/; Secure; HttpOnly", &url);
        a.insert_set_cookie("dom=2; Domain=shop.test; Path=/x", &url);
        let other = Url::parse("https://other.test/").unwrap();
        a.insert_set_cookie("no=3", &other);
        let mut out = a.export_for_domain("shop.test");
        out.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(
            (out[0].name.as_str(), out[0].host_only, out[0].expires),
            ("dom", false, None)
        );
        assert!(out[1].host_only && out[1].secure && out[1].http_only && out[1].expires.is_some());
        let (b, _) = Jar::open(&dir.path().join("b.json")).unwrap();
        assert_eq!(b.import(&out), 2);
        let mut back = b.export_for_domain("shop.test");
        back.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], out[0]);
        assert_eq!(back[1].name, "host");
    }

    #[test]
    fn related_domains() {
        assert!(domains_related("shop.test", "shop.test"));
        assert!(domains_related("www.shop.test", "shop.test"));
        assert!(domains_related("shop.test", "www.shop.test"));
        assert!(!domains_related("evilshop.test", "shop.test"));
        assert!(!domains_related("shop.test", "myshop.test"));
    }

    #[test]
    fn corrupt_jar_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cookies.json");
        fs::write(&path, b"{ not json").unwrap();
        let (jar, note) = Jar::open(&path).unwrap();
        assert_eq!(jar.count(), 0);
        let OpenNote::MovedAside(aside) = note else {
            panic!("{note:?}")
        };
        assert!(
            aside
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("cookies.json.corrupt-")
        );
        assert_eq!(fs::read(&aside).unwrap(), b"{ not json");
        assert!(!path.exists());
    }
}
