//! Bounded MCP sessions: which sessions to end so a new one fits under
//! `server.max_sessions_per_key` and `server.max_sessions`. Sessions a client
//! is not using now (no open stream) go first, the least recently used first;
//! the client of an ended session gets 404 and initializes again, as the MCP
//! spec provides.

use std::time::Instant;

/// The transport a session lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Sse,
}

/// One open session, as the choice sees it.
#[derive(Debug, Clone)]
pub struct Held {
    pub id: String,
    pub transport: Transport,
    /// The key (name/role) the session is bound to.
    pub owner: String,
    pub last_used: Instant,
    /// A stream is open on it now (a legacy SSE `GET /sse`).
    pub streaming: bool,
}

/// The sessions to end, in order, so that `owner` can open one more.
pub fn to_evict(held: &[Held], owner: &str, per_key: usize, total: usize) -> Vec<Held> {
    let mut order: Vec<&Held> = held.iter().collect();
    order.sort_by_key(|h| (h.streaming, h.last_used));
    let mut evict: Vec<Held> = Vec::new();
    let mine = held.iter().filter(|h| h.owner == owner).count();
    let over_mine = (mine + 1).saturating_sub(per_key.max(1));
    evict.extend(
        order
            .iter()
            .filter(|h| h.owner == owner)
            .take(over_mine)
            .map(|h| (*h).clone()),
    );
    let over_total = (held.len() + 1)
        .saturating_sub(total.max(1))
        .saturating_sub(evict.len());
    let more: Vec<Held> = order
        .iter()
        .filter(|h| !evict.iter().any(|e| e.id == h.id))
        .take(over_total)
        .map(|h| (*h).clone())
        .collect();
    evict.extend(more);
    evict
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Held, Transport, to_evict};

    fn held(id: &str, owner: &str, age_secs: u64, streaming: bool) -> Held {
        Held {
            id: id.into(),
            transport: Transport::Http,
            owner: owner.into(),
            last_used: Instant::now() - Duration::from_secs(age_secs),
            streaming,
        }
    }

    fn ids(v: Vec<Held>) -> Vec<String> {
        v.into_iter().map(|h| h.id).collect()
    }

    #[test]
    fn under_both_bounds_nothing_is_ended() {
        let h = [held("a", "k", 5, false), held("b", "j", 9, false)];
        assert!(to_evict(&h, "k", 2, 3).is_empty());
    }

    #[test]
    fn the_keys_least_recently_used_session_goes_first() {
        let h = [
            held("new", "k", 1, false),
            held("old", "k", 50, false),
            held("other", "j", 99, false),
        ];
        assert_eq!(ids(to_evict(&h, "k", 2, 10)), ["old"]);
    }

    #[test]
    fn an_open_stream_is_ended_only_when_nothing_idle_is_left() {
        let h = [held("live", "k", 90, true), held("idle", "k", 2, false)];
        assert_eq!(ids(to_evict(&h, "k", 2, 10)), ["idle"]);
        assert_eq!(ids(to_evict(&h, "k", 1, 10)), ["idle", "live"]);
    }

    #[test]
    fn the_total_bound_takes_the_oldest_of_anyone() {
        let h = [
            held("k1", "k", 3, false),
            held("j1", "j", 30, false),
            held("j2", "j", 20, false),
        ];
        assert_eq!(ids(to_evict(&h, "k", 10, 3)), ["j1"]);
        // The key's own bound and the total together: no session twice.
        assert_eq!(ids(to_evict(&h, "j", 2, 3)), ["j1"]);
        assert_eq!(ids(to_evict(&h, "j", 1, 2)), ["j1", "j2"]);
    }
}
