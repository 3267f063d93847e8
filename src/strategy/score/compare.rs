//! One check against what judging its page gave ([`Judged`]): the
//! outcome (or another fair one), the count (with reviews from abroad
//! where the check allows them), `has_more`, and each wanted field of the
//! selected items, every difference named in a line a person can act on.

use serde_json::{Map, Value};

use crate::strategy::expect::is_blank;

use super::truth::{Check, Select};
use super::want::{same, show};

/// What judging one check gave.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The outcome's name; `None` when the page could not be judged at all.
    pub outcome: Option<String>,
    pub items: Vec<Map<String, Value>>,
    pub has_more: Option<bool>,
    /// Why extraction failed, or why judging could not run.
    pub error: Option<String>,
}

impl Judged {
    /// `ok, 10 items`, or the outcome.
    pub fn summary(&self) -> String {
        match self.outcome.as_deref() {
            Some(o @ ("ok" | "empty")) => format!("{o}, {} items", self.items.len()),
            Some(o) => o.to_string(),
            None => "error".to_string(),
        }
    }
}

/// What differs between a check and what was judged (empty: right), and,
/// with `verbose`, every field that was right.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Compared {
    pub problems: Vec<String>,
    pub right: Vec<String>,
}

/// Compare what was judged with what a check wants.
pub fn compare(check: &Check, got: &Judged) -> Compared {
    let mut out = Compared::default();
    let outcome = got.outcome.as_deref().unwrap_or("error");
    let want = check.outcome.as_str();
    if outcome != want && !check.outcome_any.iter().any(|o| o.as_str() == outcome) {
        // Why extraction failed, or why the page could not be judged.
        let why = got
            .error
            .as_ref()
            .filter(|_| matches!(outcome, "failed" | "error"))
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        out.problems
            .push(format!("outcome: want {want}, got {outcome}{why}"));
    }
    if let Some(count) = check.count
        && got.items.len() != count
        && !counts_with_foreign(check, count, &got.items)
    {
        out.problems
            .push(format!("items: want {count}, got {}", got.items.len()));
    }
    if let Some(want_more) = check.has_more
        && outcome == want
        && got.has_more != Some(want_more)
    {
        let has = got
            .has_more
            .map_or_else(|| "null".to_string(), |b| b.to_string());
        out.problems
            .push(format!("has_more: want {want_more}, got {has}"));
    }
    for sel in &check.items {
        let item = match &sel.select {
            Select::At(i) => got.items.get(*i),
            Select::Asin(a) => got
                .items
                .iter()
                .find(|i| i.get("asin").and_then(Value::as_str) == Some(a)),
        };
        let Some(item) = item else {
            // With no items at all, the outcome or count already says so.
            if !got.items.is_empty() {
                out.problems.push(format!("{}: not found", sel.select));
            }
            continue;
        };
        for (field, want) in &sel.fields {
            let value = item.get(field);
            if same(want, value) {
                out.right
                    .push(format!("{} `{field}` = {}", sel.select, show(value)));
            } else {
                out.problems.push(format!(
                    "{} `{field}`: want {want}, got {}",
                    sel.select,
                    show(value)
                ));
            }
        }
    }
    out
}

