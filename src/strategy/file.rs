//! A strategy file as written, and its loading: the checks that name a
//! line, the markers, the marketplaces and the operations it declares.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::host::validate_host_pattern;
use super::{
    Markers, Politeness, TomlStrategy, handoff, locale, login, markers, market, operation,
};
use crate::diag::{self, Diagnostic};
use crate::wire::http::host_matches;

/// A strategy file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StrategyFile {
    name: Spanned<String>,
    hosts: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    warmup_url: Option<Spanned<String>>,
    #[serde(default)]
    cookie_domain: Option<String>,
    #[serde(default)]
    politeness: Politeness,
    /// How the router treats the site's identities.
    #[serde(default)]
    routing: RoutingFile,
    #[serde(default)]
    block: markers::MarkerFile,
    #[serde(default)]
    tier_block: markers::MarkerFile,
    #[serde(default)]
    rate_limit: markers::MarkerFile,
    #[serde(default)]
    challenge: markers::MarkerFile,
    #[serde(default)]
    empty: markers::MarkerFile,
    /// A login wall: the outcome `login_required`.
    #[serde(default)]
    login: markers::MarkerFile,
    /// How to tell whether an identity is signed in.
    #[serde(default)]
    session: Option<login::LoginFile>,
    /// What calls a person (a captcha, a sign-in wall) instead of failing.
    #[serde(default)]
    handoff: Option<handoff::HandoffFile>,
    /// The site's robots.txt applies to this strategy's requests, as to a
    /// host no strategy covers (a site we have no agreement with).
    #[serde(default)]
    robots: bool,
    /// Prefix of the site's URLs, `{base_url}` in templates (e.g. "https://shop.example").
    #[serde(default)]
    base_url: Option<Spanned<String>>,
    /// How the site writes numbers and dates (`en-US`, `de-DE`, ...).
    #[serde(default)]
    locale: Option<Spanned<locale::LocaleFile>>,
    /// The default marketplace's name, when the strategy has several.
    #[serde(default)]
    marketplace: Option<Spanned<String>>,
    /// The other marketplaces.
    #[serde(default)]
    marketplaces: BTreeMap<String, market::MarketFile>,
    /// Named operations.
    #[serde(default)]
    operations: BTreeMap<String, operation::OperationFile>,
}

/// `[routing]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutingFile {
    /// The site's signed-in identities never share a device fingerprint.
    #[serde(default)]
    distinct_devices: bool,
}

impl TomlStrategy {
    /// Load and validate one strategy file.
    pub fn load(path: &Path) -> Result<Self, Diagnostic> {
        let (file, text): (StrategyFile, String) = diag::read_toml(path)?;
        Self::from_file(path, &text, file)
    }

    /// Parse and validate strategy TOML (`path` is used for messages only).
    pub fn parse(path: &Path, text: &str) -> Result<Self, Diagnostic> {
        let file: StrategyFile = diag::parse_toml(path, text)?;
        Self::from_file(path, text, file)
    }

