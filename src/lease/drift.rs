//! Selector drift: per (strategy, operation, field), how often a field
//! comes back empty, against its own history. A field that was never null
//! and is null on most of the last pages is `drifting` (the site changed
//! its markup); so is an operation whose pages come back without the items
//! they used to have. Bounded memory: the last [`RECENT`] pages and a
//! decaying sum of the ones before, per field.

use std::collections::{BTreeMap, HashMap, VecDeque};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use crate::strategy::expect::is_blank;

/// Pages in the recent window.
pub const RECENT: usize = 10;
/// Pages of history before anything is judged.
const MIN_HISTORY: f64 = 10.0;
/// History is halved past this many pages (old pages count less).
const MAX_HISTORY: f64 = 200.0;
/// Recent empty ratio above history by this much: drifting.
const JUMP: f64 = 0.5;
/// Back within this of history: recovered.
const CLEAR: f64 = 0.2;

/// One rate against its history.
#[derive(Debug, Default)]
struct Rate {
    recent: VecDeque<f64>,
    hist_sum: f64,
    hist_pages: f64,
    drifting: bool,
}

impl Rate {
    fn recent_ratio(&self) -> f64 {
        if self.recent.is_empty() {
            return 0.0;
        }
        self.recent.iter().sum::<f64>() / self.recent.len() as f64
    }

    fn baseline(&self) -> f64 {
        if self.hist_pages == 0.0 {
            0.0
        } else {
            self.hist_sum / self.hist_pages
        }
    }

    /// Add one page's ratio; `Some(true)`: it started drifting, `Some(false)`:
    /// it recovered.
    fn push(&mut self, ratio: f64) -> Option<bool> {
        self.recent.push_back(ratio);
        if self.recent.len() > RECENT
            && let Some(old) = self.recent.pop_front()
            && !self.drifting
        {
            // While drifting, history stays what was normal before.
            self.hist_sum += old;
            self.hist_pages += 1.0;
            if self.hist_pages > MAX_HISTORY {
                self.hist_sum /= 2.0;
                self.hist_pages /= 2.0;
            }
        }
        if self.hist_pages < MIN_HISTORY {
            return None;
        }
        let (now, before) = (self.recent_ratio(), self.baseline());
        match self.drifting {
            false if now - before >= JUMP => {
                self.drifting = true;
                Some(true)
            }
            true if now - before <= CLEAR => {
                self.drifting = false;
                Some(false)
            }
            _ => None,
        }
    }

    fn report(&self) -> Value {
        json!({
            "empty_ratio": round2(self.recent_ratio()),
            "baseline": round2(self.baseline()),
            "drifting": self.drifting,
        })
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[derive(Debug, Default)]
struct OpDrift {
    pages: u64,
    /// Pages that should have had items and came back without.
    missing: Rate,
    fields: BTreeMap<String, Rate>,
}

/// A change worth an event.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub operation: String,
    /// `None`: the operation's pages without items.
    pub field: Option<String>,
    pub drifting: bool,
    pub ratio: f64,
    pub baseline: f64,
}

/// Every operation's drift, by strategy, then operation.
#[derive(Debug, Default)]
pub struct Drift {
    ops: Mutex<HashMap<String, HashMap<String, OpDrift>>>,
}

impl Drift {
    /// One page of `operation`: its items, or `None` when it should have had
    /// items and had none (the extraction found nothing it could prove
    /// empty). What started or stopped drifting, and the warnings for the
    /// result (what drifts now). No allocation on the way for a known
    /// operation and fields: this runs on every page.
    pub fn page(
        &self,
        strategy: &str,
        operation: &str,
        items: Option<&[Map<String, Value>]>,
    ) -> (Vec<Change>, Vec<String>) {
        let mut ops = self.ops.lock();
        let by_op = match ops.get_mut(strategy) {
            Some(m) => m,
            None => ops.entry(strategy.to_string()).or_default(),
        };
        let op = match by_op.get_mut(operation) {
            Some(o) => o,
            None => by_op.entry(operation.to_string()).or_default(),
        };
        op.pages += 1;
        let mut changes = Vec::new();
        let mut change = |field: Option<&str>, r: &Rate, drifting: bool| {
            changes.push(Change {
                operation: operation.to_string(),
                field: field.map(str::to_string),
                drifting,
                ratio: round2(r.recent_ratio()),
                baseline: round2(r.baseline()),
            })
        };
        let missing = if items.is_some() { 0.0 } else { 1.0 };
        if let Some(d) = op.missing.push(missing) {
            change(None, &op.missing, d);
        }
        if let Some(items) = items.filter(|i| !i.is_empty()) {
            // Every item of a page has the same fields (the extractor's).
            for name in items[0].keys() {
                let blank = items.iter().filter(|i| is_blank(i.get(name))).count();
                let rate = match op.fields.get_mut(name) {
                    Some(r) => r,
                    None => op.fields.entry(name.clone()).or_default(),
                };
                if let Some(d) = rate.push(blank as f64 / items.len() as f64) {
                    change(Some(name), rate, d);
                }
            }
        }
        let warnings = Self::warnings_of(op, strategy, operation);
        (changes, warnings)
    }

