//! `[handoff]`: what on a site calls a person instead of failing the call.
//! A captcha or robot check (a `[block]` page) or a sign-in wall or second
//! factor (`[login]`, or a signed-out page on an operation that
//! `requires_login`) on a strategy with `[handoff]` stops the call on that
//! identity and waits, up to `wait_secs`, for a person to clear it in the
//! slot's live view. The daemon never solves anything itself.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// `[handoff]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HandoffFile {
    /// `block` (a captcha or robot check) and/or `login` (a sign-in wall,
    /// a second factor). Default: both.
    #[serde(default)]
    on: Option<Spanned<Vec<String>>>,
    /// How long a call waits for the person.
    #[serde(default)]
    wait_secs: Option<Spanned<u64>>,
}

/// Longest wait a strategy may ask for.
pub const MAX_WAIT_SECS: u64 = 3600;
const DEFAULT_WAIT_SECS: u64 = 120;

/// What calls a person on this site, and how long a call waits for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// A `[block]` page (captcha, robot check).
    pub on_block: bool,
    /// A sign-in wall or a second factor.
    pub on_login: bool,
    pub wait: Duration,
}

impl Handoff {
    /// Whether `outcome` calls a person here.
    pub fn wants(&self, outcome: super::Outcome) -> bool {
        match outcome {
            super::Outcome::HardBlock => self.on_block,
            super::Outcome::LoginRequired => self.on_login,
            _ => false,
        }
    }
}

impl HandoffFile {
    /// Checked; a wrong value names its line.
    pub(super) fn compile(
        &self,
        err: &dyn Fn(std::ops::Range<usize>, String) -> crate::diag::Diagnostic,
    ) -> Result<Handoff, crate::diag::Diagnostic> {
        let (mut on_block, mut on_login) = (true, true);
        if let Some(on) = &self.on {
            (on_block, on_login) = (false, false);
            for w in on.get_ref() {
                match w.as_str() {
                    "block" => on_block = true,
                    "login" => on_login = true,
                    other => {
                        return Err(err(
                            on.span(),
                            format!("[handoff] on: `{other}` is not `block` or `login`"),
                        ));
                    }
                }
            }
            if !(on_block || on_login) {
                return Err(err(
                    on.span(),
                    "[handoff] on is empty: name `block`, `login` or both (or leave out [handoff])"
                        .into(),
                ));
            }
        }
        let wait = match &self.wait_secs {
            Some(w) if *w.get_ref() == 0 || *w.get_ref() > MAX_WAIT_SECS => {
                return Err(err(
                    w.span(),
                    format!(
                        "[handoff] wait_secs must be 1 to {MAX_WAIT_SECS} (is {})",
                        w.get_ref()
                    ),
                ));
            }
            Some(w) => *w.get_ref(),
            None => DEFAULT_WAIT_SECS,
        };
        Ok(Handoff {
            on_block,
            on_login,
            wait: Duration::from_secs(wait),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::strategy::{Outcome, Strategy, TomlStrategy};
    use std::path::Path;

    const BASE: &str = "name = \"s\"\nhosts = [\"shop.test\"]\n";

    #[test]
    fn handoff_reads_and_names_what_is_wrong() {
        let s = TomlStrategy::parse(Path::new("s.toml"), BASE).expect("parse");
        assert!(s.handoff().is_none());
        let s =
            TomlStrategy::parse(Path::new("s.toml"), &format!("{BASE}[handoff]\n")).expect("parse");
        let h = s.handoff().expect("handoff");
        assert!(h.wants(Outcome::HardBlock) && h.wants(Outcome::LoginRequired));
        assert!(!h.wants(Outcome::RateLimited) && !h.wants(Outcome::Challenge));
        assert_eq!(h.wait.as_secs(), 120);
        let s = TomlStrategy::parse(
            Path::new("s.toml"),
            &format!("{BASE}[handoff]\non = [\"block\"]\nwait_secs = 30\n"),
        )
        .expect("parse");
        let h = s.handoff().expect("handoff");
        assert!(h.wants(Outcome::HardBlock) && !h.wants(Outcome::LoginRequired));
        assert_eq!(h.wait.as_secs(), 30);
        for (bad, says) in [
            ("on = [\"captcha\"]", "`captcha` is not `block` or `login`"),
            ("on = []", "[handoff] on is empty"),
            ("wait_secs = 0", "wait_secs must be 1 to 3600 (is 0)"),
            ("wait_secs = 7200", "(is 7200)"),
        ] {
            let e = TomlStrategy::parse(Path::new("s.toml"), &format!("{BASE}[handoff]\n{bad}\n"))
                .expect_err(bad)
                .to_string();
            assert!(e.contains(says) && e.contains("s.toml:4"), "{bad}: {e}");
        }
    }
}
