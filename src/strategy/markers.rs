//! Markers: how a strategy recognises a block of the identity, a block of one
//! tier, a rate limit, a challenge or an empty page.

use std::path::Path;

use scraper::Selector;
use serde::Deserialize;
use toml::Spanned;

use super::Body;
use super::outcome::Outcome;
use crate::diag::Diagnostic;

/// A `[block]`, `[tier_block]`, `[rate_limit]`, `[challenge]`, `[empty]` or
/// `[login]` table as written (also a tier's own `block`, and
/// `[session.logged_in]` / `[session.logged_out]`).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct MarkerFile {
    /// `None`: the table's default (429 for `[rate_limit]`, none elsewhere).
    status: Option<Vec<u16>>,
    body: Vec<String>,
    url: Vec<String>,
    selector: Option<Spanned<String>>,
}

impl MarkerFile {
    /// Check and compile the table; `default_status` applies when it
    /// names no `status` of its own.
    pub(crate) fn compile(
        &self,
        path: &Path,
        text: &str,
        table: &str,
        default_status: &[u16],
    ) -> Result<MarkerSet, Diagnostic> {
        let status = self
            .status
            .clone()
            .unwrap_or_else(|| default_status.to_vec());
        for s in &status {
            if !(100..=599).contains(s) {
                let pos = text
                    .find(&format!("[{table}]"))
                    .or_else(|| text.find(&format!("{table} =")))
                    .unwrap_or(0);
                return Err(Diagnostic::at(
                    path,
                    text,
                    Some(pos..pos),
                    format!("{table}.status: {s} is not an HTTP status code"),
                ));
            }
        }
        let selector = match &self.selector {
            Some(s) => Some(crate::dom::selector::parse(s.get_ref()).map_err(|why| {
                Diagnostic::at(
                    path,
                    text,
                    Some(s.span()),
                    format!(
                        "{table}.selector `{}` {why}",
                        crate::dom::selector::shown(s.get_ref()),
                    ),
                )
            })?),
            None => None,
        };
        Ok(MarkerSet {
            status,
            body: self.body.clone(),
            url: self.url.clone(),
            selector_text: self.selector.as_ref().map(|s| s.get_ref().clone()),
            selector,
        })
    }
}

/// One compiled marker set. It matches when any of its criteria matches.
#[derive(Debug, Clone, Default)]
pub struct MarkerSet {
    /// Status codes that alone mean this.
    pub status: Vec<u16>,
    /// Body substrings.
    pub body: Vec<String>,
    /// Final-URL substrings.
    pub url: Vec<String>,
    pub selector_text: Option<String>,
    selector: Option<Selector>,
}

impl MarkerSet {
    /// A set of built-in markers (a selector that does not parse matches
    /// nothing; built-in ones are tested).
    pub fn new(
        status: Vec<u16>,
        body: Vec<String>,
        url: Vec<String>,
        selector: Option<&str>,
    ) -> Self {
        MarkerSet {
            status,
            body,
            url,
            selector_text: selector.map(str::to_string),
            selector: selector.and_then(|s| Selector::parse(s).ok()),
        }
    }

    /// No criterion at all: matches nothing.
    pub fn is_empty(&self) -> bool {
        self.status.is_empty()
            && self.body.is_empty()
            && self.url.is_empty()
            && self.selector.is_none()
    }

    /// Whether the response matches. A selector applies to markup only (a
    /// JSON answer is judged by its status, URL and text), and the document
    /// is the body's one parse, shared with extraction.
    pub fn matches(&self, status: u16, final_url: &str, body: &Body<'_>) -> bool {
        if self.status.contains(&status) {
            return true;
        }
        if self.url.iter().any(|u| final_url.contains(u.as_str())) {
            return true;
        }
        let text = body.text();
        if self.body.iter().any(|b| text.contains(b.as_str())) {
            return true;
        }
        if let Some(sel) = &self.selector
            && body.is_html()
        {
            return body.html().select(sel).next().is_some();
        }
        false
    }

