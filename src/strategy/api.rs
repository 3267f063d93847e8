//! The strategy plugin interface. TOML strategies ([`super::TomlStrategy`])
//! implement it; a compiled Rust strategy implements it too when a site needs
//! what the declarative format cannot express (a custom response format, a
//! computed block check), and is registered with [`super::Registry::add`].

use std::collections::BTreeMap;
use std::path::Path;

use super::extract::Extracted;
use super::locale::Locale;
use super::operation::{Operation, Tier};
use super::{Body, LoginRules, LoginState, Markers, Outcome, Politeness, classify};
use crate::dom::PageState;
use crate::wire::http::host_matches;

static EN_US: std::sync::LazyLock<Locale> = std::sync::LazyLock::new(Locale::default);

/// Everything the pool, the cascade and the tools need from a strategy.
pub trait Strategy: Send + Sync + std::fmt::Debug {
    /// Unique name.
    fn name(&self) -> &str;
    /// Host patterns (`shop.example`, `*.shop.example`).
    fn hosts(&self) -> &[String];
    /// Page a fresh identity visits first (`refresh-cookies`).
    fn warmup_url(&self) -> Option<&url::Url>;
    /// Domain whose cookies are synced between the tiers.
    fn cookie_domain(&self) -> &str;
    /// `{base_url}` in operation templates.
    fn base_url(&self) -> Option<&str>;
    fn politeness(&self) -> &Politeness;
    /// Block / challenge / empty markers (used by the default `classify`).
    fn markers(&self) -> &Markers;
    /// Named operations.
    fn operations(&self) -> &BTreeMap<String, Operation>;
    /// `[session]`: how to tell a signed-in identity (none: the site has no
    /// accounts that matter).
    fn login(&self) -> Option<&LoginRules> {
        None
    }
    /// `[handoff]`: what calls a person instead of failing (none: nothing).
    fn handoff(&self) -> Option<&super::Handoff> {
        None
    }
    /// `robots = true`: the site's `robots.txt` applies to every request
    /// of the strategy, as to a host no strategy covers.
    fn obeys_robots(&self) -> bool {
        false
    }
    /// Where it came from, for messages.
    fn source(&self) -> Option<&Path> {
        None
    }
    /// The strategy file's name: a marketplace's strategy (`amazon@amazon.de`)
    /// belongs to the family `amazon`.
    fn family(&self) -> &str {
        self.name()
    }
    /// This strategy's marketplace, when its file serves several.
    fn marketplace(&self) -> Option<&str> {
        None
    }
    /// Every marketplace of the family, the default first (empty: one site).
    fn marketplaces(&self) -> &[String] {
        &[]
    }
    /// The default marketplace's strategy holds the others.
    fn variants(&self) -> &[std::sync::Arc<dyn Strategy>] {
        &[]
    }
    /// How the site writes numbers and dates (default: `en-US`).
    fn locale(&self) -> &Locale {
        &EN_US
    }

    /// Whether this strategy covers `host`.
    fn covers(&self, host: &str) -> bool {
        host_matches(self.hosts(), host)
    }

    /// What a complete response means for the identity that fetched it.
    /// `body` parses itself at most once, for this and for [`Strategy::extract`].
    fn classify(&self, status: u16, final_url: &str, body: &Body<'_>) -> Outcome {
        classify(self.markers(), status, final_url, body)
    }

    /// Why a response got `outcome` (the marker that matched), for attempts
    /// and logs. Called only for refusals, off the hot path.
    fn explain(
        &self,
        outcome: Outcome,
        status: u16,
        final_url: &str,
        body: &Body<'_>,
    ) -> Option<String> {
        self.markers().explain(outcome, status, final_url, body)
    }

    /// Whether a response shows its identity signed in or out, and by which
    /// marker (default: the `[session]` markers).
    fn login_state(
        &self,
        status: u16,
        final_url: &str,
        body: &Body<'_>,
    ) -> Option<(LoginState, String)> {
        self.login()?.judge(status, final_url, body)
    }

    /// The fields of `op`'s items that are personal data (masked for
    /// callers below `security.pii_role`; default: its `pii = true` fields).
    fn pii_fields(&self, op: &Operation) -> Vec<String> {
        super::pii::fields_of(op)
    }

    /// How a page in the browser looks while we wait on it.
    fn page_state(&self, html: &str, url: &str, status: u16) -> PageState {
        self.markers().page_state(html, url, status)
    }

    /// Items of one tier's response (default: the tier's extraction rules,
    /// then the operation's derived fields).
    fn extract(
        &self,
        op: &Operation,
        tier: &Tier,
        body: &Body<'_>,
        page_url: &url::Url,
    ) -> Result<Extracted, String> {
        let mut ex = tier.extractor.extract_body(
            body,
            tier.html_pointer.as_deref(),
            page_url,
            self.locale(),
        )?;
        super::derive::apply(&op.derive, &mut ex.items);
        Ok(ex)
    }
}
