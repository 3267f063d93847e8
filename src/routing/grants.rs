//! Grants: which identities a key may act as, where, with which tools and
//! until when. A key without grants may use every identity (its role still
//! decides the tools); a key with grants may use an identity for a call
//! only when one of its grants covers the call's tool, the identity and
//! the site. The dispatcher checks the tool and an identity a call names
//! (the one gate); the router skips identities no grant covers, so a call
//! never lands on another identity instead.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One grant. Every part it gives must hold (a grant with `slots` and
/// `signed_in` covers those slots while they are signed in); several
/// grants of one key add up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Identities by slot number (empty: any slot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<usize>,
    /// Identities by a label the operator gave them (`[[pool.slot]]
    /// labels`); any one of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Identities signed in (`logged_in`) on this strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_in: Option<String>,
    /// Strategies the identities may be used on (a marketplace by its own
    /// name, `amazon@amazon.de`, or its strategy's; `web`: every host of
    /// the open web); empty with `hosts` empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strategies: Vec<String>,
    /// Hosts of the open web (`example.com`, `*.example.com`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Tools (empty: every tool the key's role allows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Unix seconds after which the grant no longer holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

/// What the router knows of an identity when it asks a grant.
pub struct Identity<'a> {
    pub slot: usize,
    pub labels: &'a [String],
    /// Whether the identity is signed in on a strategy.
    pub signed_in: &'a dyn Fn(&str) -> bool,
}

/// Where a call goes: its routing key (a strategy, a marketplace, or
/// `web:HOST`) and the host when the call names a URL.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub key: &'a str,
    pub host: Option<&'a str>,
}

impl Grant {
    /// Parse the CLI's form: `slots=1,2;labels=de;signed_in=amazon;
    /// strategies=testshop;hosts=*.example.com;tools=get_reviews,extract;
    /// until=2027-01-01T00:00:00Z` (any subset, `;`-separated; `until` also
    /// as unix seconds).
    pub fn parse(text: &str) -> Result<Grant, String> {
        let mut g = Grant::default();
        let list = |v: &str| -> Vec<String> {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        };
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(format!("grant part `{part}` is not NAME=VALUE"));
            };
            match k.trim() {
                "slots" | "slot" => {
                    g.slots = list(v)
                        .iter()
                        .map(|s| {
                            s.parse()
                                .map_err(|_| format!("grant slots: `{s}` is not a slot number"))
                        })
                        .collect::<Result<_, _>>()?;
                }
                "labels" | "label" => g.labels = list(v),
                "signed_in" => g.signed_in = Some(v.trim().to_string()),
                "strategies" | "strategy" => g.strategies = list(v),
                "hosts" | "host" => g.hosts = list(v),
                "tools" | "tool" => g.tools = list(v),
                "until" => g.until = Some(parse_until(v.trim())?),
                other => {
                    return Err(format!(
                        "grant part `{other}` is none of slots, labels, signed_in, strategies, hosts, tools, until"
                    ));
                }
            }
        }
        if g == Grant::default() {
            return Err("a grant needs at least one part (e.g. `slots=1`)".into());
        }
        Ok(g)
    }

    /// Whether the grant still holds at `now` (unix seconds).
    pub fn live(&self, now: u64) -> bool {
        self.until.is_none_or(|u| now < u)
    }

    pub fn covers_tool(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|t| t == tool)
    }

    /// Whether the grant names identities (else it covers them all).
    pub fn names_identities(&self) -> bool {
        !self.slots.is_empty() || !self.labels.is_empty() || self.signed_in.is_some()
    }

    pub fn covers_identity(&self, who: &Identity<'_>) -> bool {
        (self.slots.is_empty() || self.slots.contains(&who.slot))
            && (self.labels.is_empty() || self.labels.iter().any(|l| who.labels.contains(l)))
            && self.signed_in.as_deref().is_none_or(|s| (who.signed_in)(s))
    }

    /// Whether the grant covers `place` (`None`: a call that names no site,
    /// such as a slot's own upkeep: covered only by a grant naming none).
    pub fn covers_place(&self, place: Option<Place<'_>>) -> bool {
        if self.strategies.is_empty() && self.hosts.is_empty() {
            return true;
        }
        let Some(p) = place else {
            return false;
        };
        let strategy = self.strategies.iter().any(|s| {
            p.key == s
                || p.key
                    .strip_prefix(s.as_str())
                    .is_some_and(|rest| rest.starts_with(['@', ':']))
        });
        let host = p
            .host
            .or_else(|| p.key.strip_prefix("web:"))
            .is_some_and(|h| self.hosts.iter().any(|pat| host_matches(pat, h)));
        strategy || host
    }
}

