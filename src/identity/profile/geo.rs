//! Where a profile's proxy puts it: `geo = { timezone, locale, country }`,
//! declared by whoever knows the proxy. The browser follows its time zone
//! when the profile sets none; `idpool doctor` warns when the profile's own
//! time zone or languages disagree with it (a Berlin exit with a New York
//! clock and English only is a tell).

use serde::Deserialize;

/// The proxy's geography, as the profile declares it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geo {
    /// An IANA zone: `Europe/Berlin`.
    #[serde(default)]
    pub timezone: Option<String>,
    /// A BCP 47 tag: `de-DE`.
    #[serde(default)]
    pub locale: Option<String>,
    /// ISO 3166-1 alpha-2: `DE`.
    #[serde(default)]
    pub country: Option<String>,
}

impl Geo {
    /// What is malformed in the declaration itself.
    pub fn problem(&self) -> Option<String> {
        if let Some(tz) = &self.timezone
            && !(tz == "UTC" || tz.contains('/'))
        {
            return Some(format!(
                "geo.timezone `{tz}` is not an IANA zone such as `Europe/Berlin`"
            ));
        }
        if let Some(c) = &self.country
            && !(c.len() == 2 && c.chars().all(|c| c.is_ascii_uppercase()))
        {
            return Some(format!(
                "geo.country `{c}` is not a two-letter code such as `DE`"
            ));
        }
        if let Some(l) = &self.locale
            && (l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        {
            return Some(format!(
                "geo.locale `{l}` is not a language tag such as `de-DE`"
            ));
        }
        None
    }

    /// How a browser with time zone `timezone` and languages `languages`
    /// (in order) disagrees with this geography; empty when it does not.
    pub fn disagreements(&self, timezone: Option<&str>, languages: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(want) = &self.timezone {
            match timezone {
                Some(tz) if tz == want => {}
                Some(tz) => out.push(format!("time zone {tz}, the proxy's is {want}")),
                None => out.push(format!(
                    "no time zone (the machine's is used), the proxy's is {want}"
                )),
            }
        }
        let lang = |tag: &str| tag.split('-').next().unwrap_or("").to_ascii_lowercase();
        let region = |tag: &str| tag.split('-').nth(1).map(str::to_ascii_uppercase);
        if let Some(locale) = &self.locale
            && !languages.iter().any(|l| lang(l) == lang(locale))
        {
            out.push(format!(
                "languages {} lack the proxy's {locale}",
                languages.join(",")
            ));
        }
        if let Some(country) = &self.country
            && let Some(first) = languages.first()
            && region(first).is_some_and(|r| &r != country)
            && self
                .locale
                .as_deref()
                .is_none_or(|l| lang(l) != lang(first))
        {
            out.push(format!(
                "first language {first} is of another country than the proxy's {country}"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn berlin() -> Geo {
        Geo {
            timezone: Some("Europe/Berlin".into()),
            locale: Some("de-DE".into()),
            country: Some("DE".into()),
        }
    }

    fn langs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_browser_that_lives_where_its_proxy_is_agrees() {
        let g = berlin();
        assert!(g.problem().is_none());
        assert!(
            g.disagreements(Some("Europe/Berlin"), &langs(&["de-DE", "de", "en"]))
                .is_empty()
        );
    }

    #[test]
    fn a_new_york_clock_behind_a_berlin_exit_is_named() {
        let d = berlin().disagreements(Some("America/New_York"), &langs(&["en-US", "en"]));
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("America/New_York"), "{d:?}");
        assert!(d[1].contains("lack the proxy's de-DE"), "{d:?}");
        assert!(d[2].contains("en-US"), "{d:?}");
        let d = berlin().disagreements(None, &langs(&["de-DE"]));
        assert_eq!(
            d,
            ["no time zone (the machine's is used), the proxy's is Europe/Berlin"]
        );
    }

    #[test]
    fn malformed_declarations_are_named() {
        let bad = |g: Geo| g.problem().unwrap_or_default();
        assert!(
            bad(Geo {
                timezone: Some("CET+1".into()),
                ..Geo::default()
            })
            .contains("IANA")
        );
        assert!(
            bad(Geo {
                country: Some("Germany".into()),
                ..Geo::default()
            })
            .contains("two-letter")
        );
        assert!(
            bad(Geo {
                locale: Some("de DE".into()),
                ..Geo::default()
            })
            .contains("language tag")
        );
    }
}
