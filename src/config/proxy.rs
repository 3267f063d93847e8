//! Proxy URLs: a parsed one whose credentials are never printed
//! ([`ProxyUrl`]), and a configured one with `{slot}` / `{session}` in its
//! user name ([`ProxyTemplate`]).

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A proxy URL whose credentials never reach a log line or printout.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl(url::Url);

impl ProxyUrl {
    /// Parse and check a proxy URL: http, https, socks5 or socks5h, with a host.
    pub fn parse(s: &str) -> Result<Self, String> {
        // Never echo the input: it may hold a password.
        let url = url::Url::parse(s).map_err(|e| format!("invalid proxy URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https" | "socks5" | "socks5h") {
            return Err(format!(
                "unsupported proxy scheme `{}` (expected http, https, socks5 or socks5h)",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("proxy URL has no host".into());
        }
        Ok(ProxyUrl(url))
    }

    /// The full URL, credentials included: only for handing to the HTTP client.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }

    /// `http`, `https`, `socks5` or `socks5h`.
    pub fn scheme(&self) -> &str {
        self.0.scheme()
    }

    /// The proxy's host and port (the scheme's default port when none is given).
    pub fn host_port(&self) -> (String, u16) {
        let host = self
            .0
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = self.0.port().unwrap_or(match self.0.scheme() {
            "http" => 80,
            "https" => 443,
            _ => 1080,
        });
        (host, port)
    }

    /// `scheme://host:port` without credentials (for Chromium's `--proxy-server`).
    pub fn without_credentials(&self) -> String {
        let host = self.0.host_str().unwrap_or_default();
        match self.0.port_or_known_default() {
            Some(port) => format!("{}://{host}:{port}", self.0.scheme()),
            None => format!("{}://{host}", self.0.scheme()),
        }
    }

    /// Decoded user and password, if the URL has them.
    pub fn credentials(&self) -> Option<(String, String)> {
        if self.0.username().is_empty() {
            return None;
        }
        let dec = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        Some((dec(self.0.username()), dec(self.0.password().unwrap_or(""))))
    }

    /// `scheme://***@host:port` (`scheme://host:port` without credentials):
    /// all any report shows of a proxy. Nothing past the port is kept, so
    /// no part a parser might take for another (a fragment, a path) can
    /// carry a password out.
    pub fn redacted(&self) -> String {
        let creds = !self.0.username().is_empty() || self.0.password().is_some();
        let (host, port) = self.host_port();
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let who = if creds { "***@" } else { "" };
        format!("{}://{who}{host}:{port}", self.0.scheme())
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for ProxyUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ProxyUrl::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A proxy URL as configured for a slot: `{slot}` (the slot's number) and
/// `{session}` (its identity's session, new at each retirement) may appear
/// in the user name or the password, for providers' sticky sessions
/// (`http://user-session-{session}:pw@gate.example:7000`). Checked when the
/// config loads; never printed with its credentials.
///
/// The URL is parsed once, as written; a value is percent-encoded into the
/// one component its placeholder sits in, never pasted into the URL's text,
/// so no session can move the proxy's host, port or password.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyTemplate(String);

/// How the URL parser writes a placeholder inside the user name or password.
const SLOT: &str = "%7Bslot%7D";
const SESSION: &str = "%7Bsession%7D";

impl ProxyTemplate {
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = ProxyTemplate(s.to_string());
        let url = t.parsed()?;
        let rest = {
            let mut u = url.clone();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        };
        if [
            "{slot}",
            "{session}",
            SLOT,
            SESSION,
            "%7bslot%7d",
            "%7bsession%7d",
        ]
        .iter()
        .any(|p| rest.contains(p))
        {
            return Err(
                "`{slot}` and `{session}` may appear only in the proxy URL's user name or password"
                    .into(),
            );
        }
        t.render(0, "0")?;
        Ok(t)
    }

    /// The template as a URL, its placeholders still in it.
    fn parsed(&self) -> Result<url::Url, String> {
        // Never echo the input: it may hold a password.
        url::Url::parse(&self.0).map_err(|e| format!("invalid proxy URL ({e})"))
    }

    /// The proxy of slot `slot` with session `session`.
    pub fn render(&self, slot: usize, session: &str) -> Result<ProxyUrl, String> {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let mut url = self.parsed()?;
        let session = utf8_percent_encode(session, NON_ALPHANUMERIC).to_string();
        let fill = |part: &str| {
            part.replace(SLOT, &slot.to_string())
                .replace(SESSION, &session)
        };
        let user = fill(url.username());
        let password = url.password().map(fill);
        if url.set_username(&user).is_err() || url.set_password(password.as_deref()).is_err() {
            return Err("the proxy URL cannot carry a user name".into());
        }
        ProxyUrl::parse(url.as_str())
    }
}

impl fmt::Debug for ProxyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.render(0, "session") {
            Ok(u) => f.write_str(&u.redacted()),
            Err(_) => f.write_str("<proxy>"),
        }
    }
}

impl<'de> Deserialize<'de> for ProxyTemplate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ProxyTemplate::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "http://user-{session}-{slot}:PASSWORD@127.0.0.1:18996";

    #[test]
    fn a_session_is_data_in_the_user_name_and_never_moves_the_host() {
        let t = ProxyTemplate::parse(T).unwrap();
        let ok = t.render(3, "0a1b2c3d4e5f").unwrap();
        assert_eq!(ok.host_port(), ("127.0.0.1".to_string(), 18996));
        assert_eq!(
            ok.credentials(),
            Some(("user-0a1b2c3d4e5f-3".into(), "PASSWORD".into()))
        );
        // What a hostile bundle's session tried: a user, a host and a
        // fragment of its own.
        for evil in [
            "x@127.0.0.2:18999/#",
            "a:b@c",
            "x/../y?z#w",
            "%40127.0.0.2",
            "\n",
        ] {
            let u = t.render(0, evil).unwrap();
            assert_eq!(u.host_port(), ("127.0.0.1".to_string(), 18996), "{evil}");
            let (user, pass) = u.credentials().unwrap();
            assert_eq!(
                user,
                format!("user-{evil}-0"),
                "the session stays whole in the user name"
            );
            assert_eq!(pass, "PASSWORD");
            assert_eq!(u.redacted(), "http://***@127.0.0.1:18996", "{evil}");
        }
    }

    #[test]
    fn placeholders_outside_the_credentials_are_refused() {
        for t in [
            "http://{session}.gate.example:7000",
            "http://u:p@gate.example:7000/{session}",
            "http://u:p@gate.example:7000/#{slot}",
        ] {
            let e = ProxyTemplate::parse(t).unwrap_err();
            assert!(
                e.contains("only in the proxy URL's user name or password"),
                "{t}: {e}"
            );
        }
        let pw = ProxyTemplate::parse("http://u:pw-{session}@gate.example:7000").unwrap();
        assert_eq!(
            pw.render(1, "abc").unwrap().credentials().unwrap().1,
            "pw-abc"
        );
    }

    #[test]
    fn redaction_keeps_scheme_host_and_port_only() {
        let u = ProxyUrl::parse("http://u:PASSWORD@gate.example:7000/path?q=PASSWORD#PASSWORD")
            .unwrap();
        assert_eq!(u.redacted(), "http://***@gate.example:7000");
        assert_eq!(format!("{u:?}"), "http://***@gate.example:7000");
        let bare = ProxyUrl::parse("socks5://gate.example/#PASSWORD").unwrap();
        assert_eq!(bare.redacted(), "socks5://gate.example:1080");
    }
}
