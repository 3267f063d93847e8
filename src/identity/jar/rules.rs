//! What the jar refuses, whichever road a cookie takes into it: a
//! response's `Set-Cookie` (the HTTP tier), the browser's cookies, a session
//! file, or a jar file written before these rules.
//!
//! - A Domain that is a public suffix (`com`, `co.uk`, `github.io`, and any
//!   name the list does not know, by its implicit `*` rule: `test`) is
//!   refused, unless it equals the request's host, when the cookie becomes
//!   host-only (RFC 6265 §5.3 step 5). Otherwise one site could plant a
//!   cookie every site under the suffix receives (session fixation).
//! - `Secure` only from a secure origin: https, or http to `localhost` or a
//!   loopback address literal (what Chromium deems potentially trustworthy;
//!   a name that merely resolves to 127.0.0.1 is not).
//! - `__Secure-` names must be Secure from a secure origin; `__Host-` names
//!   also host-only (no Domain attribute) with `Path=/`; both matched without
//!   regard to case (RFC 6265bis §4.1.3).
//!
//! The public-suffix list is compiled in (`psl`); nothing is read at run time.

use std::fmt;
use std::net::IpAddr;

use cookie::Cookie as RawCookie;
use url::{Host, Url};

/// Why the jar refused a cookie. No variant holds a cookie's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Its Domain is a public suffix other than the request's own host.
    PublicSuffix,
    /// `Secure` set over plain http by a host that is not loopback.
    SecureFromInsecureOrigin,
    /// A `__Secure-` name without what the prefix demands.
    SecurePrefix(&'static str),
    /// A `__Host-` name without what the prefix demands.
    HostPrefix(&'static str),
    /// A nameless cookie whose value starts like a prefixed name.
    NamelessPrefix,
    /// Its Domain is not a host name.
    NotADomain,
    /// The store would not take it (a Domain the host is not under, a line
    /// that is no cookie, an expired cookie, …).
    NotTaken(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::PublicSuffix => f.write_str("a public suffix"),
            Reason::SecureFromInsecureOrigin => f.write_str(
                "`Secure` set over plain http by a host that is neither localhost nor a loopback address",
            ),
            Reason::SecurePrefix(what) => write!(f, "a `__Secure-` cookie {what}"),
            Reason::HostPrefix(what) => write!(f, "a `__Host-` cookie {what}"),
            Reason::NamelessPrefix => {
                f.write_str("a nameless cookie's value may not start with `__Secure-` or `__Host-`")
            }
            Reason::NotADomain => f.write_str("not a domain"),
            Reason::NotTaken(why) => f.write_str(why),
        }
    }
}

/// One cookie the jar refused: its name, the domain it claimed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// Its position in what was imported (a session file's cookies, in
    /// file order; the browser's list); `None` for a `Set-Cookie`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<usize>,
    pub name: String,
    pub domain: String,
    #[serde(serialize_with = "as_text")]
    pub reason: Reason,
}

fn as_text<S: serde::Serializer>(r: &Reason, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(r)
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cookie `{}` for `{}`: {}",
            self.name, self.domain, self.reason
        )
    }
}

/// Whether `domain` (ASCII, lower-case, no dot at either end) is a public
/// suffix: listed, or unknown to the list (its implicit `*` rule makes any
/// single unknown label one).
pub fn is_public_suffix(domain: &str) -> bool {
    match psl::suffix(domain.as_bytes()) {
        Some(s) => s.trim().as_bytes() == domain.as_bytes(),
        // The list finds no suffix only in what is no name (an empty label).
        None => true,
    }
}