/// Whether `items` are `count` local ones plus the foreign ones the check
/// allows: `count_with_foreign` in all, each foreign one naming its country.
fn counts_with_foreign(check: &Check, count: usize, items: &[Map<String, Value>]) -> bool {
    let Some(all) = check.count_with_foreign.filter(|n| *n > 0) else {
        return false;
    };
    let country = |i: &Map<String, Value>| match i.get("country") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.clone()),
    };
    let local_want = check.local_country.clone().map(Value::String);
    let local = items.iter().filter(|i| country(i) == local_want).count();
    let foreign = items
        .iter()
        .filter(|i| !is_blank(i.get("country")) && country(i) != local_want)
        .count();
    items.len() == all && local == count && local + foreign == all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Check {
        serde_json::from_value(v).expect("a valid check")
    }

    fn items(countries: &[Option<&str>]) -> Vec<Map<String, Value>> {
        countries
            .iter()
            .map(|c| {
                let mut m = Map::new();
                if let Some(c) = c {
                    m.insert("country".into(), json!(c));
                }
                m
            })
            .collect()
    }

    fn judged(items: Vec<Map<String, Value>>) -> Judged {
        Judged {
            outcome: Some("ok".into()),
            items,
            has_more: Some(false),
            error: None,
        }
    }

    #[test]
    fn count_with_foreign_allows_reviews_from_abroad_that_say_their_country() {
        let c = check(json!({
            "operation": "top_reviews", "outcome": "ok", "count": 2,
            "count_with_foreign": 4, "local_country": "Mexico"
        }));
        let right = items(&[Some("Mexico"), Some("Mexico"), Some("Spain"), Some("Chile")]);
        assert_eq!(compare(&c, &judged(right)).problems, Vec::<String>::new());
        // Exactly `count` is right too.
        let local = items(&[Some("Mexico"), Some("Mexico")]);
        assert!(compare(&c, &judged(local)).problems.is_empty());
        // A foreign review that does not say its country is not allowed.
        let unnamed = items(&[Some("Mexico"), Some("Mexico"), Some("Spain"), None]);
        assert_eq!(
            compare(&c, &judged(unnamed)).problems,
            vec!["items: want 2, got 4".to_string()]
        );
        // Three local ones are not two.
        let more = items(&[
            Some("Mexico"),
            Some("Mexico"),
            Some("Mexico"),
            Some("Chile"),
        ]);
        assert!(!compare(&c, &judged(more)).problems.is_empty());
        // Without count_with_foreign the count is exact.
        let strict = check(json!({"operation": "x", "outcome": "ok", "count": 2}));
        let four = items(&[Some("Mexico"), Some("Mexico"), Some("Spain"), Some("Chile")]);
        assert_eq!(
            compare(&strict, &judged(four)).problems,
            vec!["items: want 2, got 4".to_string()]
        );
    }

    #[test]
    fn compare_names_what_differs() {
        let c = check(json!({
            "operation": "reviews", "outcome": "ok", "count": 1, "has_more": true,
            "items": [{"at": 0, "fields": {"rating": 5, "title": "Great", "author": null}},
                      {"asin": "B0X", "fields": {"rating": 1}}]
        }));
        let mut item = Map::new();
        item.insert("rating".into(), json!(4));
        item.insert("title".into(), json!("Great"));
        let got = Judged {
            outcome: Some("ok".into()),
            items: vec![item],
            has_more: Some(false),
            error: None,
        };
        let cmp = compare(&c, &got);
        assert_eq!(
            cmp.problems,
            vec![
                "has_more: want true, got false".to_string(),
                "item 0 `rating`: want 5, got 4".to_string(),
                "asin B0X: not found".to_string(),
            ]
        );
        assert_eq!(
            cmp.right,
            // (json! sorts the keys; a file keeps its order)
            vec![
                "item 0 `author` = null".to_string(),
                "item 0 `title` = \"Great\"".to_string(),
            ]
        );
        // A wrong outcome: has_more is not compared, the reason is given.
        let blocked = Judged {
            outcome: Some("hard_block".into()),
            items: Vec::new(),
            has_more: None,
            error: Some("not content: hard_block".into()),
        };
        assert_eq!(
            compare(&c, &blocked).problems,
            vec![
                "outcome: want ok, got hard_block".to_string(),
                "items: want 1, got 0".to_string(),
            ]
        );
        // A failed extraction says why.
        let failed = Judged {
            outcome: Some("failed".into()),
            error: Some("no items found".into()),
            ..blocked.clone()
        };
        assert_eq!(
            compare(&c, &failed).problems[0],
            "outcome: want ok, got failed (no items found)"
        );
        // outcome_any: another fair reading.
        let any =
            check(json!({"operation": "x", "outcome": "hard_block", "outcome_any": ["challenge"]}));
        let challenge = Judged {
            outcome: Some("challenge".into()),
            ..blocked
        };
        assert!(compare(&any, &challenge).problems.is_empty());
    }
}
