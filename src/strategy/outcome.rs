//! The outcome of one response under a strategy. A block of the identity
//! counts toward its breaker, a rate limit rests it; nothing else does.

use std::time::Duration;

use serde::Serialize;

/// What a response means for the identity that fetched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Valid content.
    Ok,
    /// A valid page with zero items. Never a failure.
    Empty,
    /// The site refuses this identity (captcha, login wall, block status):
    /// on every tier.
    HardBlock,
    /// The site refuses this tier only (`[tier_block]`, a tier's own `block`).
    TierBlock,
    /// This identity is going too fast (`[rate_limit]`, 429 by default): it rests.
    RateLimited,
    /// The site wants a real browser (JS challenge).
    Challenge,
    /// The site wants a signed-in visitor (`[login]`, or `[session]
    /// logged_out` on an operation that `requires_login`): not a block of
    /// the identity; its (slot, strategy) is `logged_out`.
    LoginRequired,
    /// Network error, timeout, 5xx: try elsewhere, no breaker failure.
    Failed,
    /// Not tried: the tier hard-blocked this identity recently (cascade attempts only).
    Skipped,
}

impl Outcome {
    /// A hard block, challenge or failure: the caller did not get content.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::HardBlock
                | Outcome::TierBlock
                | Outcome::RateLimited
                | Outcome::Challenge
                | Outcome::LoginRequired
                | Outcome::Failed
                | Outcome::Skipped
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Empty => "empty",
            Outcome::HardBlock => "hard_block",
            Outcome::TierBlock => "tier_block",
            Outcome::RateLimited => "rate_limited",
            Outcome::Challenge => "challenge",
            Outcome::LoginRequired => "login_required",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }
}

/// Parse a `Retry-After` header given in seconds (HTTP-dates are rare from WAFs; we
/// fall back to the politeness interval for them). Capped at one hour.
pub fn retry_after(value: Option<&str>) -> Option<Duration> {
    let secs: u64 = value?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(3600)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::{Body, Markers, TomlStrategy, classify};
    use std::path::Path;

    fn strategy() -> TomlStrategy {
        TomlStrategy::parse(
            Path::new("t.toml"),
            r##"
name = "t"
hosts = ["shop.test"]
[block]
status = [401]
body = ["validateCaptcha"]
url = ["/login"]
[tier_block]
status = [403]
[challenge]
selector = "#tb-challenge"
[empty]
selector = ".no-reviews"
"##,
        )
        .unwrap()
    }

    fn classify_text(m: &Markers, status: u16, url: &str, text: &str) -> Outcome {
        classify(m, status, url, &Body::new(text, None))
    }

    #[test]
    fn selectors_judge_markup_only() {
        // A JSON answer that happens to contain the empty marker's class name
        // in a string is not parsed as HTML.
        let m = &strategy().markers;
        let u = "https://shop.test/api";
        let json = r#"{"html": "<p class=no-reviews>none</p>"}"#;
        assert_eq!(classify_text(m, 200, u, json), Outcome::Ok);
        assert_eq!(
            classify(
                m,
                200,
                u,
                &Body::new("<p class=no-reviews>", Some("application/json"))
            ),
            Outcome::Empty
        );
    }

    #[test]
    fn outcomes() {
        let m = &strategy().markers;
        let u = "https://shop.test/p/1";
        assert_eq!(
            classify_text(m, 200, u, "<div class=review>x</div>"),
            Outcome::Ok
        );
        assert_eq!(
            classify_text(m, 200, u, "<p class=no-reviews>none</p>"),
            Outcome::Empty
        );
        assert_eq!(
            classify_text(m, 200, u, "<form action=/validateCaptcha>"),
            Outcome::HardBlock
        );
        assert_eq!(classify_text(m, 401, u, "nope"), Outcome::HardBlock);
        assert_eq!(classify_text(m, 403, u, "nope"), Outcome::TierBlock);
        assert_eq!(
            classify_text(m, 403, u, "validateCaptcha"),
            Outcome::HardBlock,
            "the identity's block wins over the tier's"
        );
        assert_eq!(
            classify_text(m, 200, "https://shop.test/login?r=1", ""),
            Outcome::HardBlock
        );
        assert_eq!(
            classify_text(m, 503, u, "<div id=tb-challenge>"),
            Outcome::Challenge
        );
        assert_eq!(classify_text(m, 503, u, "busy"), Outcome::Failed);
        assert_eq!(classify_text(m, 429, u, "slow down"), Outcome::RateLimited);
        assert_eq!(
            classify_text(m, 429, u, "validateCaptcha"),
            Outcome::RateLimited,
            "a captcha with 429 says: too fast"
        );
    }

    #[test]
    fn the_marker_that_decided_is_named() {
        let m = &strategy().markers;
        let u = "https://shop.test/p/1";
        let why = |status, url, text| {
            let body = Body::new(text, None);
            m.explain(classify(m, status, url, &body), status, url, &body)
        };
        assert_eq!(
            why(200, u, "validateCaptcha"),
            Some("[block] body has \"validateCaptcha\"".into())
        );
        assert_eq!(
            why(200, "https://shop.test/login", ""),
            Some("[block] URL has \"/login\"".into())
        );
        assert_eq!(why(403, u, ""), Some("[tier_block] status 403".into()));
        assert_eq!(
            why(503, u, "<div id=tb-challenge>"),
            Some("[challenge] selector `#tb-challenge` matched".into())
        );
        assert_eq!(why(502, u, "x"), Some("the site answered 502".into()));
        assert_eq!(why(200, u, "<div class=review>"), None);
    }

    #[test]
    fn rate_limit_markers_and_the_429_default() {
        let with = |table: &str| {
            TomlStrategy::parse(
                Path::new("t.toml"),
                &format!("name = \"t\"\nhosts = [\"shop.test\"]\n{table}"),
            )
            .unwrap()
        };
        let u = "https://shop.test/p/1";
        let m = &with("[rate_limit]\nbody = [\"slow down\"]\n").markers;
        assert_eq!(
            classify_text(m, 200, u, "please slow down"),
            Outcome::RateLimited
        );
        assert_eq!(
            classify_text(m, 429, u, "x"),
            Outcome::RateLimited,
            "429 stays"
        );
        // A strategy may say that 429 means something else on its site.
        let m = &with("[rate_limit]\nstatus = []\n").markers;
        assert_eq!(classify_text(m, 429, u, "x"), Outcome::Failed);
    }

    #[test]
    fn retry_after_seconds() {
        assert_eq!(retry_after(Some("7")), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(Some("99999")), Some(Duration::from_secs(3600)));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after(None), None);
    }
}
