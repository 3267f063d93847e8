//! Client hints a site asked for, remembered per origin as Chromium does.
//!
//! A navigation's response may carry `Accept-CH`: the hints (high-entropy
//! user agent data, `Sec-CH-Prefers-Color-Scheme`, ...) the origin wants on
//! every later request to it. Chromium keeps the newest list per origin (an
//! empty one forgets it) and only for secure origins (`https:` or
//! loopback); so does [`Memory`], in the slot's `client_hints.json`, so a
//! restart keeps what was asked. `Critical-CH` names hints the origin needs
//! on the very request: when one was asked but not sent, Chromium sends the
//! navigation again once, and so does the HTTP tier ([`retry_for`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::HeaderMap;
use parking_lot::Mutex;
use url::Url;

/// More origins than a person's browser would ever be asked by in a slot's
/// life; the oldest goes first past it.
const MAX_ORIGINS: usize = 2048;
/// Hints per origin (Chromium knows about 30).
const MAX_HINTS: usize = 48;
/// A token longer than any hint's name is not one.
const MAX_TOKEN: usize = 64;

/// Per origin, the hints it asked for (lower case), and in what order
/// origins were last told (for the bound).
#[derive(Debug, Default)]
struct State {
    asked: HashMap<String, Vec<String>>,
    order: Vec<String>,
}

/// One slot's remembered `Accept-CH` lists. Shared by every client the slot
/// builds (a recalibration keeps it).
#[derive(Debug, Default)]
pub struct Memory {
    state: Mutex<State>,
    /// `None`: kept in memory only (calibration, tests).
    path: Option<PathBuf>,
    /// One save at a time, each writing the newest state.
    saving: Arc<Mutex<()>>,
}

impl Memory {
    pub fn in_memory() -> Memory {
        Memory::default()
    }

    /// The memory kept in `path`. A missing file is an empty memory; an
    /// unreadable one is set aside as `<path>.bad` (named in the log) and
    /// the slot starts with none: a site asks again on its next page.
    pub fn open(path: &Path) -> Memory {
        let mut state = State::default();
        match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<HashMap<String, Vec<String>>>(&bytes) {
                Ok(map) => {
                    for (origin, hints) in map.into_iter().take(MAX_ORIGINS) {
                        let hints = clean(hints.iter().map(String::as_str));
                        state.order.push(origin.clone());
                        state.asked.insert(origin, hints);
                    }
                }
                Err(e) => {
                    let aside = path.with_extension("json.bad");
                    let _ = std::fs::rename(path, &aside);
                    tracing::warn!(file = %path.display(), aside = %aside.display(), error = %e, "unreadable client hints memory set aside; sites ask again");
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "client hints memory not readable; starting without it");
            }
        }
        Memory {
            state: Mutex::new(state),
            path: Some(path.to_path_buf()),
            saving: Arc::default(),
        }
    }

    /// Forget every origin (a retired identity; its file has been moved
    /// aside).
    pub fn clear(&self) {
        *self.state.lock() = State::default();
    }

    /// What `url`'s origin asked for; `None` when it asked for nothing.
    pub fn asked(&self, url: &Url) -> Option<Vec<String>> {
        let origin = secure_origin(url)?;
        let state = self.state.lock();
        state.asked.get(&origin).filter(|h| !h.is_empty()).cloned()
    }

    /// Take in a navigation response's `Accept-CH` (from `final_url`):
    /// whether what the origin asked for changed.
    pub fn learn(self: &Arc<Self>, final_url: &Url, headers: &HeaderMap) -> bool {
        // Most responses carry none: nothing is allocated for them.
        let mut values = headers.get_all("accept-ch").iter().peekable();
        if values.peek().is_none() {
            return false;
        }
        let Some(origin) = secure_origin(final_url) else {
            return false;
        };
        let tokens: Vec<&str> = values
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        let hints = clean(tokens.into_iter());
        let changed = {
            let mut state = self.state.lock();
            let changed = state.asked.get(&origin) != Some(&hints);
            state.order.retain(|o| o != &origin);
            if hints.is_empty() {
                state.asked.remove(&origin);
            } else {
                state.order.push(origin.clone());
                state.asked.insert(origin, hints);
            }
            while state.order.len() > MAX_ORIGINS {
                let oldest = state.order.remove(0);
                state.asked.remove(&oldest);
            }
            changed
        };
        if changed {
            self.save_soon();
        }
        changed
    }

    /// Write the newest state off the runtime threads.
    fn save_soon(self: &Arc<Self>) {
        if self.path.is_none() {
            return;
        }
        let me = self.clone();
        let save = move || {
            let _one = me.saving.lock();
            let Some(path) = &me.path else { return };
            let json = {
                let state = me.state.lock();
                serde_json::to_vec_pretty(&state.asked)
            };
            let result = json
                .map_err(|e| {
                    crate::error::Error::new(crate::error::ErrorKind::Internal, e.to_string())
                })
                .and_then(|j| crate::fsutil::write_atomically(path, &j));
            if let Err(e) = result {
                tracing::warn!(file = %path.display(), error = %e, "client hints memory not saved");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(save);
            }
            Err(_) => save(),
        }
    }
}

