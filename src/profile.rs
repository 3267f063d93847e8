//! Profiles: the static description of an identity (`profiles/*.toml`).
//!
//! A profile names a wreq-util browser emulation and platform, and the user agent,
//! language, timezone, viewport, proxy and seed cookies that go with it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use wreq_util::{Platform, Profile as BrowserProfile};

use crate::diag::{self, Diagnostic};

/// A browser emulation by its wreq-util name (`chrome_149`, `firefox_151`, `safari_26.4`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EmulationName(pub BrowserProfile);

impl EmulationName {
    /// Parse a wreq-util profile name.
    pub fn parse(name: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(name.to_string()))
            .ok()
            .map(EmulationName)
    }

    /// The wreq-util name of this emulation.
    pub fn name(self) -> String {
        match serde_json::to_value(self.0) {
            Ok(serde_json::Value::String(s)) => s,
            _ => format!("{:?}", self.0),
        }
    }

    /// Browser family: chrome, edge, opera, firefox, safari or okhttp.
    pub fn family(self) -> &'static str {
        let name = self.name();
        ["chrome", "edge", "opera", "firefox", "safari", "okhttp"]
            .into_iter()
            .find(|f| name.starts_with(f))
            .unwrap_or("unknown")
    }

    /// Every accepted emulation name, in wreq-util's order.
    pub fn all_names() -> Vec<String> {
        BrowserProfile::VARIANTS
            .iter()
            .map(|p| EmulationName(*p).name())
            .collect()
    }
}

impl fmt::Debug for EmulationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for EmulationName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        EmulationName::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown emulation `{name}` (accepted names are listed in profiles/README.md, e.g. chrome_149, edge_148, firefox_151, safari_26.4)"
            ))
        })
    }
}

/// The operating system the identity claims (wreq-util platform).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PlatformName(pub Platform);

impl<'de> Deserialize<'de> for PlatformName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        serde_json::from_value(serde_json::Value::String(name.clone()))
            .map(PlatformName)
            .map_err(|_| {
                serde::de::Error::custom(format!(
                    "unknown platform `{name}` (expected windows, macos, linux, android or ios)"
                ))
            })
    }
}

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

    /// Whether the proxy changes with the identity's session.
    pub fn has_session(&self) -> bool {
        self.0.contains("{session}")
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

/// Browser window size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
}

/// A profile file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    /// wreq-util emulation name.
    emulation: EmulationName,
    /// Platform the identity claims; default windows (the most common desktop).
    #[serde(default)]
    platform: Option<PlatformName>,
    /// User agent; default: the emulation's own.
    #[serde(default)]
    user_agent: Option<String>,
    /// Accept-Language; default: the emulation's own.
    #[serde(default)]
    accept_language: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    viewport: Option<Viewport>,
    #[serde(default)]
    proxy: Option<ProxyUrl>,
    /// Cookies loaded into a slot's jar when the slot has no jar yet.
    #[serde(default)]
    seed_cookies: Option<PathBuf>,
}

/// A resolved profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub emulation: EmulationName,
    pub platform: Platform,
    pub user_agent: String,
    pub accept_language: String,
    pub timezone: Option<String>,
    pub viewport: Viewport,
    pub proxy: Option<ProxyUrl>,
    pub seed_cookies: Option<PathBuf>,
    /// The emulation's `sec-ch-ua` (Chromium-family browsers only).
    pub sec_ch_ua: Option<String>,
    /// Where it was loaded from (`None`: the built-in default).
    pub source: Option<PathBuf>,
}

/// The emulation used when no `profiles/default.toml` exists.
pub const DEFAULT_EMULATION: &str = "chrome_149";

impl Profile {
    /// The built-in `default` profile: Chrome 149 on Windows.
    pub fn builtin_default() -> Self {
        let emulation = EmulationName::parse(DEFAULT_EMULATION)
            .unwrap_or(EmulationName(BrowserProfile::default()));
        Self::resolve(
            "default",
            None,
            ProfileFile {
                emulation,
                platform: None,
                user_agent: None,
                accept_language: None,
                timezone: None,
                viewport: None,
                proxy: None,
                seed_cookies: None,
            },
        )
    }

    fn resolve(name: &str, source: Option<PathBuf>, f: ProfileFile) -> Self {
        let platform = f.platform.map(|p| p.0).unwrap_or(Platform::Windows);
        let emu = wreq::IntoEmulation::into_emulation(
            wreq_util::Emulation::builder()
                .profile(f.emulation.0)
                .platform(platform)
                .build(),
        );
        let header = |h: http::header::HeaderName| {
            emu.headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let base = source
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        Profile {
            name: name.to_string(),
            emulation: f.emulation,
            platform,
            user_agent: f
                .user_agent
                .or_else(|| header(http::header::USER_AGENT))
                .unwrap_or_default(),
            accept_language: chromium_accept_language(
                &f.accept_language
                    .or_else(|| header(http::header::ACCEPT_LANGUAGE))
                    .unwrap_or_else(|| "en-US,en;q=0.9".into()),
            ),
            timezone: f.timezone,
            viewport: f.viewport.unwrap_or(Viewport {
                width: 1366,
                height: 768,
            }),
            proxy: f.proxy,
            sec_ch_ua: header(http::header::HeaderName::from_static("sec-ch-ua")),
            seed_cookies: f.seed_cookies.map(|p| match &base {
                Some(b) if p.is_relative() => b.join(p),
                _ => p,
            }),
            source,
        }
    }

    /// `navigator.platform` for this profile's platform.
    pub fn navigator_platform(&self) -> &'static str {
        match self.platform {
            Platform::Windows => "Win32",
            Platform::MacOS => "MacIntel",
            Platform::Linux => "Linux x86_64",
            Platform::Android => "Linux armv81",
            Platform::IOS => "iPhone",
            _ => "Win32",
        }
    }