/// `example.com` matches itself; `*.example.com` its subdomains and itself.
fn host_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(base) => host == base || host.ends_with(&format!(".{base}")),
        None => host == pattern,
    }
}

/// `YYYY-MM-DD`.
fn day(v: &str) -> Option<time::Date> {
    let mut it = v.splitn(3, '-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    time::Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()
}

/// RFC 3339, `YYYY-MM-DD` (midnight UTC) or unix seconds.
fn parse_until(v: &str) -> Result<u64, String> {
    if let Ok(n) = v.parse::<u64>() {
        return Ok(n);
    }
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
        .ok()
        .or_else(|| day(v).map(|d| d.midnight().assume_utc()))
        .ok_or_else(|| {
            format!("grant until: `{v}` is neither RFC 3339, YYYY-MM-DD nor unix seconds")
        })?;
    u64::try_from(t.unix_timestamp()).map_err(|_| format!("grant until: `{v}` is before 1970"))
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let join = |v: &[String]| v.join(",");
        if !self.slots.is_empty() {
            let s: Vec<String> = self.slots.iter().map(usize::to_string).collect();
            parts.push(format!("slots={}", join(&s)));
        }
        if !self.labels.is_empty() {
            parts.push(format!("labels={}", join(&self.labels)));
        }
        if let Some(s) = &self.signed_in {
            parts.push(format!("signed_in={s}"));
        }
        if !self.strategies.is_empty() {
            parts.push(format!("strategies={}", join(&self.strategies)));
        }
        if !self.hosts.is_empty() {
            parts.push(format!("hosts={}", join(&self.hosts)));
        }
        if !self.tools.is_empty() {
            parts.push(format!("tools={}", join(&self.tools)));
        }
        if let Some(u) = self.until {
            parts.push(format!("until={u}"));
        }
        f.write_str(&parts.join(";"))
    }
}

/// A key's grants for one call: whom the router may pick.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The key's name, for the error.
    pub key: String,
    pub tool: String,
    /// The grants that hold now and cover the tool.
    pub grants: Vec<Grant>,
}

impl Scope {
    /// The grants of `key` that hold at `now` for `tool`; `None` when the
    /// key has no grants (it may use every identity).
    pub fn of(key: &str, grants: &[Grant], tool: &str, now: u64) -> Option<Scope> {
        if grants.is_empty() {
            return None;
        }
        Some(Scope {
            key: key.to_string(),
            tool: tool.to_string(),
            grants: grants
                .iter()
                .filter(|g| g.live(now) && g.covers_tool(tool))
                .cloned()
                .collect(),
        })
    }

    /// Whether some grant covers `who` at all (for any site): what of it
    /// the key may see.
    pub fn may_see(&self, who: &Identity<'_>) -> bool {
        self.grants.iter().any(|g| g.covers_identity(who))
    }

    /// Whether the call may use `who` at `place`.
    pub fn permits(&self, who: &Identity<'_>, place: Option<Place<'_>>) -> bool {
        self.grants
            .iter()
            .any(|g| g.covers_identity(who) && g.covers_place(place))
    }
}