/// Whether cookies from `url` may be `Secure`: https (or wss), or http to
/// `localhost` or a loopback address literal. Names are not resolved.
pub fn is_secure_origin(url: &Url) -> bool {
    if matches!(url.scheme(), "https" | "wss") {
        return true;
    }
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A Domain attribute, normalised as the store will hold it.
#[derive(Debug, PartialEq, Eq)]
enum Domain {
    /// Empty (the store takes no such cookie).
    Empty,
    /// An address literal: the store matches it only to the same address.
    Address,
    /// A host name, ASCII (punycode) and lower-case.
    Name(String),
    Invalid,
}

fn domain_of(attr: &str) -> Domain {
    // Dots at either end are dropped for the judgement: `.com`, `com.` and
    // `..com` are all `com` here (the store may keep them as written, but
    // they are judged as what they could reach).
    let d = attr.trim().trim_matches('.');
    if d.is_empty() {
        return Domain::Empty;
    }
    let bare = d.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok() {
        return Domain::Address;
    }
    match Host::parse(d) {
        Ok(Host::Domain(name)) => Domain::Name(name.to_ascii_lowercase()),
        // WHATWG reads `4` or `0x7f.1` as IPv4: such a Domain matches no host name.
        Ok(Host::Ipv4(_) | Host::Ipv6(_)) => Domain::Address,
        Err(_) => Domain::Invalid,
    }
}

/// The prefix rules. `secure_origin`: where it came from may set `Secure`;
/// `has_domain`: a Domain attribute was given (the cookie is not host-only).
fn check_prefixes(
    name: &str,
    value: &str,
    secure: bool,
    secure_origin: bool,
    has_domain: bool,
    path: Option<&str>,
) -> Result<(), Reason> {
    let starts = |s: &str, prefix: &str| {
        s.len() >= prefix.len()
            && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
    };
    if name.is_empty() && (starts(value, "__Secure-") || starts(value, "__Host-")) {
        return Err(Reason::NamelessPrefix);
    }
    if starts(name, "__Secure-") {
        if !secure {
            return Err(Reason::SecurePrefix("must be Secure"));
        }
        if !secure_origin {
            return Err(Reason::SecurePrefix(
                "must come from a secure origin (https)",
            ));
        }
    }
    if starts(name, "__Host-") {
        if !secure {
            return Err(Reason::HostPrefix("must be Secure"));
        }
        if !secure_origin {
            return Err(Reason::HostPrefix("must come from a secure origin (https)"));
        }
        if has_domain {
            return Err(Reason::HostPrefix(
                "may not have a Domain (it is host-only)",
            ));
        }
        if path != Some("/") {
            return Err(Reason::HostPrefix("must have Path=/"));
        }
    }
    Ok(())
}

/// Judge a `Set-Cookie` received from `url`, before the store sees it. A
/// Domain that is a public suffix equal to the host is removed (the cookie
/// becomes host-only).
pub(super) fn judge_response(raw: &mut RawCookie<'_>, url: &Url) -> Result<(), Reason> {
    let secure_origin = is_secure_origin(url);
    let secure = raw.secure() == Some(true);
    if secure && !secure_origin {
        return Err(Reason::SecureFromInsecureOrigin);
    }
    let has_domain = raw.domain().is_some();
    check_prefixes(
        raw.name(),
        raw.value(),
        secure,
        secure_origin,
        has_domain,
        raw.path(),
    )?;
    let Some(attr) = raw.domain() else {
        return Ok(());
    };
    match domain_of(attr) {
        Domain::Name(d) if is_public_suffix(&d) => {
            let host = url.host_str().map(|h| h.trim_end_matches('.'));
            if host.is_some_and(|h| h.eq_ignore_ascii_case(&d)) {
                raw.unset_domain();
                Ok(())
            } else {
                Err(Reason::PublicSuffix)
            }
        }
        Domain::Invalid => Err(Reason::NotADomain),
        Domain::Name(_) | Domain::Address | Domain::Empty => Ok(()),
    }
}

/// Judge a cookie that comes with no request (the browser's, a session
/// file's, or one read back from a jar file): `domain` as held, `host_only`
/// when it had no Domain attribute. Such a cookie names no origin, so a
/// public-suffix Domain is refused outright and `Secure` is taken as it
/// says (the entry is rebuilt as from https).
pub(super) fn judge_held(
    name: &str,
    value: &str,
    domain: &str,
    host_only: bool,
    path: &str,
    secure: bool,
) -> Result<(), Reason> {
    check_prefixes(name, value, secure, secure, !host_only, Some(path))?;
    match domain_of(domain) {
        Domain::Name(d) if !host_only && is_public_suffix(&d) => Err(Reason::PublicSuffix),
        Domain::Invalid | Domain::Empty => Err(Reason::NotADomain),
        Domain::Name(_) | Domain::Address => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn judge(set_cookie: &str, from: &str) -> Result<Option<String>, Reason> {
        let mut raw = RawCookie::parse(set_cookie.to_string()).unwrap();
        judge_response(&mut raw, &url(from)).map(|()| raw.domain().map(str::to_string))
    }

    #[test]
    fn public_suffixes_listed_private_and_implicit() {
        for ps in [
            "com",
            "co.uk",
            "test",
            "localhost",
            "github.io",
            "xn--fiqs8s",
            "example",
            "uk",
        ] {
            assert!(is_public_suffix(ps), "{ps}");
        }
        for not in [
            "amazon.com",
            "bbc.co.uk",
            "shop.test",
            "attacker.test",
            "me.github.io",
            "xn--fiqs8s.xn--fiqs8s",
        ] {
            assert!(!is_public_suffix(not), "{not}");
        }
        assert!(is_public_suffix(""), "an empty name is refused too");
    }

    #[test]
    fn a_public_suffix_domain_is_refused_unless_it_is_the_host() {
        let from = "https://a.attacker.test/";
        assert_eq!(judge("x=1; Domain=test", from), Err(Reason::PublicSuffix));
        assert_eq!(judge("x=1; Domain=.TEST", from), Err(Reason::PublicSuffix));
        assert_eq!(judge("x=1; Domain=test.", from), Err(Reason::PublicSuffix));
        assert_eq!(
            judge("x=1; Domain=com", "https://www.amazon.com/"),
            Err(Reason::PublicSuffix)
        );
        assert_eq!(
            judge("x=1; Domain=co.uk", "https://www.bbc.co.uk/"),
            Err(Reason::PublicSuffix)
        );
        assert_eq!(
            judge("x=1; Domain=github.io", "https://me.github.io/"),
            Err(Reason::PublicSuffix)
        );
        // The registrable domain and the host itself are fine.
        assert_eq!(
            judge("x=1; Domain=attacker.test", from),
            Ok(Some("attacker.test".into()))
        );
        assert_eq!(judge("x=1", from), Ok(None));
        // A public suffix that is the host becomes host-only (§5.3 step 5).
        assert_eq!(
            judge("x=1; Domain=localhost", "http://localhost:8080/"),
            Ok(None)
        );
        // Unicode is judged as its punycode.
        assert_eq!(
            judge("x=1; Domain=中国", "https://www.example.xn--fiqs8s/"),
            Err(Reason::PublicSuffix)
        );
        // Address literals are left to the store's exact match.
        assert_eq!(
            judge("x=1; Domain=127.0.0.1", "http://127.0.0.1/"),
            Ok(Some("127.0.0.1".into()))
        );
        assert_eq!(
            judge("x=1; Domain=exa mple.com", from),
            Err(Reason::NotADomain)
        );
    }

    #[test]
    fn secure_only_from_a_secure_origin() {
        assert_eq!(
            judge("s=1; Secure", "http://a.attacker.test/"),
            Err(Reason::SecureFromInsecureOrigin)
        );
        // A name resolving to loopback is still a name.
        assert_eq!(
            judge("s=1; Secure", "http://localtest.me/"),
            Err(Reason::SecureFromInsecureOrigin)
        );
        for ok in [
            "https://a.attacker.test/",
            "http://localhost:3000/",
            "http://127.0.0.1:3000/",
            "http://127.8.9.10/",
            "http://[::1]:80/",
        ] {
            assert_eq!(judge("s=1; Secure", ok), Ok(None), "{ok}");
        }
        assert_eq!(judge("plain=1", "http://a.attacker.test/"), Ok(None));
    }

    #[test]
    fn prefixes_are_honoured_whatever_their_case() {
        let https = "https://www.shop.test/";
        assert_eq!(judge("__Secure-a=1; Secure", https), Ok(None));
        assert_eq!(
            judge("__secure-a=1", https),
            Err(Reason::SecurePrefix("must be Secure"))
        );
        assert_eq!(
            judge("__SECURE-a=1; Secure", "http://www.shop.test/"),
            Err(Reason::SecureFromInsecureOrigin)
        );
        assert_eq!(judge("__Host-a=1; Secure; Path=/", https), Ok(None));
        assert_eq!(
            judge("__host-a=1; Secure; Path=/; Domain=shop.test", https),
            Err(Reason::HostPrefix(
                "may not have a Domain (it is host-only)"
            ))
        );
        assert_eq!(
            judge("__HOST-a=1; Secure", https),
            Err(Reason::HostPrefix("must have Path=/"))
        );
        assert_eq!(
            judge("__Host-a=1; Secure; Path=/x", https),
            Err(Reason::HostPrefix("must have Path=/"))
        );
        assert_eq!(
            judge("__Host-a=1; Path=/", https),
            Err(Reason::HostPrefix("must be Secure"))
        );
        // The cookie crate refuses a nameless Set-Cookie; the browser may
        // hand one over.
        assert_eq!(
            judge_held("", "__HOST-a=1", "www.shop.test", true, "/", true),
            Err(Reason::NamelessPrefix)
        );
        // Loopback http counts as a secure origin for the prefixes too.
        assert_eq!(
            judge("__Host-a=1; Secure; Path=/", "http://127.0.0.1:9/"),
            Ok(None)
        );
    }

    #[test]
    fn held_cookies_refuse_a_public_suffix_outright() {
        assert_eq!(
            judge_held("x", "1", "com", false, "/", false),
            Err(Reason::PublicSuffix)
        );
        // Host-only for a public-suffix host reaches that host alone.
        assert_eq!(judge_held("x", "1", "localhost", true, "/", false), Ok(()));
        assert_eq!(judge_held("x", "1", "shop.test", false, "/", false), Ok(()));
        assert_eq!(judge_held("x", "1", "127.0.0.1", false, "/", false), Ok(()));
        assert_eq!(
            judge_held("__Host-x", "1", "shop.test", false, "/", true),
            Err(Reason::HostPrefix(
                "may not have a Domain (it is host-only)"
            ))
        );
        assert_eq!(
            judge_held("__Secure-x", "1", "shop.test", true, "/", false),
            Err(Reason::SecurePrefix("must be Secure"))
        );
        assert_eq!(
            judge_held("__Host-x", "1", "shop.test", true, "/", true),
            Ok(())
        );
        assert_eq!(
            judge_held("x", "1", "", true, "/", false),
            Err(Reason::NotADomain)
        );
    }

    #[test]
    fn a_refusal_names_the_cookie_and_domain_but_not_the_value() {
        let r = Refusal {
            entry: Some(1),
            name: "x".into(),
            domain: "com".into(),
            reason: Reason::PublicSuffix,
        };
        assert_eq!(r.to_string(), "cookie `x` for `com`: a public suffix");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"entry": 1, "name": "x", "domain": "com", "reason": "a public suffix"})
        );
    }
}
