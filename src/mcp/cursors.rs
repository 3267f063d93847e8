//! The answers the dispatcher cut to a caller's budget, kept a while so
//! that `cursor` gives their next pieces without reaching a site again.
//!
//! Bounded three ways: a cursor lasts [`TTL`], at most [`MAX_ANSWERS`]
//! answers are kept, holding at most [`MAX_BYTES`] of JSON between them
//! (the oldest go first). A cursor belongs to the key that made the call
//! and to its tool: another key's cursor is answered like an unknown one.
//! Kept in memory only, on the daemon that answered the call.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use crate::tools::budget::At;

/// How long a cursor gives pieces.
pub const TTL: Duration = Duration::from_secs(600);
/// Answers kept at most, in all and per key.
const MAX_ANSWERS: usize = 256;
const MAX_PER_OWNER: usize = 64;
/// The JSON the kept answers hold between them, at most, and one answer.
const MAX_BYTES: usize = 64 << 20;
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

struct Kept {
    owner: String,
    tool: String,
    whole: Arc<Value>,
    bytes: usize,
    made: Instant,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Kept>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    bytes: usize,
}

/// The answers waiting for their next pieces.
#[derive(Default)]
pub struct Cursors {
    inner: Mutex<Inner>,
}

/// A cursor that gives nothing.
#[derive(Debug, PartialEq, Eq)]
pub struct Unknown(pub String);

impl Cursors {
    /// Keep `whole` (`bytes` of JSON) for `owner`'s calls of `tool`; the
    /// cursor of the piece at `at`. `None`: too large to keep (over
    /// [`MAX_ANSWER_BYTES`]). A key past its share loses its own oldest
    /// answer, never another key's.
    pub fn keep(
        &self,
        owner: &str,
        tool: &str,
        whole: Value,
        bytes: usize,
        at: &At,
    ) -> Option<String> {
        if bytes > MAX_ANSWER_BYTES {
            return None;
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let now = Instant::now();
        let mut g = self.inner.lock();
        g.expire(now);
        let mine: Vec<String> = (g.order.iter())
            .filter(|i| g.map.get(*i).is_some_and(|k| k.owner == owner))
            .cloned()
            .collect();
        if mine.len() >= MAX_PER_OWNER {
            g.remove(&mine[0]);
        }
        while !g.order.is_empty() && (g.order.len() >= MAX_ANSWERS || g.bytes + bytes > MAX_BYTES) {
            g.pop_oldest();
        }
        g.bytes += bytes;
        g.order.push_back(id.clone());
        g.map.insert(
            id.clone(),
            Kept {
                owner: owner.to_string(),
                tool: tool.to_string(),
                whole: Arc::new(whole),
                bytes,
                made: now,
            },
        );
        Some(token(&id, at))
    }

    /// The cursor of the piece at `at` of the answer `cursor` came from.
    pub fn next_token(cursor: &str, at: &At) -> String {
        let id = cursor.split('.').next().unwrap_or_default();
        token(id, at)
    }

    /// The answer `cursor` points into, and where its piece starts.
    pub fn find(&self, owner: &str, tool: &str, cursor: &str) -> Result<(Arc<Value>, At), Unknown> {
        let unknown = || {
            Unknown(format!(
                "unknown or expired cursor for `{tool}` (a cursor lasts {} minutes, for the key \
                 and tool that made it); call `{tool}` again without it",
                TTL.as_secs() / 60
            ))
        };
        let mut parts = cursor.splitn(3, '.');
        let (Some(id), Some(start), Some(field)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(unknown());
        };
        let start: usize = start.parse().map_err(|_| unknown())?;
        let mut g = self.inner.lock();
        g.expire(Instant::now());
        let kept = g.map.get(id).ok_or_else(unknown)?;
        if kept.owner != owner || kept.tool != tool {
            return Err(unknown());
        }
        Ok((
            kept.whole.clone(),
            At {
                field: field.to_string(),
                start,
            },
        ))
    }

    /// Answers kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map.len()
    }
}

/// `id.start.field`: the field last, since a field name may hold dots.
fn token(id: &str, at: &At) -> String {
    format!("{id}.{}.{}", at.start, at.field)
}

impl Inner {
    fn expire(&mut self, now: Instant) {
        while let Some(id) = self.order.front() {
            match self.map.get(id) {
                Some(k) if now.duration_since(k.made) < TTL => break,
                _ => self.pop_oldest(),
            }
        }
    }

    fn remove(&mut self, id: &str) {
        self.order.retain(|i| i != id);
        if let Some(k) = self.map.remove(id) {
            self.bytes = self.bytes.saturating_sub(k.bytes);
        }
    }

    fn pop_oldest(&mut self) {
        if let Some(id) = self.order.pop_front()
            && let Some(k) = self.map.remove(&id)
        {
            self.bytes = self.bytes.saturating_sub(k.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(start: usize) -> At {
        At {
            field: "items".into(),
            start,
        }
    }

    #[test]
    fn a_cursor_is_its_keys_and_its_tools() {
        let c = Cursors::default();
        let t = c
            .keep("alice", "extract", json!({"items": [1, 2]}), 20, &at(1))
            .expect("kept");
        let (whole, a) = c.find("alice", "extract", &t).expect("found");
        assert_eq!(whole["items"][1], 2);
        assert_eq!(a, at(1));
        assert!(c.find("bob", "extract", &t).is_err());
        assert!(c.find("alice", "get_reviews", &t).is_err());
        assert!(c.find("alice", "extract", "nonsense").is_err());
        let next = Cursors::next_token(&t, &at(2));
        assert_eq!(c.find("alice", "extract", &next).expect("next").1, at(2));
    }

    #[test]
    fn the_oldest_answers_go_first_past_the_bounds() {
        let c = Cursors::default();
        let keep = |owner: &str, bytes: usize| c.keep(owner, "t", json!({}), bytes, &at(0));
        // One key past its share loses its own oldest, not another key's.
        let other = keep("other", 10).expect("kept");
        let first = keep("k", 10).expect("kept");
        for _ in 0..MAX_PER_OWNER {
            keep("k", 10);
        }
        assert!(c.find("k", "t", &first).is_err());
        assert!(c.find("other", "t", &other).is_ok());
        assert_eq!(c.len(), MAX_PER_OWNER + 1);
        // In all: the oldest first.
        for i in 0..MAX_ANSWERS {
            keep(&format!("k{i}"), 10);
        }
        assert_eq!(c.len(), MAX_ANSWERS);
        assert!(c.find("other", "t", &other).is_err());
        // Too large to keep at all; large ones push out the oldest.
        assert!(keep("k", MAX_ANSWER_BYTES + 1).is_none());
        for _ in 0..4 {
            keep("big", MAX_ANSWER_BYTES).expect("kept");
        }
        assert_eq!(c.len(), 4, "four 16 MiB answers fill the 64 MiB");
    }
}
