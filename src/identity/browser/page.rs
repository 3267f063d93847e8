//! One browser operation on a tab: identity overrides, cookie sync with the slot's
//! jar, navigation with the main document's real status (from CDP Network events),
//! waiting for a selector or for a challenge to pass.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::emulation::{
    SetUserAgentOverrideParams, UserAgentBrandVersion, UserAgentMetadata,
};
use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, CookieSameSite, SetCookiesParams, TimeSinceEpoch,
};
use chromiumoxide::{Browser, Page};

use crate::error::{Error, ErrorKind, Result};
use crate::identity::jar::PortableCookie;

/// What the browser must claim to be: the slot's HTTP identity.
#[derive(Debug, Clone)]
pub struct Identity {
    pub user_agent: String,
    /// `navigator.platform`.
    pub navigator_platform: String,
    /// UA client hints (`sec-ch-ua` brands, platform, mobile); `None` for browsers
    /// that send none (Firefox, Safari).
    pub hints: Option<ClientHints>,
    /// A touch screen's points (`navigator.maxTouchPoints`, touch events):
    /// 0 on a desktop, where the pointer is a mouse.
    pub touch_points: u32,
}

#[derive(Debug, Clone)]
pub struct ClientHints {
    pub brands: Vec<(String, String)>,
    pub platform: String,
    pub mobile: bool,
}

/// Parse a `sec-ch-ua` value: `"Google Chrome";v="149", "Chromium";v="149", "Not)A;Brand";v="24"`.
pub fn parse_sec_ch_ua(value: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find("\";v=\"") else {
            break;
        };
        let brand = &after[..end];
        let vstart = &after[end + 5..];
        let Some(vend) = vstart.find('"') else {
            break;
        };
        out.push((brand.to_string(), vstart[..vend].to_string()));
        rest = &vstart[vend + 1..];
    }
    out
}

