//! Marketplaces: one strategy serving several storefronts of one site
//! (amazon.com, amazon.de, ...), each with its own hosts, base URL, cookie
//! domain, warm-up page, locale and sign-in pages.
//!
//! ```toml
//! marketplace = "amazon.com"            # the default: the top-level keys are its
//! [marketplaces."amazon.de"]
//! locale = "de-DE"                      # every other key has a default from the name:
//! # hosts = ["www.amazon.de", "amazon.de"], base_url = "https://www.amazon.de",
//! # cookie_domain = "amazon.de", warmup_url = base_url + "/"
//! ```
//!
//! Each marketplace becomes a strategy of its own named `NAME@MARKET`
//! (`amazon@amazon.de`), so everything the pool keeps per strategy (breakers,
//! budgets, tier memory, login states, drift, metrics) is kept per
//! marketplace; the default marketplace keeps the strategy's own name. Every
//! operation gets a `marketplace` parameter naming them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use toml::Spanned;

use super::locale::LocaleFile;
use super::operation::{Param, ParamKind};
use super::{Strategy, TomlStrategy};
use crate::diag::Diagnostic;
use crate::wire::http::host_matches;

/// `[marketplaces.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MarketFile {
    #[serde(default)]
    hosts: Option<Vec<String>>,
    #[serde(default)]
    base_url: Option<Spanned<String>>,
    #[serde(default)]
    cookie_domain: Option<String>,
    #[serde(default)]
    warmup_url: Option<Spanned<String>>,
    #[serde(default)]
    locale: Option<Spanned<LocaleFile>>,
    /// `[session].login_url` for this marketplace (`{base_url}` is its own).
    #[serde(default)]
    login_url: Option<Spanned<String>>,
    #[serde(default)]
    probe_url: Option<Spanned<String>>,
}

/// The name a marketplace's strategy has.
pub fn variant_name(family: &str, market: &str) -> String {
    format!("{family}@{market}")
}

/// What building the marketplaces needs of the file.
pub(super) struct Src<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
    pub(super) session: Option<&'a super::login::LoginFile>,
}

impl Src<'_> {
    fn at(&self, span: std::ops::Range<usize>, msg: String) -> Diagnostic {
        Diagnostic::at(self.path, self.text, Some(span), msg)
    }

    fn at_table(&self, market: &str, msg: String) -> Diagnostic {
        let pos = self
            .text
            .find(&format!("[marketplaces.\"{market}\"]"))
            .or_else(|| self.text.find(&format!("[marketplaces.{market}]")))
            .unwrap_or(0);
        self.at(pos..pos, msg)
    }
}

/// The file's `marketplace` and `[marketplaces.*]`, if any, on `base`.
pub(super) fn attach(
    base: &mut TomlStrategy,
    default: Option<&Spanned<String>>,
    markets: &BTreeMap<String, MarketFile>,
    src: &Src<'_>,
) -> Result<(), Diagnostic> {
    match default {
        Some(d) => build(base, d, markets, src),
        None if markets.is_empty() => Ok(()),
        None => {
            let pos = src.text.find("[marketplaces").unwrap_or(0);
            Err(src.at(
                pos..pos,
                "[marketplaces.*] needs `marketplace`, the name of the default marketplace (whose keys are the strategy's own)".into(),
            ))
        }
    }
}

/// Give `base` (the default marketplace, `default`) its marketplaces:
/// each other one a strategy of its own, and every operation a
/// `marketplace` parameter.
fn build(
    base: &mut TomlStrategy,
    default: &Spanned<String>,
    markets: &BTreeMap<String, MarketFile>,
    src: &Src<'_>,
) -> Result<(), Diagnostic> {
    let own = default.get_ref().trim().to_ascii_lowercase();
    if markets.contains_key(&own) {
        return Err(src.at(
            default.span(),
            format!("marketplace `{own}` is the default: its keys are the strategy's own, not a [marketplaces.\"{own}\"] table"),
        ));
    }
    let mut names = vec![own.clone()];
    names.extend(markets.keys().cloned());
    base.family = base.name.clone();
    base.marketplace = Some(own.clone());
    base.marketplaces = names.clone();
    let mut variants: Vec<Arc<dyn Strategy>> = Vec::new();
    for (market, m) in markets {
        let v = variant(base, market, m, src)?;
        variants.push(Arc::new(v));
    }
    add_param(base, &names, &own);
    base.variants = variants;
    Ok(())
}

