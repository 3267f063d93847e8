//! What a session file holds, whatever its format: cookies and each
//! origin's `localStorage`, and the checks every cookie passes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::identity::jar::PortableCookie;

/// One origin's `localStorage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OriginStorage {
    /// `scheme://host[:port]`.
    pub origin: String,
    #[serde(rename = "localStorage")]
    pub local_storage: Vec<StorageItem>,
}

/// One `localStorage` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StorageItem {
    pub name: String,
    pub value: String,
}

/// What a session file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    pub cookies: Vec<PortableCookie>,
    pub origins: Vec<OriginStorage>,
}

impl Session {
    /// Cookies per domain (what an import reports).
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for c in &self.cookies {
            *out.entry(c.domain.clone()).or_insert(0) += 1;
        }
        out
    }

    /// Only what belongs to `domain` or its subdomains (an export's `--domain`).
    pub fn only_domain(mut self, domain: &str) -> Session {
        let domain = domain.trim_start_matches('.').to_ascii_lowercase();
        let related = |host: &str| host == domain || host.ends_with(&format!(".{domain}"));
        self.cookies.retain(|c| related(&c.domain));
        self.origins.retain(|o| {
            url::Url::parse(&o.origin)
                .ok()
                .and_then(|u| u.host_str().map(related))
                .unwrap_or(false)
        });
        self
    }
}

/// A cookie's fields checked the same way whatever the file: a name, a
/// domain that is a host name, a path starting with `/`.
pub(super) fn check_cookie(c: &PortableCookie) -> std::result::Result<(), String> {
    if c.name.is_empty() {
        return Err("the cookie has no name".into());
    }
    if c.name.contains([';', '=', ' ', '\t', '\r', '\n']) {
        return Err(format!(
            "cookie name `{}` has a forbidden character",
            c.name
        ));
    }
    if c.value.contains([';', '\r', '\n']) {
        return Err(format!(
            "the value of `{}` has a forbidden character",
            c.name
        ));
    }
    if c.domain.is_empty() || c.domain.contains(['/', ' ', ':', '\t']) {
        return Err(format!("`{}`: `{}` is not a domain", c.name, c.domain));
    }
    if !c.path.starts_with('/') {
        return Err(format!("`{}`: path `{}` must start with /", c.name, c.path));
    }
    Ok(())
}
