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

/// Time zones, each with its share of the people.
type Zones = &'static [(&'static str, u32)];

/// A country's language (its most spoken, as a browser's first language
/// would be) and its time zones with the share of its people in each, for
/// the countries proxies are most often bought in.
const COUNTRIES: &[(&str, &str, Zones)] = &[
    (
        "US",
        "en-US",
        &[
            ("America/New_York", 47),
            ("America/Chicago", 29),
            ("America/Denver", 7),
            ("America/Phoenix", 2),
            ("America/Los_Angeles", 15),
        ],
    ),
    (
        "CA",
        "en-CA",
        &[
            ("America/Toronto", 60),
            ("America/Vancouver", 14),
            ("America/Edmonton", 12),
            ("America/Winnipeg", 6),
            ("America/Halifax", 8),
        ],
    ),
    ("GB", "en-GB", &[("Europe/London", 1)]),
    ("IE", "en-IE", &[("Europe/Dublin", 1)]),
    (
        "AU",
        "en-AU",
        &[
            ("Australia/Sydney", 45),
            ("Australia/Melbourne", 30),
            ("Australia/Brisbane", 15),
            ("Australia/Perth", 10),
        ],
    ),
    ("NZ", "en-NZ", &[("Pacific/Auckland", 1)]),
    ("IN", "en-IN", &[("Asia/Kolkata", 1)]),
    ("DE", "de-DE", &[("Europe/Berlin", 1)]),
    ("AT", "de-AT", &[("Europe/Vienna", 1)]),
    ("CH", "de-CH", &[("Europe/Zurich", 1)]),
    ("FR", "fr-FR", &[("Europe/Paris", 1)]),
    ("BE", "nl-BE", &[("Europe/Brussels", 1)]),
    ("NL", "nl-NL", &[("Europe/Amsterdam", 1)]),
    ("ES", "es-ES", &[("Europe/Madrid", 1)]),
    ("IT", "it-IT", &[("Europe/Rome", 1)]),
    ("PT", "pt-PT", &[("Europe/Lisbon", 1)]),
    ("PL", "pl-PL", &[("Europe/Warsaw", 1)]),
    ("SE", "sv-SE", &[("Europe/Stockholm", 1)]),
    ("DK", "da-DK", &[("Europe/Copenhagen", 1)]),
    ("NO", "nb-NO", &[("Europe/Oslo", 1)]),
    ("FI", "fi-FI", &[("Europe/Helsinki", 1)]),
    ("CZ", "cs-CZ", &[("Europe/Prague", 1)]),
    ("TR", "tr-TR", &[("Europe/Istanbul", 1)]),
    ("JP", "ja-JP", &[("Asia/Tokyo", 1)]),
    ("KR", "ko-KR", &[("Asia/Seoul", 1)]),
    ("SG", "en-SG", &[("Asia/Singapore", 1)]),
    (
        "BR",
        "pt-BR",
        &[
            ("America/Sao_Paulo", 85),
            ("America/Manaus", 8),
            ("America/Fortaleza", 7),
        ],
    ),
    (
        "MX",
        "es-MX",
        &[
            ("America/Mexico_City", 80),
            ("America/Monterrey", 12),
            ("America/Tijuana", 8),
        ],
    ),
];

/// The language a browser in `country` (two capital letters) has first.
pub fn country_locale(country: &str) -> Option<&'static str> {
    COUNTRIES
        .iter()
        .find(|(c, ..)| *c == country)
        .map(|(_, l, _)| *l)
}

/// `country`'s time zones, each with its share of the people.
pub fn country_zones(country: &str) -> &'static [(&'static str, u32)] {
    COUNTRIES
        .iter()
        .find(|(c, ..)| *c == country)
        .map_or(&[], |(.., z)| z)
}

impl Geo {
    /// The languages a browser here has, as an Accept-Language list: the
    /// declared locale, else the country's; then its bare language; then
    /// English (`de-DE,de;q=0.9,en;q=0.8`). `None` when neither is known.
    pub fn languages(&self) -> Option<String> {
        let locale = self
            .locale
            .as_deref()
            .or_else(|| self.country.as_deref().and_then(country_locale))?;
        let lang = locale.split('-').next().unwrap_or(locale);
        let mut tags = vec![locale.to_string()];
        if lang != locale {
            tags.push(lang.to_string());
        }
        if lang != "en" {
            tags.push("en".into());
        }
        Some(tags.join(","))
    }

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
