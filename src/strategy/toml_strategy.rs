//! A strategy loaded from a TOML file (`file.rs` loads it), and how it
//! answers the [`Strategy`] interface.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::locale::Locale;
use super::operation::Operation;
use super::{LoginRules, Markers, Politeness, Strategy, locale, operation};

/// A strategy loaded from a TOML file: the declarative implementation of
/// [`Strategy`].
#[derive(Debug, Clone)]
pub struct TomlStrategy {
    pub name: String,
    /// Host patterns: exact (`shop.example`) or wildcard (`*.shop.example`).
    pub hosts: Vec<String>,
    pub warmup_url: Option<url::Url>,
    /// Domain whose cookies belong to this strategy (default: the first exact host).
    pub cookie_domain: String,
    pub politeness: Politeness,
    pub markers: Markers,
    /// `[session]`: how to tell a signed-in identity.
    pub login: Option<LoginRules>,
    /// `[handoff]`: what calls a person instead of failing the call.
    pub handoff: Option<super::Handoff>,
    /// `robots = true`: the site's robots.txt applies to its requests.
    pub robots: bool,
    /// `{base_url}` in operation templates.
    pub base_url: Option<String>,
    pub operations: BTreeMap<String, operation::Operation>,
    /// How the site writes numbers and dates.
    pub locale: locale::Locale,
    pub source: Option<PathBuf>,
    /// The strategy file's name (a marketplace's strategy is `NAME@MARKET`).
    pub family: String,
    /// This strategy's marketplace, when the file has several.
    pub marketplace: Option<String>,
    /// Every marketplace of the file, the default first.
    pub marketplaces: Vec<String>,
    /// The default marketplace's: the others, each a strategy.
    pub variants: Vec<std::sync::Arc<dyn Strategy>>,
}

impl Strategy for TomlStrategy {
    fn name(&self) -> &str {
        &self.name
    }
    fn hosts(&self) -> &[String] {
        &self.hosts
    }
    fn warmup_url(&self) -> Option<&url::Url> {
        self.warmup_url.as_ref()
    }
    fn cookie_domain(&self) -> &str {
        &self.cookie_domain
    }
    fn base_url(&self) -> Option<&str> {
        self.base_url.as_deref()
    }
    fn politeness(&self) -> &Politeness {
        &self.politeness
    }
    fn markers(&self) -> &Markers {
        &self.markers
    }
    fn operations(&self) -> &BTreeMap<String, Operation> {
        &self.operations
    }
    fn login(&self) -> Option<&LoginRules> {
        self.login.as_ref()
    }
    fn handoff(&self) -> Option<&super::Handoff> {
        self.handoff.as_ref()
    }
    fn obeys_robots(&self) -> bool {
        self.robots
    }
    fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }
    fn locale(&self) -> &Locale {
        &self.locale
    }
    fn family(&self) -> &str {
        &self.family
    }
    fn marketplace(&self) -> Option<&str> {
        self.marketplace.as_deref()
    }
    fn marketplaces(&self) -> &[String] {
        &self.marketplaces
    }
    fn variants(&self) -> &[std::sync::Arc<dyn Strategy>] {
        &self.variants
    }
}
