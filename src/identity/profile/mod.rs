//! Profiles: the static description of an identity (`profiles/*.toml`).
//!
//! A profile names a wreq-util browser emulation and platform, and the user agent,
//! language, timezone, viewport, screen, proxy and seed cookies that go with it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use wreq_util::{Platform, Profile as BrowserProfile};

use crate::diag::{self, Diagnostic};

mod geo;
mod screen;
pub use crate::config::{ProxyTemplate, ProxyUrl};
pub use geo::{Geo, country_locale, country_zones};
pub use screen::{COMMON_WINDOWS, Pointer, Screen, Viewport};

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
    /// The proxy's geography (`geo.rs`).
    #[serde(default)]
    geo: Option<Geo>,
    #[serde(default)]
    viewport: Option<Viewport>,
    /// The screen; default 1920x1080 with a 40-pixel task bar on a desktop,
    /// the viewport's size on a phone.
    #[serde(default)]
    screen: Option<Screen>,
    /// Each slot its own common window size within the screen.
    #[serde(default)]
    vary_window: bool,
    /// Claim another operating system than the machine's, knowing that
    /// the browser cannot back it (flagged wherever the slot is shown).
    #[serde(default)]
    pretend_os: bool,
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
    /// The profile file sets `user_agent`: it is kept as written.
    pub user_agent_pinned: bool,
    pub accept_language: String,
    /// The browser's time zone: the profile's, else its `geo`'s.
    pub timezone: Option<String>,
    /// Where the profile's proxy puts it, as declared.
    pub geo: Option<Geo>,
    pub viewport: Viewport,
    /// The screen the window sits on (it fits: checked at load).
    pub screen: Screen,
    /// The file sets `viewport` / `screen`: every slot of the profile
    /// keeps them; otherwise each slot's persona has its own.
    pub viewport_pinned: bool,
    pub screen_pinned: bool,
    /// The profile claims another operating system than the machine's
    /// (`pretend_os = true`): flagged by `doctor`, `pool_status` and the
    /// status page.
    pub pretend_os: bool,
    /// Slots of this profile take different window sizes
    /// ([`Screen::window_for_slot`]); a phone's window is its screen.
    pub vary_window: bool,
    pub proxy: Option<ProxyUrl>,
    pub seed_cookies: Option<PathBuf>,
    /// The emulation's `sec-ch-ua` (Chromium-family browsers only).
    pub sec_ch_ua: Option<String>,
    /// Where it was loaded from (`None`: the built-in default).
    pub source: Option<PathBuf>,
}

/// `Chrome/149.0.0.0` → `Chrome/<major>.0.0.0` (and Edge's `Edg/`).
fn with_major(ua: &str, token: &str, major: u32) -> String {
    let Some(at) = ua.find(token) else {
        return ua.to_string();
    };
    let start = at + token.len();
    let end = ua[start..].find(' ').map_or(ua.len(), |e| start + e);
    format!("{}{major}.0.0.0{}", &ua[..start], &ua[end..])
}

