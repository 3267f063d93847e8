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

    /// The URL with user and password replaced by `***`.
    pub fn redacted(&self) -> String {
        let mut u = self.0.clone();
        if !u.username().is_empty() || u.password().is_some() {
            let _ = u.set_username("***");
            let _ = u.set_password(None);
        }
        u.to_string()
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
/// in the user name, for providers' sticky sessions
/// (`http://user-session-{session}:pw@gate.example:7000`). Checked when the
/// config loads; never printed with its credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyTemplate(String);

impl ProxyTemplate {
    pub fn parse(s: &str) -> Result<Self, String> {
        ProxyTemplate::render_str(s, 0, "session")?;
        Ok(ProxyTemplate(s.to_string()))
    }

    /// The proxy of slot `slot` with session `session`.
    pub fn render(&self, slot: usize, session: &str) -> Result<ProxyUrl, String> {
        ProxyTemplate::render_str(&self.0, slot, session)
    }

    fn render_str(s: &str, slot: usize, session: &str) -> Result<ProxyUrl, String> {
        ProxyUrl::parse(
            &s.replace("{slot}", &slot.to_string())
                .replace("{session}", session),
        )
    }
}

impl fmt::Debug for ProxyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match ProxyTemplate::render_str(&self.0, 0, "{session}") {
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