/// The hints a list of tokens names: lower case, trimmed, header-name
/// characters only, each once, bounded.
fn clean<'a>(tokens: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tokens {
        let t = t.trim().to_ascii_lowercase();
        let ok = !t.is_empty()
            && t.len() <= MAX_TOKEN
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if ok && !out.contains(&t) && out.len() < MAX_HINTS {
            out.push(t);
        }
    }
    out
}

/// `url`'s origin when Chromium would keep hints for it: `https:`, or
/// `http:` on a loopback host (a secure context).
fn secure_origin(url: &Url) -> Option<String> {
    let secure = match url.scheme() {
        "https" => true,
        "http" => match url.host()? {
            url::Host::Domain(d) => d == "localhost" || d.ends_with(".localhost"),
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        },
        _ => false,
    };
    secure.then(|| url.origin().ascii_serialization())
}

/// The header names of `critical` (a response's `Critical-CH`) that the
/// origin now asks for and the request did not carry: when any, Chromium
/// sends the navigation again, once, with them.
pub fn retry_for(headers: &HeaderMap, asked: &[String], sent: &[String]) -> bool {
    headers
        .get_all("critical-ch")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .any(|t| asked.contains(&t) && !sent.contains(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn an_origin_keeps_its_newest_list_and_an_empty_one_forgets_it() {
        let m = Arc::new(Memory::in_memory());
        let site = url("https://shop.test/p/1");
        assert_eq!(m.asked(&site), None);
        let asked = headers(&[(
            "accept-ch",
            "Sec-CH-UA-Full-Version-List, sec-ch-ua-platform-version,bogus token",
        )]);
        assert!(m.learn(&site, &asked));
        assert!(!m.learn(&site, &asked), "the same list changes nothing");
        let want = vec![
            "sec-ch-ua-full-version-list".to_string(),
            "sec-ch-ua-platform-version".to_string(),
        ];
        // Per origin: another path of it, not another port or scheme.
        assert_eq!(m.asked(&url("https://shop.test/other")), Some(want));
        assert_eq!(m.asked(&url("https://shop.test:8443/")), None);
        assert_eq!(m.asked(&url("http://shop.test/")), None);
        // A response without the header leaves it; an empty one forgets it.
        assert!(!m.learn(&site, &headers(&[])));
        assert!(m.asked(&site).is_some());
        assert!(m.learn(&site, &headers(&[("accept-ch", "")])));
        assert_eq!(m.asked(&site), None);
    }

    #[test]
    fn only_secure_origins_are_remembered() {
        let m = Arc::new(Memory::in_memory());
        let ask = headers(&[("accept-ch", "sec-ch-ua-arch")]);
        for plain in ["http://shop.test/", "ftp://127.0.0.1/"] {
            assert!(!m.learn(&url(plain), &ask), "{plain}");
        }
        for secure in [
            "http://127.0.0.1:8080/",
            "http://localhost/",
            "https://a.test/",
        ] {
            assert!(m.learn(&url(secure), &ask), "{secure}");
            assert!(m.asked(&url(secure)).is_some(), "{secure}");
        }
    }

    #[test]
    fn memory_is_bounded_and_survives_a_restart_and_a_bad_file() {
        let ask = headers(&[("accept-ch", "sec-ch-ua-model")]);
        let m = Arc::new(Memory::in_memory());
        for i in 0..MAX_ORIGINS + 5 {
            m.learn(&url(&format!("https://s{i}.test/")), &ask);
        }
        assert_eq!(m.asked(&url("https://s0.test/")), None, "the oldest went");
        assert!(m.asked(&url("https://s7.test/")).is_some());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client_hints.json");
        let m = Arc::new(Memory::open(&path));
        for i in 0..10 {
            m.learn(&url(&format!("https://s{i}.test/")), &ask);
        }
        let again = Memory::open(&path);
        assert!(again.asked(&url("https://s9.test/")).is_some(), "saved");
        std::fs::write(&path, b"{not json").unwrap();
        let bad = Memory::open(&path);
        assert_eq!(bad.asked(&url("https://s9.test/")), None);
        assert!(dir.path().join("client_hints.json.bad").exists());
    }

    #[test]
    fn critical_hints_not_sent_ask_for_one_retry() {
        let h = headers(&[("critical-ch", "Sec-CH-UA-Model, Sec-CH-UA-Arch")]);
        let asked = vec!["sec-ch-ua-model".to_string()];
        assert!(retry_for(&h, &asked, &[]));
        assert!(!retry_for(&h, &asked, &["sec-ch-ua-model".to_string()]));
        assert!(!retry_for(&h, &[], &[]), "not asked: not sent");
    }
}
