//! What a tool returns: its result for the caller and, for a call that
//! reached a site, who served it. The dispatcher's audit line and the
//! fleet's wire read [`Provenance`] as it is, never out of the result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lease::cascade::CascadeResult;

/// Who served a call that reached a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The slot (identity) that served the call's last request.
    pub slot: usize,
    /// 1: a site's AJAX endpoint, 2: an HTML page over HTTP, 3: the browser.
    pub tier: u8,
    /// Tries the call made on its way (tiers and slots that did not serve
    /// it count too; a multi-page call counts every page's).
    pub attempts: usize,
}

impl Provenance {
    /// The cascade's own account of one run.
    pub fn of(r: &CascadeResult) -> Self {
        Provenance {
            slot: r.slot,
            tier: r.tier,
            attempts: r.attempts.len(),
        }
    }

    /// The same slot and tier after `earlier` tries on earlier pages.
    pub fn after(self, earlier: Option<Provenance>) -> Self {
        Provenance {
            attempts: self.attempts + earlier.map_or(0, |e| e.attempts),
            ..self
        }
    }
}

/// A tool's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The result the caller reads (MCP's `structuredContent`).
    pub body: Value,
    /// `None` for a tool that reached no site (the pool's own state).
    pub provenance: Option<Provenance>,
    /// `body` as JSON text, when the dispatcher has written it already (it
    /// measures every answer against the caller's budget): the transports
    /// send these bytes instead of writing them again. Tools leave it `None`.
    pub text: Option<String>,
}

impl Output {
    /// A result that reached no site.
    pub fn plain(body: Value) -> Self {
        Output {
            body,
            provenance: None,
            text: None,
        }
    }

    /// A result `by` served.
    pub fn served(body: Value, by: Provenance) -> Self {
        Output {
            body,
            provenance: Some(by),
            text: None,
        }
    }
}

impl From<Value> for Output {
    fn from(body: Value) -> Self {
        Output::plain(body)
    }
}