/// A `sec-ch-ua` value with every real brand at `major` (the GREASE brand,
/// `"Not)A;Brand";v="24"` and kin, keeps its own version).
fn brands_with_major(value: &str, major: u32) -> String {
    value
        .split(", ")
        .map(|entry| match entry.rsplit_once(";v=\"") {
            Some((brand, _)) if !brand.contains("Not") => format!("{brand};v=\"{major}\""),
            _ => entry.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The emulation used when no `profiles/default.toml` exists.
pub const DEFAULT_EMULATION: &str = "chrome_149";

impl Profile {
    /// How its HTTP client presents itself.
    pub fn persona(&self) -> crate::wire::http::Persona {
        crate::wire::http::Persona {
            name: self.name.clone(),
            emulation: self.emulation.0,
            platform: self.platform,
            user_agent: self.user_agent.clone(),
            accept_language: self.accept_language.clone(),
            sec_ch_ua: self.sec_ch_ua.clone(),
            proxy: self.proxy.clone(),
        }
    }

    /// The major version the user agent claims (`Chrome/156…` → 156).
    pub fn user_agent_major(&self) -> Option<u32> {
        let rest = self.user_agent.split("Chrome/").nth(1)?;
        rest.split('.').next()?.parse().ok()
    }

    /// The emulation's own major version (`chrome_149` → 149).
    pub fn emulation_major(&self) -> Option<u32> {
        let name = self.emulation.name();
        let digits: String = name
            .rsplit('_')
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }

    /// Claim the slot's real Chromium, major version `major`, in the user
    /// agent and the client hints' brands: what the browser's JavaScript
    /// engine and its TLS show. Not for a pinned user agent or a profile
    /// that emulates another family. Returns whether anything changed.
    pub fn follow_browser(&mut self, major: u32) -> bool {
        if self.user_agent_pinned
            || !matches!(self.emulation.family(), "chrome" | "edge" | "opera")
            || self.user_agent_major() == Some(major)
        {
            return false;
        }
        let mut ua = with_major(&self.user_agent, "Chrome/", major);
        if ua.contains("Edg/") {
            ua = with_major(&ua, "Edg/", major);
        }
        self.user_agent = ua;
        if let Some(hints) = &self.sec_ch_ua {
            self.sec_ch_ua = Some(brands_with_major(hints, major));
        }
        true
    }

    /// The built-in `default` profile: Chrome 149 on the machine's own
    /// operating system.
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
                geo: None,
                viewport: None,
                screen: None,
                vary_window: false,
                pretend_os: false,
                proxy: None,
                seed_cookies: None,
            },
        )
    }

    fn resolve(name: &str, source: Option<PathBuf>, f: ProfileFile) -> Self {
        let platform = f.platform.map(|p| p.0).unwrap_or_else(machine_platform);
        let mobile = matches!(platform, Platform::Android | Platform::IOS);
        let viewport = f.viewport.unwrap_or(Viewport {
            width: 1366,
            height: 768,
        });
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
            user_agent_pinned: f.user_agent.is_some(),
            user_agent: f
                .user_agent
                .or_else(|| header(http::header::USER_AGENT))
                .unwrap_or_default(),
            accept_language: chromium_accept_language(
                &f.accept_language
                    .or_else(|| f.geo.as_ref().and_then(Geo::languages))
                    .or_else(|| header(http::header::ACCEPT_LANGUAGE))
                    .unwrap_or_else(|| "en-US,en;q=0.9".into()),
            ),
            timezone: f
                .timezone
                .or_else(|| f.geo.as_ref().and_then(|g| g.timezone.clone())),
            geo: f.geo,
            viewport,
            viewport_pinned: f.viewport.is_some(),
            screen_pinned: f.screen.is_some(),
            screen: f
                .screen
                .unwrap_or_else(|| Screen::default_for(mobile, viewport)),
            vary_window: f.vary_window && !mobile,
            pretend_os: f.pretend_os,
            proxy: f.proxy,
            sec_ch_ua: header(http::header::HeaderName::from_static("sec-ch-ua")),
            seed_cookies: f.seed_cookies.map(|p| match &base {
                Some(b) if p.is_relative() => b.join(p),
                _ => p,
            }),
            source,
        }
    }

    /// Whether the slots' browser (Chromium) can be this profile's browser:
    /// Chrome, Edge and Opera are Chromium; Firefox, Safari and OkHttp are
    /// not.
    pub fn emulation_backed(&self) -> bool {
        matches!(self.emulation.family(), "chrome" | "edge" | "opera")
    }

    /// Why the slots' browser cannot be what this profile claims (`None`:
    /// it can): an engine it is not, or an operating system it does not
    /// run on without `pretend_os`.
    pub fn unbacked(&self) -> Option<String> {
        if !self.emulation_backed() {
            return Some(format!(
                "profile `{}`: emulation `{}` is {}, but every slot's browser is Chromium: a page \
                 would see Chromium (navigator.userAgentData, window.chrome, navigator.vendor \
                 \"Google Inc.\", Chromium's WebGL extensions) behind a {} user agent. Use a \
                 chrome_*, edge_* or opera_* emulation",
                self.name,
                self.emulation.name(),
                self.emulation.family(),
                self.emulation.family()
            ));
        }
        let machine = machine_platform();
        if self.platform != machine && !self.pretend_os {
            return Some(format!(
                "profile `{}` claims {}, but its browser runs on {}: a page would see {}'s fonts, \
                 speech voices and software WebGL renderer behind a {} user agent. Use platform = \
                 \"{}\", or set pretend_os = true to claim it anyway (doctor, pool_status and the \
                 status page then flag the slot)",
                self.name,
                self.hints_platform(),
                os_name(machine),
                os_name(machine),
                self.hints_platform(),
                platform_key(machine)
            ));
        }
        None
    }

    /// A phone's platform (Android, iOS).
    pub fn mobile(&self) -> bool {
        matches!(self.platform, Platform::Android | Platform::IOS)
    }

    /// The pointing device its browser reports.
    pub fn pointer(&self) -> Pointer {
        Pointer::for_mobile(self.mobile())
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

    /// The languages of Accept-Language in order, q-values left out
    /// (`de-DE,de,en`): Chromium's `--accept-lang`, from which it makes its
    /// own Accept-Language and `navigator.languages`.
    pub fn languages(&self) -> String {
        let tags = language_tags(&self.accept_language);
        if tags.is_empty() {
            "en-US".into()
        } else {
            tags.join(",")
        }
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
        let profile = Self::resolve(name, Some(path.to_path_buf()), file);
        if let Some(why) = profile.unbacked() {
            let pos = text
                .find("platform")
                .filter(|_| profile.emulation_backed())
                .or_else(|| text.find("emulation"));
            return Err(Diagnostic::at(path, &text, pos.map(|p| p..p), why));
        }
        if let Some(why) = profile.geo.as_ref().and_then(Geo::problem) {
            let pos = text.find("geo");
            return Err(Diagnostic::at(path, &text, pos.map(|p| p..p), why));
        }
        if let Some(why) = profile.screen.misfit(profile.viewport) {
            let pos = text.find("screen").or_else(|| text.find("viewport"));
            return Err(Diagnostic::at(path, &text, pos.map(|p| p..p), why));
        }
        Ok(profile)
    }
}

