//! `[notify]`: where the daemon tells a person that a call waits for one.

use serde::Deserialize;

/// `[notify]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// A webhook: each `handoff_needed` is POSTed here as JSON (the slot,
    /// the strategy, the site, why, and a link to the live view; never a
    /// key, a cookie or a proxy credential). None: no webhook.
    pub url: Option<String>,
    /// What links in notifications start with (default
    /// `http://<server.listen>`): the address a person's browser reaches
    /// the daemon at.
    pub link_base: Option<String>,
}

impl NotifyConfig {
    /// What is wrong with these values, if anything.
    pub fn problem(&self) -> Option<String> {
        for (key, v) in [("url", &self.url), ("link_base", &self.link_base)] {
            if let Some(v) = v {
                match url::Url::parse(v) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                    _ => return Some(format!("notify.{key} must be an http(s) URL (is `{v}`)")),
                }
            }
        }
        None
    }
}
