//! What a page of an operation tells about the strategy's selectors: its
//! items counted for drift (`drift.rs`), checked against the operation's
//! `expect` rules.

use serde_json::{Map, Value, json};

use super::Lease;

impl Lease {
    /// One page of `operation` on this lease's strategy: counted for drift
    /// (an event when a field starts or stops drifting), checked against
    /// the operation's live `expect` rules; the warnings for the result.
    pub fn observe_page(
        &self,
        op: &crate::strategy::operation::Operation,
        items: Option<&[Map<String, Value>]>,
    ) -> Vec<String> {
        let (changes, mut warnings) = self.leases.drift.page(&self.strategy, &op.name, items);
        for c in changes {
            let kind = if c.drifting {
                "drifting"
            } else {
                "drift_cleared"
            };
            self.leases.events.emit(
                kind,
                None,
                Some(&self.strategy),
                json!({"operation": c.operation, "field": c.field,
                       "empty_ratio": c.ratio, "baseline": c.baseline}),
            );
        }
        if let (Some(expect), Some(items)) = (&op.expect, items) {
            let ex = crate::strategy::extract::Extracted {
                items: items.to_vec(),
                ..Default::default()
            };
            for p in expect.check("ok", Some(&ex)) {
                metrics::counter!("idpool_extract_expect_failures_total",
                    "strategy" => self.strategy.clone(), "operation" => op.name.clone())
                .increment(1);
                warnings.push(format!("{}/{} expect: {p}", self.strategy, op.name));
            }
        }
        warnings
    }
}
