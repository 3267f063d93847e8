//! Sessions in and out: a slot's cookies, and its browser's `localStorage`,
//! in the files people already have. Netscape `cookies.txt` (browser
//! extensions, yt-dlp, curl), the JSON array Cookie-Editor and
//! EditThisCookie export, and Playwright's `storageState` (cookies plus
//! `origins[].localStorage`).
//!
//! Parsing is strict about shape and names what is wrong (`line 7: …`,
//! `cookies[3] (`sid`): …`), so a bad file changes nothing: the caller
//! merges only a session that parsed whole. Values are never quoted in
//! errors.

mod json;
mod model;
mod netscape;

pub use model::{OriginStorage, Session, StorageItem};

use crate::error::{Error, ErrorKind, Result};

use crate::request::SessionFormat as Format;

/// Parse a session file; `Auto` decides by the first non-blank character.
/// Cookies that expired already are dropped (they would not be sent).
pub fn parse(text: &str, format: Format) -> Result<Session> {
    let format = match format {
        Format::Auto => detect(text),
        f => f,
    };
    let mut session = match format {
        Format::Netscape => netscape::parse(text),
        Format::Json => json::parse_cookie_array(text),
        Format::StorageState | Format::Auto => json::parse_storage_state(text),
    }
    .map_err(|m| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("session file ({}): {m}", format.as_str()),
        )
        .retryable(false)
    })?;
    let now = unix_now();
    session
        .cookies
        .retain(|c| c.expires.is_none_or(|e| e > now));
    Ok(session)
}

/// Write `session` as `format` (`Auto`: storageState, the only one that
/// holds `localStorage`).
pub fn render(session: &Session, format: Format) -> String {
    match format {
        Format::Netscape => netscape::render(&session.cookies),
        Format::Json => json::render_cookie_array(&session.cookies),
        Format::StorageState | Format::Auto => json::render_storage_state(session),
    }
}

/// The format `auto` settles on for `text`.
pub fn detect(text: &str) -> Format {
    match text.trim_start().chars().next() {
        Some('{') => Format::StorageState,
        Some('[') => Format::Json,
        _ => Format::Netscape,
    }
}

/// Fill `jar` from a session file (a profile's `seed_cookies`) and save it;
/// how many cookies it took (the jar logs each one it refused, by name,
/// domain and reason).
pub fn seed(jar: &crate::identity::jar::Jar, file: &std::path::Path) -> Result<usize> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Error::io(format!("cannot read seed cookies {}", file.display()), e))?;
    let parsed = parse(&text, Format::Auto)
        .map_err(|e| Error::config(format!("{}: {}", file.display(), e.message())))?;
    let report = jar.import(&parsed.cookies);
    jar.save()?;
    Ok(report.taken)
}

/// Merge `session`'s cookies into `jar`, each judged by the jar's rules: the
/// report of what took and what was refused (entry by entry, by position in
/// the file's cookies), and the session less its refused cookies (what may
/// go on into the browser). Its `localStorage` is kept whole.
pub fn merge(
    jar: &crate::identity::jar::Jar,
    session: &Session,
) -> (crate::identity::jar::ImportReport, Session) {
    let report = jar.import(&session.cookies);
    let accepted = Session {
        cookies: (session.cookies.iter().enumerate())
            .filter(|(i, _)| !report.refused_entry(*i))
            .map(|(_, c)| c.clone())
            .collect(),
        origins: session.origins.clone(),
    };
    (report, accepted)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::jar::PortableCookie;

    fn cookie(name: &str, domain: &str, host_only: bool) -> PortableCookie {
        PortableCookie {
            name: name.into(),
            value: "v=1".into(),
            domain: domain.into(),
            host_only,
            path: "/".into(),
            secure: true,
            http_only: true,
            expires: Some(unix_now() + 3600),
            same_site: Some("Lax".into()),
        }
    }

    #[test]
    fn every_format_round_trips_its_cookies() {
        let s = Session {
            cookies: vec![
                cookie("sid", "shop.test", true),
                cookie("pref", "shop.test", false),
            ],
            origins: vec![OriginStorage {
                origin: "https://shop.test".into(),
                local_storage: vec![StorageItem {
                    name: "cart".into(),
                    value: "{\"n\":2}".into(),
                }],
            }],
        };
        for f in [Format::Netscape, Format::Json, Format::StorageState] {
            let text = render(&s, f);
            let back = parse(&text, Format::Auto).unwrap_or_else(|e| panic!("{f:?}: {e}\n{text}"));
            let mut want = s.cookies.clone();
            let mut got = back.cookies.clone();
            if f == Format::Netscape {
                // cookies.txt has no SameSite.
                want.iter_mut().for_each(|c| c.same_site = None);
            }
            want.sort_by(|a, b| a.name.cmp(&b.name));
            got.sort_by(|a, b| a.name.cmp(&b.name));
            assert_eq!(got, want, "{f:?}\n{text}");
            let origins = if f == Format::StorageState {
                s.origins.clone()
            } else {
                vec![]
            };
            assert_eq!(back.origins, origins, "{f:?}");
        }
    }

    #[test]
    fn only_domain_keeps_the_domain_and_its_subdomains() {
        let s = Session {
            cookies: vec![
                cookie("a", "shop.test", true),
                cookie("b", "www.shop.test", true),
                cookie("c", "other.test", true),
            ],
            origins: vec![],
        };
        let kept: Vec<String> = s
            .only_domain("shop.test")
            .cookies
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(kept, ["a", "b"]);
    }

    #[test]
    fn a_merge_refuses_entry_by_entry_and_keeps_the_rest_of_the_file() {
        let s = Session {
            cookies: vec![
                cookie("good", "shop.test", false),
                cookie("x", "com", false),
                cookie("also", "www.shop.test", true),
            ],
            origins: vec![OriginStorage {
                origin: "https://shop.test".into(),
                local_storage: vec![StorageItem {
                    name: "cart".into(),
                    value: "1".into(),
                }],
            }],
        };
        let jar = crate::identity::jar::Jar::in_memory();
        let (report, kept) = merge(&jar, &s);
        assert_eq!(report.taken, 2);
        let refused: Vec<String> = report.refused.iter().map(|r| r.to_string()).collect();
        assert_eq!(refused, ["cookie `x` for `com`: a public suffix"]);
        let names: Vec<&str> = kept.cookies.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["good", "also"]);
        assert_eq!(kept.origins, s.origins);
        assert_eq!(jar.count(), 2);
    }

    #[test]
    fn expired_cookies_are_dropped() {
        let text =
            "shop.test\tFALSE\t/\tFALSE\t1000\told\tx\nshop.test\tFALSE\t/\tFALSE\t0\tsess\ty\n";
        let s = parse(text, Format::Netscape).unwrap();
        let names: Vec<&str> = s.cookies.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["sess"]);
    }
}