/// The operating system this build runs on, as a profile's platform.
pub fn machine_platform() -> Platform {
    if cfg!(target_os = "macos") {
        Platform::MacOS
    } else if cfg!(target_os = "windows") {
        Platform::Windows
    } else {
        Platform::Linux
    }
}

fn os_name(p: Platform) -> &'static str {
    match p {
        Platform::MacOS => "macOS",
        Platform::Windows => "Windows",
        _ => "Linux",
    }
}

fn platform_key(p: Platform) -> &'static str {
    match p {
        Platform::MacOS => "macos",
        Platform::Windows => "windows",
        _ => "linux",
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
    let files = toml_files(dir);
    // The built-in default stands in only where no default.toml is: one
    // that does not load is its problem, never silently replaced.
    let own_default = files
        .iter()
        .any(|p| p.file_stem().is_some_and(|s| s == "default"));
    for path in files {
        match Profile::load(&path) {
            Ok(p) => {
                profiles.insert(p.name.clone(), p);
            }
            Err(d) => problems.push(d),
        }
    }
    if !own_default {
        profiles
            .entry("default".to_string())
            .or_insert_with(Profile::builtin_default);
    }
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
    fn a_window_larger_than_its_screen_is_refused_at_load() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("big.toml");
        std::fs::write(
            &path,
            "emulation = \"chrome_149\"\nviewport = { width = 1600, height = 900 }\nscreen = { width = 1440, height = 900 }\n",
        )
        .expect("write");
        let e = Profile::load(&path).expect_err("does not fit").to_string();
        assert!(e.contains("big.toml") && e.contains("1600x900"), "{e}");
        std::fs::write(
            &path,
            "emulation = \"chrome_149\"\nviewport = { width = 1600, height = 900 }\nscreen = { width = 2560, height = 1440, taskbar = 48 }\n",
        )
        .expect("write");
        let p = Profile::load(&path).expect("fits");
        assert_eq!((p.screen.width, p.screen.avail_height()), (2560, 1392));
        assert_eq!(p.pointer(), Pointer::Fine);
        assert_eq!(Profile::builtin_default().screen, Screen::DESKTOP);
    }

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
        let readme = include_str!("../../../profiles/README.md");
        for name in EmulationName::all_names() {
            assert!(
                readme.contains(&format!("`{name}`")),
                "profiles/README.md misses `{name}`"
            );
        }
    }

    #[test]
    fn following_the_browser_rewrites_the_version_unless_pinned() {
        let mut p = Profile::builtin_default();
        assert_eq!(p.user_agent_major(), Some(149));
        assert_eq!(p.emulation_major(), Some(149));
        assert!(p.follow_browser(156));
        assert!(
            p.user_agent.contains("Chrome/156.0.0.0 "),
            "{}",
            p.user_agent
        );
        assert!(!p.user_agent.contains("149"), "{}", p.user_agent);
        let hints = p.sec_ch_ua.clone().unwrap_or_default();
        assert!(hints.contains("\"Chromium\";v=\"156\""), "{hints}");
        assert!(!hints.contains("149"), "{hints}");
        assert_eq!(
            brands_with_major(r#""Google Chrome";v="149", "Not)A;Brand";v="24""#, 156),
            r#""Google Chrome";v="156", "Not)A;Brand";v="24""#
        );
        assert!(!p.follow_browser(156), "nothing left to change");
        p.user_agent_pinned = true;
        assert!(!p.follow_browser(157), "a pinned user agent stays");
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