    /// Which criterion matched, in words (`status 403`, `body has
    /// "validateCaptcha"`, ...): why a response was judged so.
    pub fn explain(&self, status: u16, final_url: &str, body: &Body<'_>) -> Option<String> {
        if self.status.contains(&status) {
            return Some(format!("status {status}"));
        }
        if let Some(u) = self.url.iter().find(|u| final_url.contains(u.as_str())) {
            return Some(format!("URL has {u:?}"));
        }
        let text = body.text();
        if let Some(b) = self.body.iter().find(|b| text.contains(b.as_str())) {
            return Some(format!("body has {b:?}"));
        }
        match (&self.selector, &self.selector_text) {
            (Some(sel), Some(text))
                if body.is_html() && body.html().select(sel).next().is_some() =>
            {
                Some(format!("selector `{text}` matched"))
            }
            _ => None,
        }
    }
}

impl Markers {
    /// Why a response got `outcome`: the table and the criterion that
    /// matched (`[block] body has "validateCaptcha"`); `None` for outcomes
    /// no marker decides.
    pub fn explain(
        &self,
        outcome: Outcome,
        status: u16,
        final_url: &str,
        body: &Body<'_>,
    ) -> Option<String> {
        use Outcome as O;
        let (table, set) = match outcome {
            O::Challenge => ("challenge", &self.challenge),
            O::RateLimited => ("rate_limit", &self.rate_limit),
            O::HardBlock => ("block", &self.block),
            O::LoginRequired => ("login", &self.login),
            O::TierBlock => ("tier_block", &self.tier_block),
            O::Failed if status >= 500 || status == 429 => {
                return Some(format!("the site answered {status}"));
            }
            _ => return None,
        };
        set.explain(status, final_url, body)
            .map(|why| format!("[{table}] {why}"))
    }
}

/// The marker sets of a strategy. The default recognises nothing but a
/// 429 as a rate limit.
#[derive(Debug, Clone)]
pub struct Markers {
    /// The site refuses this identity (captcha, ban page): on every tier.
    pub block: MarkerSet,
    /// The site refuses the tier that got this, not the identity (an AJAX
    /// endpoint's 403 while its pages are served).
    pub tier_block: MarkerSet,
    /// This identity is going too fast (status 429 unless the table says otherwise).
    pub rate_limit: MarkerSet,
    pub challenge: MarkerSet,
    pub empty: MarkerSet,
    /// A login wall (`[login]`): the site wants a signed-in visitor. Not a
    /// block of the identity: its (slot, strategy) becomes `logged_out`.
    pub login: MarkerSet,
}

/// The statuses that mean "too fast" when a strategy does not say.
pub const RATE_LIMIT_STATUS: &[u16] = &[429];

impl Default for Markers {
    fn default() -> Self {
        Markers {
            block: MarkerSet::default(),
            tier_block: MarkerSet::default(),
            rate_limit: MarkerSet {
                status: RATE_LIMIT_STATUS.to_vec(),
                ..MarkerSet::default()
            },
            challenge: MarkerSet::default(),
            empty: MarkerSet::default(),
            login: MarkerSet::default(),
        }
    }
}

impl Markers {
    /// How a page in the browser looks, from its HTML, URL and main-document status.
    pub fn page_state(&self, html: &str, url: &str, status: u16) -> crate::dom::PageState {
        let body = Body::html_page(html);
        if self.challenge.matches(status, url, &body) {
            crate::dom::PageState::Challenge
        } else if self.block.matches(status, url, &body)
            || self.login.matches(status, url, &body)
            || self.rate_limit.matches(status, url, &body)
            || status >= 400
        {
            // An error page will not grow the element we wait for either.
            crate::dom::PageState::Blocked
        } else {
            crate::dom::PageState::Normal
        }
    }
}

/// Classify a complete response. Order matters: a challenge page often carries a
/// 403/503, so challenge markers win; then a rate limit (a captcha served with
/// 429 says "too fast", not "never"), a login wall (a sign-in page is not a
/// ban), a block of the identity, a block of the tier, and a bare 5xx.
pub fn classify(markers: &Markers, status: u16, final_url: &str, body: &Body<'_>) -> Outcome {
    if markers.challenge.matches(status, final_url, body) {
        return Outcome::Challenge;
    }
    if markers.rate_limit.matches(status, final_url, body) {
        return Outcome::RateLimited;
    }
    if markers.login.matches(status, final_url, body) {
        return Outcome::LoginRequired;
    }
    if markers.block.matches(status, final_url, body) {
        return Outcome::HardBlock;
    }
    if markers.tier_block.matches(status, final_url, body) {
        return Outcome::TierBlock;
    }
    if status == 429 || status >= 500 {
        return Outcome::Failed;
    }
    if markers.empty.matches(status, final_url, body) {
        return Outcome::Empty;
    }
    Outcome::Ok
}