/// The running Chromium's full version (`156.0.8078.114`), as DevTools
/// reports it.
async fn full_version(page: &Page) -> Result<String> {
    let v = page
        .execute(chromiumoxide::cdp::browser_protocol::browser::GetVersionParams::default())
        .await
        .map_err(cdp("read Chromium's version"))?;
    Ok(v.result
        .product
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Each brand at its full version: the real brands at the running
/// Chromium's (`156.0.8078.114`), the GREASE brand at `<v>.0.0.0`, as
/// Chrome answers `fullVersionList`.
fn full_version_list(brands: &[(String, String)], full: &str) -> Vec<UserAgentBrandVersion> {
    let major = full.split('.').next().unwrap_or_default();
    brands
        .iter()
        .map(|(b, v)| {
            let version = if v == major && !full.is_empty() {
                full.to_string()
            } else {
                format!("{v}.0.0.0")
            };
            UserAgentBrandVersion::new(b.clone(), version)
        })
        .collect()
}

/// `navigator.userAgentData.platformVersion` of a current release of the
/// platform (Windows 11 24H2 reports 19.0.0).
fn platform_version(platform: &str) -> &'static str {
    match platform {
        "Windows" => "19.0.0",
        "macOS" => "15.5.0",
        "Android" => "15.0.0",
        "iOS" => "18.5.0",
        _ => "6.8.0",
    }
}

/// Make a fresh tab speak with the slot's identity.
pub async fn prepare(page: &Page, id: &Identity) -> Result<()> {
    let full = match &id.hints {
        Some(_) => full_version(page).await?,
        None => String::new(),
    };
    let metadata = id.hints.as_ref().map(|h| UserAgentMetadata {
        brands: Some(
            h.brands
                .iter()
                .map(|(b, v)| UserAgentBrandVersion::new(b.clone(), v.clone()))
                .collect(),
        ),
        full_version_list: Some(full_version_list(&h.brands, &full)),
        platform: h.platform.clone(),
        platform_version: platform_version(&h.platform).into(),
        architecture: if h.mobile { "arm".into() } else { "x86".into() },
        model: String::new(),
        mobile: h.mobile,
        bitness: Some("64".into()),
        wow64: Some(false),
        form_factors: Some(vec![if h.mobile { "Mobile" } else { "Desktop" }.into()]),
    });
    let params = SetUserAgentOverrideParams {
        user_agent: id.user_agent.clone(),
        // Chromium makes Accept-Language itself, from `--accept-lang`: set
        // here, it would move to another place among the headers.
        accept_language: None,
        platform: Some(id.navigator_platform.clone()),
        user_agent_metadata: metadata,
    };
    page.execute(UserAgentOverride::new(params, &full))
        .await
        .map_err(cdp("set the user agent"))?;
    if id.touch_points > 0 {
        let touch =
            chromiumoxide::cdp::browser_protocol::emulation::SetTouchEmulationEnabledParams {
                enabled: true,
                max_touch_points: Some(i64::from(id.touch_points)),
            };
        page.execute(touch)
            .await
            .map_err(cdp("give the tab its touch screen"))?;
    }
    Ok(())
}

/// `Emulation.setUserAgentOverride` with the metadata's `fullVersion`,
/// which chromiumoxide's type leaves out (deprecated in the protocol, yet
/// what `uaFullVersion` answers: "" without it, where a real Chrome always
/// has one).
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
struct UserAgentOverride(serde_json::Value);

impl UserAgentOverride {
    fn new(params: SetUserAgentOverrideParams, full: &str) -> Self {
        let mut v = serde_json::to_value(params).unwrap_or_default();
        if let Some(m) = v
            .get_mut("userAgentMetadata")
            .and_then(|m| m.as_object_mut())
            && !full.is_empty()
        {
            m.insert("fullVersion".into(), full.into());
        }
        UserAgentOverride(v)
    }
}

impl chromiumoxide::types::Method for UserAgentOverride {
    fn identifier(&self) -> chromiumoxide::types::MethodId {
        "Emulation.setUserAgentOverride".into()
    }
}

impl chromiumoxide::types::Command for UserAgentOverride {
    type Response = chromiumoxide::cdp::browser_protocol::emulation::SetUserAgentOverrideReturns;
}

/// Put the jar's cookies for the strategy's domain into the browser.
pub async fn push_cookies(page: &Page, cookies: &[PortableCookie]) -> Result<()> {
    if cookies.is_empty() {
        return Ok(());
    }
    let params: Vec<CookieParam> = cookies
        .iter()
        .map(|c| {
            let mut p = CookieParam::new(c.name.clone(), c.value.clone());
            if c.host_only {
                let scheme = if c.secure { "https" } else { "http" };
                p.url = Some(format!("{scheme}://{}{}", c.domain, c.path));
            } else {
                p.domain = Some(format!(".{}", c.domain));
            }
            p.path = Some(c.path.clone());
            p.secure = Some(c.secure);
            p.http_only = Some(c.http_only);
            p.expires = c.expires.map(|e| TimeSinceEpoch::new(e as f64));
            p.same_site = match c.same_site.as_deref() {
                Some("Strict") => Some(CookieSameSite::Strict),
                Some("Lax") => Some(CookieSameSite::Lax),
                Some("None") => Some(CookieSameSite::None),
                _ => None,
            };
            p
        })
        .collect();
    page.execute(SetCookiesParams::new(params))
        .await
        .map_err(cdp("set cookies"))?;
    Ok(())
}

/// The browser's cookies that belong to `domain` (or its subdomains / parents).
pub async fn pull_cookies(browser: &Browser, domain: &str) -> Result<Vec<PortableCookie>> {
    let domain = domain.trim_start_matches('.').to_ascii_lowercase();
    let all = browser.get_cookies().await.map_err(cdp("read cookies"))?;
    Ok(all
        .into_iter()
        .filter_map(|c| {
            let host_only = !c.domain.starts_with('.');
            let d = c.domain.trim_start_matches('.').to_ascii_lowercase();
            crate::identity::jar::domains_related(&d, &domain).then(|| PortableCookie {
                name: c.name,
                value: c.value,
                domain: d,
                host_only,
                path: c.path,
                secure: c.secure,
                http_only: c.http_only,
                expires: (!c.session && c.expires > 0.0).then_some(c.expires as i64),
                same_site: c.same_site.map(|s| s.as_ref().to_string()),
            })
        })
        .collect())
}

/// What one browser navigation produced.
#[derive(Debug, Clone)]
pub struct PageResult {
    /// HTTP status of the final main document.
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub final_url: String,
    pub html: String,
    /// The page's length (UTF-16 units) when it was longer than the limit
    /// and `html` holds only its start.
    pub cut_from: Option<usize>,
    /// The `wait_for` selector appeared (always true without one).
    pub wait_for_met: bool,
    /// The page was still a challenge when we stopped waiting.
    pub challenge_left: bool,
    pub elapsed: Duration,
    /// The browser's cookies for the strategy's cookie domain after the page
    /// (already saved into the slot's jar).
    pub cookies: Vec<PortableCookie>,
    /// The screenshot and PDF asked for.
    pub captured: crate::request::Captured,
}

pub use crate::dom::PageState;

/// Judges a page from its HTML, URL and the main document's HTTP status.
pub type Probe<'a> = dyn Fn(&str, &str, u16) -> PageState + Send + Sync + 'a;

/// The page's HTML, measured in the page first: at most `limit` UTF-16
/// units cross CDP (a script can build a page of any size; what is over
/// the limit never leaves the browser). The page's own length when it was
/// cut.
pub async fn content(page: &Page, limit: usize) -> Result<(String, Option<usize>)> {
    #[derive(serde::Deserialize)]
    struct Html {
        html: String,
        len: usize,
    }
    let js = format!(
        "(() => {{ let h = ''; if (document.doctype) {{ h = new XMLSerializer().serializeToString(document.doctype); }} \
         if (document.documentElement) {{ h += document.documentElement.outerHTML; }} \
         return {{ html: h.length > {limit} ? h.slice(0, {limit}) : h, len: h.length }}; }})()"
    );
    let r = super::world::eval(page, js)
        .await
        .map_err(cdp("read the page"))?;
    let h: Html = r.into_value().map_err(|e| {
        Error::new(
            ErrorKind::Network,
            "browser: the page's HTML did not come back",
        )
        .with_source(e)
    })?;
    crate::dom::offload::read_page(h.html.len());
    Ok((h.html, (h.len > limit).then_some(h.len)))
}

/// Map a CDP failure to a network error that names what we were doing.
pub fn cdp(what: &'static str) -> impl Fn(chromiumoxide::error::CdpError) -> Error {
    move |e| Error::new(ErrorKind::Network, format!("browser: cannot {what}")).with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_version_list_has_each_brand_at_its_full_version() {
        let brands = parse_sec_ch_ua(
            "\"Google Chrome\";v=\"156\", \"Chromium\";v=\"156\", \"Not)A;Brand\";v=\"24\"",
        );
        let list: Vec<(String, String)> = full_version_list(&brands, "156.0.8078.114")
            .into_iter()
            .map(|b| (b.brand, b.version))
            .collect();
        assert_eq!(
            list,
            [
                ("Google Chrome".into(), "156.0.8078.114".into()),
                ("Chromium".into(), "156.0.8078.114".into()),
                ("Not)A;Brand".into(), "24.0.0.0".into()),
            ]
        );
    }

    #[test]
    fn sec_ch_ua_brands() {
        let b =
            parse_sec_ch_ua(r#""Google Chrome";v="149", "Chromium";v="149", "Not)A;Brand";v="24""#);
        assert_eq!(
            b,
            vec![
                ("Google Chrome".to_string(), "149".to_string()),
                ("Chromium".to_string(), "149".to_string()),
                ("Not)A;Brand".to_string(), "24".to_string())
            ]
        );
        assert!(parse_sec_ch_ua("").is_empty());
        assert!(parse_sec_ch_ua("\"broken").is_empty());
    }
}
