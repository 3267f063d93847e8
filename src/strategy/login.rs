//! A strategy's `[session]` table: how to tell whether an identity is
//! signed in on the site, where a person signs in, and a cheap page to ask.
//!
//! ```toml
//! [session]
//! login_url = "{base_url}/signin"     # where `idpool login` opens the browser
//! probe_url = "{base_url}/account"    # optional: asked when the state is unknown
//! [session.logged_in]
//! selector = "#nav-account[data-signed-in]"
//! [session.logged_out]
//! url = ["/signin"]
//! selector = "#nav-account:not([data-signed-in])"
//! ```
//!
//! Every response of the strategy is looked at: a `logged_out` match makes
//! the (slot, strategy) `logged_out`, else a `logged_in` match makes it
//! `logged_in`; anything else leaves it as it was.

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::Body;
use super::markers::{MarkerFile, MarkerSet};
use crate::diag::Diagnostic;
use crate::wire::http::host_matches;

/// Whether a slot is signed in on a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginState {
    LoggedIn,
    LoggedOut,
    Unknown,
}

impl LoginState {
    pub fn as_str(self) -> &'static str {
        match self {
            LoginState::LoggedIn => "logged_in",
            LoginState::LoggedOut => "logged_out",
            LoginState::Unknown => "unknown",
        }
    }
}

/// `[session]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct LoginFile {
    login_url: Option<Spanned<String>>,
    probe_url: Option<Spanned<String>>,
    logged_in: MarkerFile,
    logged_out: MarkerFile,
}

/// A strategy's compiled `[session]`.
#[derive(Debug, Clone)]
pub struct LoginRules {
    /// Where a person signs in (`idpool login`).
    pub login_url: Option<url::Url>,
    /// A cheap page whose answer tells the state.
    pub probe_url: Option<url::Url>,
    pub logged_in: MarkerSet,
    pub logged_out: MarkerSet,
}

impl LoginRules {
    /// The state a response shows, with the marker that showed it.
    pub fn judge(
        &self,
        status: u16,
        final_url: &str,
        body: &Body<'_>,
    ) -> Option<(LoginState, String)> {
        if let Some(why) = self.logged_out.explain(status, final_url, body) {
            return Some((LoginState::LoggedOut, format!("[session.logged_out] {why}")));
        }
        self.logged_in
            .explain(status, final_url, body)
            .map(|why| (LoginState::LoggedIn, format!("[session.logged_in] {why}")))
    }
}

impl LoginFile {
    /// Check and compile; `{base_url}` in the URLs is `base_url`.
    pub(super) fn compile(
        &self,
        path: &Path,
        text: &str,
        hosts: &[String],
        base_url: Option<&str>,
    ) -> Result<LoginRules, Diagnostic> {
        let url =
            |field: &str, u: &Option<Spanned<String>>| -> Result<Option<url::Url>, Diagnostic> {
                let Some(u) = u else { return Ok(None) };
                let err = |m: String| Diagnostic::at(path, text, Some(u.span()), m);
                let raw = u.get_ref();
                let filled = match base_url {
                    Some(b) => raw.replace("{base_url}", b),
                    None if raw.contains("{base_url}") => {
                        return Err(err(format!(
                            "session.{field} uses {{base_url}} but the strategy has no base_url"
                        )));
                    }
                    None => raw.clone(),
                };
                let parsed = url::Url::parse(&filled)
                    .map_err(|e| err(format!("session.{field} is not a valid URL ({e})")))?;
                if !parsed.host_str().is_some_and(|h| host_matches(hosts, h)) {
                    return Err(err(format!(
                        "session.{field}'s host is not one of this strategy's hosts"
                    )));
                }
                Ok(Some(parsed))
            };
        let rules = LoginRules {
            login_url: url("login_url", &self.login_url)?,
            probe_url: url("probe_url", &self.probe_url)?,
            logged_in: self
                .logged_in
                .compile(path, text, "session.logged_in", &[])?,
            logged_out: self
                .logged_out
                .compile(path, text, "session.logged_out", &[])?,
        };
        if rules.logged_in.is_empty() && rules.logged_out.is_empty() {
            let pos = text.find("[session").unwrap_or(0);
            return Err(Diagnostic::at(
                path,
                text,
                Some(pos..pos),
                "[session] needs a logged_in or logged_out marker table to tell the state",
            ));
        }
        Ok(rules)
    }
}

