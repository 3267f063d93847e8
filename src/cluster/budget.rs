//! The fleet's request budget per strategy, in Redis: paced starts and
//! the adaptive rate every daemon's pushback cuts and every daemon's
//! successes grow (see [`super::scripts::PACE`]
//! and [`super::scripts::CUT`]).

use std::time::Duration;

use super::Cluster;
use crate::error::Result;

/// How often the fleet's budget may be cut: answers to requests sent
/// before a cut say nothing new about the rate after it.
pub const CUT_SPACING: Duration = Duration::from_secs(2);
/// The fleet's answers are counted in buckets this long: a cut measures
/// what the site took over the last one or two (and never from before the
/// cut before it).
pub const MEASURE_BUCKET: Duration = CUT_SPACING;
/// A cut keeps this much of the fleet's rate. Gentler than one daemon's
/// halving: the fleet's cut starts from the rate the whole fleet was
/// measured sending, not from a guess.
pub const CUT_FACTOR: f64 = 0.7;

/// What a fleet budget call asks.
#[derive(Debug, Clone, Copy)]
pub struct PaceAsk {
    /// The strategy's own rate (its fixed budget, or the local one in force).
    pub rate: Option<f64>,
    pub adaptive: bool,
    /// Requests a minute this daemon's successes added since its last call.
    pub grow: f64,
    /// Answers the site took, and refused, that this daemon heard since its
    /// last call: what the next cut measures the site by.
    pub taken: u64,
    pub refused: u64,
    /// The generation (the budget's cuts so far) those answers' requests
    /// were reserved under: counted only when it is the budget's own.
    pub generation: u64,
    /// `max_requests_per_minute`, when set.
    pub cap: Option<f64>,
    pub max_wait: Duration,
}

/// A fleet budget's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paced {
    /// `Ok(wait)`: reserved, start after it; `Err(wait)`: nothing reserved,
    /// the next start is that far away.
    pub turn: std::result::Result<Duration, Duration>,
    /// The fleet's rate in force, per minute (`None`: none).
    pub rate: Option<f64>,
    /// The budget's generation: its cuts so far.
    pub generation: u64,
}

/// What a pushback tells the fleet's budget.
#[derive(Debug, Clone)]
pub struct CutAsk {
    /// The fleet id the site pushed back on.
    pub identity: String,
    /// Pushbacks from this many identities within `window` are the site's
    /// word (one identity's are its own business).
    pub identities: usize,
    pub window: Duration,
    /// Requests a minute the site took, as this daemon estimates it: what
    /// the fleet's first cut starts from (later ones measure it in Redis),
    /// or the rate in force, when that is less.
    pub accepted: f64,
    /// The floor and the cap (`min_requests_per_minute`, `max_…`).
    pub floor: f64,
    pub cap: Option<f64>,
    /// The generation the pushed-back request was reserved under: one
    /// reserved before the budget's last cut is old news.
    pub generation: u64,
    /// The rate the fleet's budget measures at after the site's first word
    /// (requests a minute: high enough to pace nothing).
    pub measuring: f64,
}

/// A cut's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    /// Whether this call cut (false: another daemon cut just before).
    pub cut: bool,
    /// Whether this call started the measurement the next cut starts from
    /// (the site's first word: not a cut yet).
    pub measuring: bool,
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// The rate the site accepted the cut started from (measured by the
    /// fleet, or the caller's estimate before the first cut).
    pub accepted: Option<f64>,
    /// The budget's generation after the call.
    pub generation: u64,
}

fn rate_of(tenths: i64) -> Option<f64> {
    (tenths >= 0).then(|| tenths as f64 / 10.0)
}

impl Cluster {
    /// Reserve the next start in `strategy`'s fleet budget (one round trip).
    pub async fn pace(&self, strategy: &str, ask: PaceAsk) -> Result<Paced> {
        let key = self.key_of(&["budget", strategy]);
        let s = &self.scripts.pace;
        let (ok, wait, tenths, generation): (i64, i64, i64, i64) = self
            .run("pace", async move |c| {
                s.prepare_invoke()
                    .key(&key)
                    .arg(ask.rate.unwrap_or(0.0))
                    .arg(ask.max_wait.as_millis() as u64)
                    .arg(if ask.adaptive { 1 } else { 0 })
                    .arg(ask.grow)
                    .arg(ask.cap.unwrap_or(0.0))
                    .arg(ask.taken)
                    .arg(ask.refused)
                    .arg(MEASURE_BUCKET.as_millis() as u64)
                    .arg(ask.generation)
                    .invoke_async(c)
                    .await
            })
            .await?;
        let wait = Duration::from_millis(wait.max(0) as u64);
        Ok(Paced {
            turn: if ok == 1 { Ok(wait) } else { Err(wait) },
            rate: rate_of(tenths),
            generation: generation.max(0) as u64,
        })
    }

    /// The site pushed back on `ask.identity`: once pushbacks came from
    /// `ask.identities` of the fleet's identities within `ask.window`, cut
    /// `strategy`'s fleet budget (see [`CUT_SPACING`], [`CUT_FACTOR`]).
    pub async fn cut(&self, strategy: &str, ask: &CutAsk) -> Result<Cut> {
        let key = self.key_of(&["budget", strategy]);
        let pushbacks = self.key_of(&["pushbacks", strategy]);
        let s = &self.scripts.cut;
        let (cut, from, to, accepted, generation): (i64, i64, i64, i64, i64) = self
            .run("cut", async move |c| {
                s.prepare_invoke()
                    .key(&key)
                    .key(&pushbacks)
                    .arg(CUT_SPACING.as_millis() as u64)
                    .arg(CUT_FACTOR)
                    .arg(ask.floor)
                    .arg(ask.cap.unwrap_or(0.0))
                    .arg(ask.accepted)
                    .arg(&ask.identity)
                    .arg(ask.window.as_millis() as u64)
                    .arg(ask.identities)
                    .arg(ask.generation)
                    .arg(ask.measuring)
                    .invoke_async(c)
                    .await
            })
            .await?;
        Ok(Cut {
            cut: cut == 1,
            measuring: cut == 2,
            from: rate_of(from),
            to: rate_of(to),
            accepted: rate_of(accepted),
            generation: generation.max(0) as u64,
        })
    }
}