    fn from_file(path: &Path, text: &str, f: StrategyFile) -> Result<Self, Diagnostic> {
        let err =
            |span: std::ops::Range<usize>, msg: String| Diagnostic::at(path, text, Some(span), msg);
        let name = f.name.get_ref().trim().to_string();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(err(
                f.name.span(),
                format!(
                    "strategy name `{name}` must be non-empty ASCII letters, digits, `-` or `_`"
                ),
            ));
        }
        if f.hosts.get_ref().is_empty() {
            return Err(err(
                f.hosts.span(),
                "hosts must list at least one host".into(),
            ));
        }
        let mut hosts = Vec::new();
        for h in f.hosts.get_ref() {
            let host = h.get_ref().trim().to_ascii_lowercase();
            validate_host_pattern(&host).map_err(|m| err(h.span(), m))?;
            hosts.push(host);
        }
        let warmup_url = f
            .warmup_url
            .as_ref()
            .map(|u| site_url("warmup_url", u, &hosts, &err, true))
            .transpose()?;
        let cookie_domain = f
            .cookie_domain
            .clone()
            .or_else(|| hosts.iter().find(|h| !h.starts_with("*.")).cloned())
            .unwrap_or_else(|| hosts[0].trim_start_matches("*.").to_string());
        if let Some(problem) = f.politeness.problem() {
            let pos = text.find("[politeness]").unwrap_or(0);
            return Err(err(pos..pos, problem.into()));
        }
        let markers = f.markers(path, text)?;
        let base_url = f
            .base_url
            .as_ref()
            .map(|b| {
                site_url("base_url", b, &hosts, &err, false)
                    .map(|_| b.get_ref().trim_end_matches('/').to_string())
            })
            .transpose()?;
        let login = match &f.session {
            Some(l) => Some(l.compile(path, text, &hosts, base_url.as_deref())?),
            None => None,
        };
        let mut operations = BTreeMap::new();
        for (name, op) in f.operations {
            let compiled = op.compile(&name, path, text)?;
            operations.insert(name, compiled);
        }
        login::check_logins(&operations, login.is_some(), path, text)?;
        let handoff = f.handoff.as_ref().map(|h| h.compile(&err)).transpose()?;
        let locale = match &f.locale {
            Some(l) => l.get_ref().compile().map_err(|m| err(l.span(), m))?,
            None => locale::Locale::default(),
        };
        let mut strategy = TomlStrategy {
            family: name.clone(),
            marketplace: None,
            marketplaces: Vec::new(),
            variants: Vec::new(),
            locale,
            name,
            hosts,
            warmup_url,
            cookie_domain,
            politeness: Politeness {
                distinct_devices: f.routing.distinct_devices,
                ..f.politeness
            },
            markers,
            login,
            handoff,
            robots: f.robots,
            base_url,
            operations,
            source: Some(path.to_path_buf()),
        };
        let src = market::Src {
            path,
            text,
            session: f.session.as_ref(),
        };
        market::attach(&mut strategy, f.marketplace.as_ref(), &f.marketplaces, &src)?;
        Ok(strategy)
    }
}

impl StrategyFile {
    /// The marker tables, checked and compiled.
    fn markers(&self, path: &Path, text: &str) -> Result<Markers, Diagnostic> {
        Ok(Markers {
            block: self.block.compile(path, text, "block", &[])?,
            tier_block: self.tier_block.compile(path, text, "tier_block", &[])?,
            rate_limit: self.rate_limit.compile(
                path,
                text,
                "rate_limit",
                markers::RATE_LIMIT_STATUS,
            )?,
            challenge: self.challenge.compile(path, text, "challenge", &[])?,
            empty: self.empty.compile(path, text, "empty", &[])?,
            login: self.login.compile(path, text, "login", &[])?,
        })
    }
}

/// A URL of the strategy's own hosts (`warmup_url`, `base_url`).
fn site_url(
    field: &str,
    u: &Spanned<String>,
    hosts: &[String],
    err: &dyn Fn(std::ops::Range<usize>, String) -> Diagnostic,
    http_only: bool,
) -> Result<url::Url, Diagnostic> {
    let parsed = url::Url::parse(u.get_ref())
        .map_err(|e| err(u.span(), format!("{field} is not a valid URL ({e})")))?;
    if http_only && !matches!(parsed.scheme(), "http" | "https") {
        return Err(err(u.span(), format!("{field} must be http or https")));
    }
    if !parsed.host_str().is_some_and(|h| host_matches(hosts, h)) {
        return Err(err(
            u.span(),
            format!("{field}'s host is not one of this strategy's hosts"),
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_host_names_the_line() {
        let text = "name = \"x\"\nhosts = [\n  \"ok.test\",\n  \"https://bad.test\",\n]\n";
        let d = TomlStrategy::parse(Path::new("s.toml"), text).unwrap_err();
        assert_eq!(d.line, Some(4), "{d}");
        assert!(d.message.contains("https://bad.test"), "{d}");
    }
}