    /// The platform name used in UA client hints (`sec-ch-ua-platform`).
    pub fn hints_platform(&self) -> &'static str {
        match self.platform {
            Platform::Windows => "Windows",
            Platform::MacOS => "macOS",
            Platform::Linux => "Linux",
            Platform::Android => "Android",
            Platform::IOS => "iOS",
            _ => "Windows",
        }
    }

    /// The first language tag of Accept-Language (`--lang` for Chromium).
    pub fn primary_language(&self) -> String {
        self.accept_language
            .split(',')
            .next()
            .and_then(|l| l.split(';').next())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .unwrap_or("en-US")
            .to_string()
    }

    /// Load one profile file; the profile's name is the file stem.
    pub fn load(path: &Path) -> Result<Self, Diagnostic> {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| Diagnostic::file(path, "profile file name is not valid UTF-8"))?;
        let (file, text): (ProfileFile, String) = diag::read_toml(path)?;
        if let Some(ua) = &file.user_agent
            && (ua.trim().is_empty() || ua.contains(['\r', '\n']))
        {
            let pos = text.find("user_agent");
            return Err(Diagnostic::at(
                path,
                &text,
                pos.map(|p| p..p),
                "user_agent must be one non-empty line",
            ));
        }
        if let Some(seed) = &file.seed_cookies {
            let base = path.parent().unwrap_or(Path::new("."));
            let seed = base.join(seed);
            if !seed.is_file() {
                let pos = text.find("seed_cookies");
                return Err(Diagnostic::at(
                    path,
                    &text,
                    pos.map(|p| p..p),
                    format!("seed_cookies file {} not found", seed.display()),
                ));
            }
        }
        Ok(Self::resolve(name, Some(path.to_path_buf()), file))
    }
}

/// The language tags of an Accept-Language value, in order, without q-values.
pub fn language_tags(accept_language: &str) -> Vec<String> {
    accept_language
        .split(',')
        .filter_map(|l| l.split(';').next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Accept-Language as Chromium writes it from a language list: the first tag bare,
/// then q=0.9, 0.8, ... (never below 0.1). Both tiers of a slot send this exact
/// value, so the header cannot tell them apart.
pub fn chromium_accept_language(accept_language: &str) -> String {
    language_tags(accept_language)
        .iter()
        .enumerate()
        .map(|(i, tag)| match i {
            0 => tag.clone(),
            _ => format!("{tag};q=0.{}", 10usize.saturating_sub(i).max(1)),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Load every `*.toml` in `dir`, plus the built-in `default` when the folder has none.
/// A missing folder is not an error: only the built-in default exists then.
pub fn load_dir(dir: &Path) -> (BTreeMap<String, Profile>, Vec<Diagnostic>) {
    let mut profiles = BTreeMap::new();
    let mut problems = Vec::new();
    for path in toml_files(dir) {
        match Profile::load(&path) {
            Ok(p) => {
                profiles.insert(p.name.clone(), p);
            }
            Err(d) => problems.push(d),
        }
    }
    profiles
        .entry("default".to_string())
        .or_insert_with(Profile::builtin_default);
    (profiles, problems)
}

/// The `*.toml` files of `dir`, sorted; empty when the folder does not exist.
pub fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulation_names_round_trip() {
        let e = EmulationName::parse("chrome_149").unwrap();
        assert_eq!(e.name(), "chrome_149");
        assert_eq!(e.family(), "chrome");
        assert_eq!(
            EmulationName::parse("safari_26.4").unwrap().family(),
            "safari"
        );
        assert!(EmulationName::parse("chrome_999").is_none());
        assert!(EmulationName::all_names().len() > 100);
    }

    #[test]
    fn profiles_readme_lists_every_accepted_emulation() {
        let readme = include_str!("../profiles/README.md");
        for name in EmulationName::all_names() {
            assert!(
                readme.contains(&format!("`{name}`")),
                "profiles/README.md misses `{name}`"
            );
        }
    }

    #[test]
    fn default_user_agent_is_the_emulations_own() {
        let p = Profile::builtin_default();
        assert!(p.user_agent.contains("Chrome/149"), "{}", p.user_agent);
        assert!(!p.accept_language.is_empty());
    }

    #[test]
    fn accept_language_is_normalised_the_way_chromium_writes_it() {
        assert_eq!(chromium_accept_language("en-US,en;q=0.9"), "en-US,en;q=0.9");
        assert_eq!(
            chromium_accept_language("de-DE,de;q=0.9,en;q=0.6"),
            "de-DE,de;q=0.9,en;q=0.8"
        );
        assert_eq!(language_tags(" fr ; q=1 , en "), vec!["fr", "en"]);
    }

    #[test]
    fn proxy_credentials_are_redacted() {
        let p = ProxyUrl::parse("socks5://alice:s3cret@10.0.0.1:1080").unwrap();
        assert_eq!(p.redacted(), "socks5://***@10.0.0.1:1080");
        assert!(!format!("{p:?} {p}").contains("s3cret"));
        assert!(p.expose().contains("s3cret"));
        assert_eq!(p.without_credentials(), "socks5://10.0.0.1:1080");
        let q = ProxyUrl::parse("http://a%40b:p%2Bw+x@proxy.test:8080").unwrap();
        assert_eq!(
            q.credentials(),
            Some(("a@b".to_string(), "p+w+x".to_string()))
        );
        assert_eq!(q.without_credentials(), "http://proxy.test:8080");
        let err = ProxyUrl::parse("ftp://bob:pw@host:1").unwrap_err();
        assert!(err.contains("ftp") && !err.contains("pw"), "{err}");
    }
}