fn variant(
    base: &TomlStrategy,
    market: &str,
    m: &MarketFile,
    src: &Src<'_>,
) -> Result<TomlStrategy, Diagnostic> {
    let bad = |msg: String| src.at_table(market, format!("marketplaces.\"{market}\": {msg}"));
    if market.is_empty() || market.contains(['/', ' ', '@', ':']) {
        return Err(bad(
            "a marketplace is named by its host (`amazon.de`)".into()
        ));
    }
    let hosts: Vec<String> = match &m.hosts {
        Some(h) if h.is_empty() => return Err(bad("hosts must list at least one host".into())),
        Some(h) => h.iter().map(|h| h.trim().to_ascii_lowercase()).collect(),
        None => vec![format!("www.{market}"), market.to_string()],
    };
    for h in &hosts {
        super::host::validate_host_pattern(h).map_err(&bad)?;
    }
    let url = |field: &str, given: &Option<Spanned<String>>, default: String| {
        let raw = given.as_ref().map_or(default, |g| g.get_ref().clone());
        let u =
            url::Url::parse(&raw).map_err(|e| bad(format!("{field} is not a valid URL ({e})")))?;
        if !matches!(u.scheme(), "http" | "https")
            || !u.host_str().is_some_and(|h| host_matches(&hosts, h))
        {
            return Err(bad(format!(
                "{field} `{raw}` is not an http(s) URL on this marketplace's hosts"
            )));
        }
        Ok(u)
    };
    let base_url = url("base_url", &m.base_url, format!("https://www.{market}"))?;
    let base_str = base_url.as_str().trim_end_matches('/').to_string();
    let warmup = url("warmup_url", &m.warmup_url, format!("{base_str}/"))?;
    let locale = match &m.locale {
        Some(l) => l.get_ref().compile().map_err(|e| src.at(l.span(), e))?,
        None => base.locale.clone(),
    };
    let mut login = match src.session {
        Some(s) => Some(s.compile(src.path, src.text, &hosts, Some(&base_str))?),
        None => None,
    };
    if let Some(rules) = &mut login {
        let fill = |u: &Spanned<String>| u.get_ref().replace("{base_url}", &base_str);
        if let Some(u) = &m.login_url {
            rules.login_url = Some(url(
                "login_url",
                &Some(Spanned::new(u.span(), fill(u))),
                String::new(),
            )?);
        }
        if let Some(u) = &m.probe_url {
            rules.probe_url = Some(url(
                "probe_url",
                &Some(Spanned::new(u.span(), fill(u))),
                String::new(),
            )?);
        }
    }
    let mut v = base.clone();
    v.name = variant_name(&base.name, market);
    v.family = base.name.clone();
    v.marketplace = Some(market.to_string());
    v.hosts = hosts;
    v.base_url = Some(base_str);
    v.warmup_url = Some(warmup);
    v.cookie_domain = m
        .cookie_domain
        .clone()
        .unwrap_or_else(|| market.to_string());
    v.locale = locale;
    v.login = login;
    v.variants = Vec::new();
    add_param(&mut v, &base.marketplaces, market);
    Ok(v)
}