/// The routing key whose login state `signed_in = STRATEGY` asks about on
/// a call to `key`: the call's own marketplace (`amazon@amazon.de`) when it
/// is one of that strategy's, else the strategy.
pub fn login_key<'a>(strategy: &'a str, key: Option<&'a str>) -> &'a str {
    match key {
        Some(k) if k.strip_prefix(strategy).is_some_and(|r| r.starts_with('@')) => k,
        _ => strategy,
    }
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who<'a>(
        slot: usize,
        labels: &'a [String],
        signed: &'a dyn Fn(&str) -> bool,
    ) -> Identity<'a> {
        Identity {
            slot,
            labels,
            signed_in: signed,
        }
    }

    #[test]
    fn parses_the_cli_form_and_prints_it_back() {
        let g = Grant::parse("slots=1, 2; tools=get_reviews,extract; until=2027-01-01").unwrap();
        assert_eq!(g.slots, [1, 2]);
        assert_eq!(g.tools, ["get_reviews", "extract"]);
        assert_eq!(g.until, Some(1_798_761_600));
        assert_eq!(
            g.to_string(),
            "slots=1,2;tools=get_reviews,extract;until=1798761600"
        );
        assert_eq!(Grant::parse(&g.to_string()).unwrap(), g);
        let g = Grant::parse("signed_in=testshop;hosts=*.example.com;until=2027-01-01T12:00:00Z")
            .unwrap();
        assert_eq!(g.signed_in.as_deref(), Some("testshop"));
        assert_eq!(g.until, Some(1_798_804_800));
        for (bad, says) in [
            ("slots=one", "`one` is not a slot number"),
            ("colour=red", "`colour` is none of"),
            ("slots", "is not NAME=VALUE"),
            ("", "at least one part"),
            ("until=soon", "`soon` is neither"),
        ] {
            let e = Grant::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn every_part_must_hold_and_grants_add_up() {
        let none: &dyn Fn(&str) -> bool = &|_| false;
        let on_shop: &dyn Fn(&str) -> bool = &|s| s == "testshop";
        let de = vec!["de".to_string()];
        let g = Grant::parse("slots=1;signed_in=testshop").unwrap();
        assert!(g.covers_identity(&who(1, &[], on_shop)));
        assert!(
            !g.covers_identity(&who(1, &[], none)),
            "slot 1 while signed out"
        );
        assert!(!g.covers_identity(&who(0, &[], on_shop)), "slot 0");
        let g = Grant::parse("labels=de,at").unwrap();
        assert!(g.covers_identity(&who(3, &de, none)));
        assert!(!g.covers_identity(&who(3, &[], none)));
        // Places: a strategy, its marketplaces, hosts of the open web.
        let g = Grant::parse("strategies=amazon;hosts=*.example.com").unwrap();
        let at = |key, host| Some(Place { key, host });
        assert!(g.covers_place(at("amazon", None)));
        // A marketplace's key is `amazon@amazon.de`.
        assert!(g.covers_place(at("amazon@amazon.de", None)));
        assert!(!g.covers_place(at("amazonia", None)));
        assert!(!g.covers_place(at("amazon.evil", None)));
        assert!(g.covers_place(at("web:shop.example.com", None)));
        assert!(g.covers_place(at("web:example.com", None)));
        assert!(!g.covers_place(at("web:example.com.evil.test", None)));
        assert!(g.covers_place(at("other", Some("a.example.com"))));
        assert!(!g.covers_place(None));
        assert!(Grant::parse("slots=1").unwrap().covers_place(None));
        // A scope: live grants for the tool only; any one of them.
        let grants = vec![
            Grant::parse("slots=1;tools=get_reviews").unwrap(),
            Grant::parse("slots=2;until=100").unwrap(),
            Grant::parse("slots=3").unwrap(),
        ];
        let s = Scope::of("k", &grants, "get_reviews", 200).unwrap();
        let place = at("testshop", None);
        assert!(s.permits(&who(1, &[], none), place));
        assert!(!s.permits(&who(2, &[], none), place), "expired");
        assert!(s.permits(&who(3, &[], none), place));
        assert!(!s.permits(&who(0, &[], none), place));
        let s = Scope::of("k", &grants, "scrape", 50).unwrap();
        assert!(
            !s.permits(&who(1, &[], none), place),
            "tool not granted there"
        );
        assert!(s.permits(&who(2, &[], none), place), "not expired yet");
        assert!(Scope::of("k", &[], "scrape", 0).is_none());
        assert_eq!(
            login_key("amazon", Some("amazon@amazon.de")),
            "amazon@amazon.de"
        );
        assert_eq!(login_key("amazon", Some("testshop")), "amazon");
        assert_eq!(login_key("amazon", None), "amazon");
    }
}
