//! The outcome of one response under a strategy. Only `hard_block` feeds a breaker.

use std::time::Duration;

use serde::Serialize;

use super::{Body, Markers};

/// What a response means for the identity that fetched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Valid content.
    Ok,
    /// A valid page with zero items. Never a failure.
    Empty,
    /// The site refuses this identity (captcha, login wall, block status).
    HardBlock,
    /// The site wants a real browser (JS challenge).
    Challenge,
    /// Network error, timeout, 5xx, or a 429 asking us to wait: try elsewhere, no breaker failure.
    Failed,
    /// Not tried: the tier hard-blocked this identity recently (cascade attempts only).
    Skipped,
}

impl Outcome {
    /// A hard block, challenge or failure: the caller did not get content.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::HardBlock | Outcome::Challenge | Outcome::Failed | Outcome::Skipped
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Empty => "empty",
            Outcome::HardBlock => "hard_block",
            Outcome::Challenge => "challenge",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }
}

/// Classify a complete response. Order matters: a challenge page often carries a
/// 403/503, so challenge markers win; block markers win over a bare 429 or 5xx.
pub fn classify(markers: &Markers, status: u16, final_url: &str, body: &Body<'_>) -> Outcome {
    if markers.challenge.matches(status, final_url, body) {
        return Outcome::Challenge;
    }
    if markers.block.matches(status, final_url, body) {
        return Outcome::HardBlock;
    }
    if status == 429 || status >= 500 {
        return Outcome::Failed;
    }
    if markers.empty.matches(status, final_url, body) {
        return Outcome::Empty;
    }
    Outcome::Ok
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
    use crate::strategy::TomlStrategy;
    use std::path::Path;

    fn strategy() -> TomlStrategy {
        TomlStrategy::parse(
            Path::new("t.toml"),
            r##"
name = "t"
hosts = ["shop.test"]
[block]
status = [403]
body = ["validateCaptcha"]
url = ["/login"]
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
        assert_eq!(classify_text(m, 403, u, "nope"), Outcome::HardBlock);
        assert_eq!(
            classify_text(m, 200, "https://shop.test/login?r=1", ""),
            Outcome::HardBlock
        );
        assert_eq!(
            classify_text(m, 503, u, "<div id=tb-challenge>"),
            Outcome::Challenge
        );
        assert_eq!(classify_text(m, 503, u, "busy"), Outcome::Failed);
        assert_eq!(classify_text(m, 429, u, "slow down"), Outcome::Failed);
        assert_eq!(
            classify_text(m, 429, u, "validateCaptcha"),
            Outcome::HardBlock
        );
    }

    #[test]
    fn retry_after_seconds() {
        assert_eq!(retry_after(Some("7")), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(Some("99999")), Some(Duration::from_secs(3600)));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after(None), None);
    }
}