/// Every operation takes `marketplace`, this strategy's by default.
fn add_param(s: &mut TomlStrategy, names: &[String], own: &str) {
    for op in s.operations.values_mut() {
        op.params.retain(|p| p.name != "marketplace");
        op.params.push(Param {
            name: "marketplace".into(),
            kind: ParamKind::Enum,
            required: false,
            default: Some(json!(own)),
            description: format!("The marketplace ({})", names.join(", ")),
            values: names.to_vec(),
            minimum: None,
            maximum: None,
            parts: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::strategy::{Registry, TomlStrategy};
    use std::path::Path;
    use std::sync::Arc;

    const FILE: &str = "name = \"shop\"\nhosts = [\"www.shop.test\"]\nbase_url = \"https://www.shop.test\"\n\
        marketplace = \"shop.test\"\nlocale = \"en-US\"\n\
        [session]\nlogin_url = \"{base_url}/signin\"\n[session.logged_in]\nselector = \"#me\"\n\
        [marketplaces.\"shop.de\"]\nlocale = \"de-DE\"\n\
        [marketplaces.\"shop.fr\"]\nhosts = [\"boutique.shop.fr\"]\nbase_url = \"https://boutique.shop.fr\"\ncookie_domain = \"shop.fr\"\nlocale = \"fr-FR\"\n\
        [operations.p]\n[operations.p.params.item]\ntype = \"string\"\n[operations.p.extract]\nitems = \"li\"\n\
        [operations.p.extract.fields]\nt = { css = \"b\" }\n[operations.p.tier2]\nurl = \"{base_url}/p/{item}\"\n";

    #[test]
    fn each_marketplace_is_a_strategy_of_its_own() {
        let s = TomlStrategy::parse(Path::new("s.toml"), FILE).unwrap();
        let mut reg = Registry::default();
        reg.add(Arc::new(s)).unwrap();
        let de = reg.get("shop@shop.de").expect("variant");
        assert_eq!(de.base_url(), Some("https://www.shop.de"));
        assert_eq!(de.cookie_domain(), "shop.de");
        assert_eq!(
            de.warmup_url().map(|u| u.as_str()),
            Some("https://www.shop.de/")
        );
        assert_eq!(de.locale().decimal, ',');
        assert_eq!(de.family(), "shop");
        assert_eq!(
            de.login()
                .and_then(|l| l.login_url.as_ref())
                .map(|u| u.as_str()),
            Some("https://www.shop.de/signin")
        );
        assert_eq!(
            reg.for_host("boutique.shop.fr").map(|s| s.name()),
            Some("shop@shop.fr")
        );
        assert_eq!(
            reg.for_host("www.shop.test").map(|s| s.name()),
            Some("shop")
        );
        assert_eq!(reg.iter().count(), 1, "list the strategy once");
        let p = &de.operations()["p"];
        let m = p.params.iter().find(|p| p.name == "marketplace").unwrap();
        assert_eq!(m.default, Some(serde_json::json!("shop.de")));
        assert_eq!(m.values, ["shop.test", "shop.de", "shop.fr"]);
        assert_eq!(
            reg.pick("shop", Some("shop.fr"), None).unwrap().name(),
            "shop@shop.fr"
        );
        assert_eq!(
            reg.pick("shop", None, Some("https://www.shop.de/p/1"))
                .unwrap()
                .name(),
            "shop@shop.de"
        );
        assert!(
            reg.pick("shop", Some("shop.it"), None)
                .unwrap_err()
                .contains("shop.de")
        );
        assert!(
            reg.pick("shop", Some("shop.fr"), Some("https://www.shop.de/p/1"))
                .is_err()
        );
    }

    #[test]
    fn bad_marketplaces_name_the_table() {
        let bad = FILE.replace(
            "[marketplaces.\"shop.de\"]\nlocale = \"de-DE\"",
            "[marketplaces.\"shop.de\"]\nbase_url = \"https://elsewhere.test\"",
        );
        let e = TomlStrategy::parse(Path::new("s.toml"), &bad).unwrap_err();
        assert!(
            e.message.contains("marketplaces.\"shop.de\": base_url"),
            "{e}"
        );
        assert_eq!(e.line, Some(10), "{e}");
        let no_default = FILE.replace("marketplace = \"shop.test\"\n", "");
        let e = TomlStrategy::parse(Path::new("s.toml"), &no_default).unwrap_err();
        assert!(e.message.contains("marketplace"), "{e}");
    }
}