    /// What is drifting in `operation` now, as result warnings.
    #[cfg(test)]
    fn warnings(&self, strategy: &str, operation: &str) -> Vec<String> {
        let ops = self.ops.lock();
        match ops.get(strategy).and_then(|m| m.get(operation)) {
            Some(op) => Self::warnings_of(op, strategy, operation),
            None => Vec::new(),
        }
    }

    /// The warnings of one operation's drift (nothing to format while
    /// nothing drifts).
    fn warnings_of(op: &OpDrift, strategy: &str, operation: &str) -> Vec<String> {
        let mut out = Vec::new();
        if !op.missing.drifting && !op.fields.values().any(|r| r.drifting) {
            return out;
        }
        if op.missing.drifting {
            out.push(format!(
                "{strategy}/{operation} is drifting: {:.0}% of the last pages had no items (before: {:.0}%); the site's markup may have changed",
                op.missing.recent_ratio() * 100.0,
                op.missing.baseline() * 100.0
            ));
        }
        for (name, r) in op.fields.iter().filter(|(_, r)| r.drifting) {
            out.push(format!(
                "field `{name}` of {strategy}/{operation} is drifting: empty in {:.0}% of the items of the last pages (before: {:.0}%); the site's markup may have changed",
                r.recent_ratio() * 100.0,
                r.baseline() * 100.0
            ));
        }
        out
    }

    /// `{strategy: {operation: {pages, drifting, without_items: {…},
    /// fields: {name: {empty_ratio, baseline, drifting}}}}}`.
    pub fn report(&self) -> Value {
        let ops = self.ops.lock();
        let mut out = Map::new();
        let mut strategies: Vec<&String> = ops.keys().collect();
        strategies.sort();
        for s in strategies {
            let by_op = &ops[s];
            let mut names: Vec<&String> = by_op.keys().collect();
            names.sort();
            let mut entry = Map::new();
            for name in names {
                let op = &by_op[name];
                let fields: Map<String, Value> = op
                    .fields
                    .iter()
                    .map(|(n, r)| (n.clone(), r.report()))
                    .collect();
                let drifting = op.missing.drifting || op.fields.values().any(|r| r.drifting);
                entry.insert(
                    name.clone(),
                    json!({
                        "pages": op.pages,
                        "drifting": drifting,
                        "without_items": op.missing.report(),
                        "fields": fields,
                    }),
                );
            }
            out.insert(s.clone(), Value::Object(entry));
        }
        Value::Object(out)
    }

    /// Every rate, for `/metrics`: (strategy, operation, field or `None`
    /// for pages without items, recent ratio, drifting).
    pub fn series(&self) -> Vec<(String, String, Option<String>, f64, bool)> {
        let ops = self.ops.lock();
        let mut out = Vec::new();
        for (s, by_op) in ops.iter() {
            for (o, op) in by_op {
                out.push((
                    s.clone(),
                    o.clone(),
                    None,
                    op.missing.recent_ratio(),
                    op.missing.drifting,
                ));
                for (f, r) in &op.fields {
                    out.push((
                        s.clone(),
                        o.clone(),
                        Some(f.clone()),
                        r.recent_ratio(),
                        r.drifting,
                    ));
                }
            }
        }
        out
    }

    /// Forget a strategy's history (it was reloaded: its selectors changed).
    pub fn forget(&self, strategy: &str) {
        self.ops.lock().remove(strategy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(rating: Option<i64>) -> Vec<Map<String, Value>> {
        (0..10)
            .map(|_| {
                let mut m = Map::new();
                m.insert("title".into(), json!("t"));
                m.insert("rating".into(), rating.map_or(Value::Null, |r| json!(r)));
                m
            })
            .collect()
    }

    #[test]
    fn a_field_that_empties_drifts_within_the_window_and_recovers_after_it() {
        let d = Drift::default();
        for _ in 0..20 {
            assert!(d.page("s", "reviews", Some(&page(Some(4)))).0.is_empty());
        }
        let mut at = None;
        for i in 0..RECENT {
            let (c, _) = d.page("s", "reviews", Some(&page(None)));
            if !c.is_empty() {
                assert_eq!(c[0].field.as_deref(), Some("rating"));
                assert!(c[0].drifting);
                at = Some(i + 1);
                break;
            }
        }
        assert_eq!(at, Some(5), "half the window empty: drifting");
        assert_eq!(d.warnings("s", "reviews").len(), 1);
        assert_eq!(
            d.report()["s"]["reviews"]["fields"]["rating"]["drifting"],
            true
        );
        assert_eq!(
            d.report()["s"]["reviews"]["fields"]["title"]["drifting"],
            false
        );
        let mut cleared = None;
        for i in 0..RECENT {
            if d.page("s", "reviews", Some(&page(Some(3))))
                .0
                .iter()
                .any(|c| !c.drifting)
            {
                cleared = Some(i + 1);
                break;
            }
        }
        assert!(cleared.is_some_and(|n| n <= RECENT), "{cleared:?}");
        assert!(d.warnings("s", "reviews").is_empty());
    }

    #[test]
    fn pages_without_items_drift_the_operation() {
        let d = Drift::default();
        for _ in 0..20 {
            d.page("s", "search", Some(&page(Some(1))));
        }
        let drifted = (0..RECENT).any(|_| {
            d.page("s", "search", None)
                .0
                .iter()
                .any(|c| c.field.is_none() && c.drifting)
        });
        assert!(drifted);
        assert!(d.warnings("s", "search")[0].contains("had no items"));
    }
}
