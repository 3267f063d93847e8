//! How a loaded page looks to the strategy that judges it: what the browser
//! waits on (a challenge solves itself; a block will not) and the
//! strategies' markers say.

/// How a loaded page looks to the strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    /// A challenge interstitial: wait, it solves itself and reloads.
    Challenge,
    /// A block page or login wall: nothing more will come, stop waiting.
    Blocked,
    Normal,
}