/// `requires_login` needs a `[session]` table to tell; a
/// `fallback_operation` names another operation of the strategy that needs
/// no login.
pub(super) fn check_logins(
    ops: &std::collections::BTreeMap<String, super::operation::Operation>,
    has_session: bool,
    path: &Path,
    text: &str,
) -> std::result::Result<(), Diagnostic> {
    let at = |name: &str, key: &str, msg: String| {
        let pos = text
            .find(&format!("[operations.{name}]"))
            .and_then(|start| text[start..].find(key).map(|k| start + k))
            .unwrap_or(0);
        Diagnostic::at(path, text, Some(pos..pos), msg)
    };
    for (name, op) in ops {
        if op.requires_login && !has_session {
            return Err(at(
                name,
                "requires_login",
                format!(
                    "operations.{name}.requires_login needs a [session] table (logged_in / logged_out markers)"
                ),
            ));
        }
        if let Some(f) = &op.fallback {
            let ok = ops.get(f).is_some_and(|o| !o.requires_login) && f != name;
            if !ok {
                return Err(at(
                    name,
                    "fallback_operation",
                    format!(
                        "operations.{name}.fallback_operation `{f}` must name another operation of this strategy that does not require login"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::TomlStrategy;

    fn op(extra: &str) -> String {
        format!(
            "[operations.r]\nrequires_login = true\n{extra}[operations.r.extract]\nitems = \"li\"\n\
             [operations.r.extract.fields]\nt = {{ css = \"b\" }}\n[operations.r.tier2]\nurl = \"https://shop.test/r\"\n"
        )
    }

    fn parse(text: &str) -> Result<TomlStrategy, Diagnostic> {
        TomlStrategy::parse(Path::new("s.toml"), text)
    }

    #[test]
    fn sessions_are_checked() {
        let head = "name = \"s\"\nhosts = [\"shop.test\"]\n";
        let e = parse(&format!("{head}{}", op(""))).unwrap_err();
        assert!(
            e.message.contains("requires_login needs a [session] table"),
            "{e}"
        );
        let session = "[session]\n[session.logged_in]\nselector = \"#me\"\n";
        let ok = parse(&format!("{head}{session}{}", op(""))).unwrap();
        assert!(ok.operations["r"].requires_login);
        let e = parse(&format!(
            "{head}{session}{}",
            op("fallback_operation = \"nope\"\n")
        ))
        .unwrap_err();
        assert!(e.message.contains("fallback_operation `nope`"), "{e}");
        let e = parse(&format!(
            "{head}[session]\nlogin_url = \"https://other.test/\"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("session.login_url's host"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        let e = parse(&format!(
            "{head}[session]\nlogin_url = \"https://shop.test/in\"\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("needs a logged_in or logged_out"), "{e}");
    }

    #[test]
    fn the_markers_tell_the_state() {
        let head = "name = \"s\"\nhosts = [\"shop.test\"]\n";
        let s = parse(&format!(
            "{head}[session]\n[session.logged_in]\nselector = \"#nav[data-in]\"\n[session.logged_out]\nurl = [\"/signin\"]\n"
        ))
        .unwrap();
        let rules = s.login.as_ref().unwrap();
        let page =
            |html: &str, url: &str| rules.judge(200, url, &Body::new(html, Some("text/html")));
        assert_eq!(
            page("<div id=nav data-in>Hi</div>", "https://shop.test/").map(|x| x.0),
            Some(LoginState::LoggedIn)
        );
        assert_eq!(
            page("<form></form>", "https://shop.test/signin?r=/").map(|x| x.0),
            Some(LoginState::LoggedOut)
        );
        assert_eq!(page("<p>hi</p>", "https://shop.test/"), None);
    }
}
