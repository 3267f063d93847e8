//! What the status page charts: per strategy, the outcomes of its requests
//! per minute over the last hour, in a ring of 60 buckets (bounded memory:
//! 60 × 6 counters per strategy, no external service).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

/// Buckets in the ring (one a minute).
pub const MINUTES: usize = 60;

/// The groups the page shows; each request outcome falls in one.
pub const KINDS: [&str; 6] = [
    "ok",
    "empty",
    "blocked",
    "rate_limited",
    "challenge",
    "failed",
];

/// Which group an outcome (`Outcome::as_str`) counts in: a hard or tier
/// block and a login wall are `blocked`; an outcome not tried is none.
fn kind_of(outcome: &str) -> Option<usize> {
    let k = match outcome {
        "ok" => 0,
        "empty" => 1,
        "hard_block" | "tier_block" | "login_required" => 2,
        "rate_limited" => 3,
        "challenge" => 4,
        "failed" => 5,
        _ => return None,
    };
    Some(k)
}

#[derive(Clone, Copy, Default)]
struct Bucket {
    /// The minute (unix seconds / 60) these counts are of.
    minute: u64,
    counts: [u32; KINDS.len()],
}

/// The rings of every strategy that has had a request.
#[derive(Default)]
pub struct Rates {
    rings: Mutex<HashMap<String, [Bucket; MINUTES]>>,
}

fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / 60)
        .unwrap_or(0)
}

impl Rates {
    /// Count one request of `strategy` that ended in `outcome`.
    pub fn record(&self, strategy: &str, outcome: &str) {
        self.record_at(strategy, outcome, minute_now());
    }

    fn record_at(&self, strategy: &str, outcome: &str, minute: u64) {
        let Some(kind) = kind_of(outcome) else { return };
        let mut rings = self.rings.lock();
        let ring = match rings.get_mut(strategy) {
            Some(r) => r,
            None => rings
                .entry(strategy.to_string())
                .or_insert([Bucket::default(); MINUTES]),
        };
        let b = &mut ring[(minute % MINUTES as u64) as usize];
        if b.minute != minute {
            *b = Bucket {
                minute,
                counts: [0; KINDS.len()],
            };
        }
        b.counts[kind] = b.counts[kind].saturating_add(1);
    }

    /// `{"bucket_secs": 60, "end_minute": M, "strategies": {name: {"ok": [60
    /// counts, oldest first], …, "totals": {"ok": n, …}}}}`.
    pub fn report(&self) -> Value {
        self.report_at(minute_now())
    }

    fn report_at(&self, now: u64) -> Value {
        let rings = self.rings.lock();
        let mut names: Vec<&String> = rings.keys().collect();
        names.sort();
        let mut out = Map::new();
        for name in names {
            let ring = &rings[name];
            let mut series = vec![vec![0u32; MINUTES]; KINDS.len()];
            for (age, minute) in (0..MINUTES as u64).map(|a| (a, now.wrapping_sub(a))) {
                let b = &ring[(minute % MINUTES as u64) as usize];
                if b.minute == minute {
                    for (k, s) in series.iter_mut().enumerate() {
                        s[MINUTES - 1 - age as usize] = b.counts[k];
                    }
                }
            }
            let mut entry = Map::new();
            let mut totals = Map::new();
            for (k, s) in series.into_iter().enumerate() {
                totals.insert(
                    KINDS[k].into(),
                    json!(s.iter().map(|&n| u64::from(n)).sum::<u64>()),
                );
                entry.insert(KINDS[k].into(), json!(s));
            }
            entry.insert("totals".into(), Value::Object(totals));
            out.insert(name.clone(), Value::Object(entry));
        }
        json!({"bucket_secs": 60, "end_minute": now, "strategies": out})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_minute_and_age_out_after_an_hour() {
        let r = Rates::default();
        r.record_at("shop", "ok", 1000);
        r.record_at("shop", "ok", 1000);
        r.record_at("shop", "hard_block", 1059);
        r.record_at("shop", "challenge", 1059);
        r.record_at("shop", "skipped", 1059);
        let v = r.report_at(1059);
        let shop = &v["strategies"]["shop"];
        assert_eq!(shop["ok"][0], 2, "the oldest bucket is first");
        assert_eq!(shop["blocked"][59], 1);
        assert_eq!(shop["challenge"][59], 1);
        assert_eq!(shop["totals"]["ok"], 2);
        assert_eq!(shop["totals"]["failed"], 0);
        // An hour on, minute 1000 is out of the window, and a new request
        // in its bucket starts it over.
        let later = r.report_at(1060);
        assert_eq!(later["strategies"]["shop"]["totals"]["ok"], 0);
        r.record_at("shop", "failed", 1060);
        let v = r.report_at(1060);
        assert_eq!(v["strategies"]["shop"]["failed"][59], 1);
        assert_eq!(v["strategies"]["shop"]["totals"]["blocked"], 1);
    }
}
