//! What an operation's result should look like: rules a strategy author
//! writes beside a fixture (`idpool strategy test`) and, as
//! `[operations.X.expect]`, checks made on live results. Either the exact
//! items, or rules: how many items, and per field required / range /
//! format / pattern / one of.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::extract::Extracted;

/// The expectation of one result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The outcome (`ok`, `empty`, `hard_block`, `tier_block`,
    /// `rate_limited`, `challenge`, `login_required`, `failed`); default:
    /// content (`ok` or `empty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<usize>,
    /// Whether the page links to a next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    /// Rules per field, for every item.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, FieldRule>,
    /// The exact items, in order (what `idpool strategy record` saw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<Map<String, Value>>>,
    /// Fixtures only: what the `[session]` markers say of the page
    /// (`logged_in`, `logged_out`, `unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
    /// Fixtures only: the marketplace the page's URL is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<String>,
}

/// Rules for one field of every item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldRule {
    /// Never null, never an empty string or list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// A number within `[low, high]` (when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    /// `iso_date` (YYYY-MM-DD), `url` (absolute http or https), `integer`,
    /// `number`, `text` (a non-empty string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// A regular expression the text matches (when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// One of these values (when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    IsoDate,
    Url,
    Integer,
    Number,
    Text,
}

/// Null, an empty string or an empty list: what a selector that matched
/// nothing gives.
pub fn is_blank(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.trim().is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

impl Expect {
    /// Check the rules' own sense (a pattern that compiles); `Err` names
    /// the field.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(l) = &self.login
            && !matches!(l.as_str(), "logged_in" | "logged_out" | "unknown")
        {
            return Err(format!(
                "login: `{l}` is not logged_in, logged_out or unknown"
            ));
        }
        for (name, rule) in &self.fields {
            if let Some(p) = &rule.pattern {
                regex::Regex::new(p).map_err(|e| format!("fields.{name}.pattern: {e}"))?;
            }
            if let Some([lo, hi]) = rule.range
                && lo > hi
            {
                return Err(format!("fields.{name}.range: {lo} is above {hi}"));
            }
        }
        Ok(())
    }

    /// What does not hold for `outcome` and what was extracted, one line
    /// each (empty: it holds).
    pub fn check(&self, outcome: &str, extracted: Option<&Extracted>) -> Vec<String> {
        let mut out = Vec::new();
        let content = matches!(outcome, "ok" | "empty");
        match &self.outcome {
            Some(want) if want != outcome => {
                out.push(format!("outcome: expected {want}, got {outcome}"));
                return out;
            }
            None if !content => {
                out.push(format!(
                    "outcome: expected content (ok or empty), got {outcome}"
                ));
                return out;
            }
            _ => {}
        }
        let Some(ex) = extracted else {
            return out;
        };
        let n = ex.items.len();
        if let Some(min) = self.min_items
            && n < min
        {
            out.push(format!("items: expected at least {min}, got {n}"));
        }
        if let Some(max) = self.max_items
            && n > max
        {
            out.push(format!("items: expected at most {max}, got {n}"));
        }
        if let Some(more) = self.has_more
            && more != ex.has_more
        {
            out.push(format!("has_more: expected {more}, got {}", ex.has_more));
        }
        for (i, item) in ex.items.iter().enumerate() {
            for (name, rule) in &self.fields {
                if let Some(why) = rule.check(item.get(name)) {
                    out.push(format!("item {i} `{name}`: {why}"));
                }
            }
        }
        if let Some(items) = &self.items {
            out.extend(diff_items(items, &ex.items));
        }
        out
    }
}

impl FieldRule {
    /// Why `v` breaks this rule, if it does.
    pub fn check(&self, v: Option<&Value>) -> Option<String> {
        if is_blank(v) {
            return self.required.then(|| format!("required, got {}", shown(v)));
        }
        let v = v?;
        if let Some([lo, hi]) = self.range {
            match v.as_f64() {
                Some(x) if x >= lo && x <= hi => {}
                _ => return Some(format!("expected a number in {lo}..{hi}, got {v}")),
            }
        }
        if let Some(f) = self.format
            && !f.holds(v)
        {
            return Some(format!("expected {}, got {v}", f.name()));
        }
        if let Some(p) = &self.pattern {
            let text = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            if !regex::Regex::new(p).is_ok_and(|re| re.is_match(&text)) {
                return Some(format!("expected to match /{p}/, got {v}"));
            }
        }
        if let Some(allowed) = &self.one_of
            && !allowed.contains(v)
        {
            return Some(format!(
                "expected one of {}, got {v}",
                Value::from(allowed.clone())
            ));
        }
        None
    }
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::IsoDate => "an ISO date (YYYY-MM-DD)",
            Format::Url => "an absolute http(s) URL",
            Format::Integer => "an integer",
            Format::Number => "a number",
            Format::Text => "text",
        }
    }

    fn holds(self, v: &Value) -> bool {
        match self {
            Format::IsoDate => v.as_str().is_some_and(iso_date),
            Format::Url => v
                .as_str()
                .and_then(|s| url::Url::parse(s).ok())
                .is_some_and(|u| matches!(u.scheme(), "http" | "https")),
            Format::Integer => v.is_i64() || v.is_u64(),
            Format::Number => v.is_number(),
            Format::Text => v.as_str().is_some_and(|s| !s.trim().is_empty()),
        }
    }
}

/// `YYYY-MM-DD` (optionally followed by a time), a real calendar day.
fn iso_date(s: &str) -> bool {
    let d = s.get(..10).unwrap_or_default();
    let parts: Vec<&str> = d.split('-').collect();
    let [y, m, day] = parts.as_slice() else {
        return false;
    };
    let (Ok(y), Ok(m), Ok(day)) = (y.parse::<i32>(), m.parse::<u8>(), day.parse::<u8>()) else {
        return false;
    };
    y > 0 && time::Month::try_from(m).is_ok_and(|m| day >= 1 && day <= m.length(y))
}

fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "nothing".into(), Value::to_string)
}

/// The expected items against those extracted, field by field (at most 20
/// lines, then how many more).
pub fn diff_items(want: &[Map<String, Value>], got: &[Map<String, Value>]) -> Vec<String> {
    let mut out = Vec::new();
    if want.len() != got.len() {
        out.push(format!("items: expected {}, got {}", want.len(), got.len()));
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let keys: std::collections::BTreeSet<&String> = w.keys().chain(g.keys()).collect();
        // Absent and null are the same (TOML, where fixtures live, has no null).
        let get = |m: &Map<String, Value>, k: &str| m.get(k).filter(|v| !v.is_null()).cloned();
        for k in keys {
            if get(w, k) != get(g, k) {
                out.push(format!(
                    "item {i} `{k}`: expected {}, got {}",
                    shown(w.get(k).filter(|v| !v.is_null())).replace("nothing", "null"),
                    shown(g.get(k).filter(|v| !v.is_null())).replace("nothing", "null")
                ));
            }
        }
    }
    for (i, g) in got.iter().enumerate().skip(want.len()) {
        out.push(format!(
            "item {i}: not expected: {}",
            Value::Object(g.clone())
        ));
    }
    for i in got.len()..want.len() {
        out.push(format!("item {i}: missing"));
    }
    if out.len() > 20 {
        let more = out.len() - 20;
        out.truncate(20);
        out.push(format!("… and {more} more differences"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(v: Value) -> Vec<Map<String, Value>> {
        serde_json::from_value(v).expect("items")
    }

    #[test]
    fn rules_name_the_item_and_field_that_break_them() {
        let e: Expect = toml::from_str(
            "min_items = 2\n[fields.rating]\nrange = [1, 5]\n[fields.date]\nformat = \"iso_date\"\n\
             [fields.body]\nrequired = true\n",
        )
        .expect("rules");
        let good = Extracted {
            items: items(json!([{"rating": 5, "date": "2026-02-28", "body": "fine"},
                                {"rating": 1, "date": "2024-02-29", "body": "ok"}])),
            ..Extracted::default()
        };
        assert!(
            e.check("ok", Some(&good)).is_empty(),
            "{:?}",
            e.check("ok", Some(&good))
        );
        let bad = Extracted {
            items: items(json!([{"rating": 7, "date": "2026-02-30", "body": null}])),
            ..Extracted::default()
        };
        let problems = e.check("ok", Some(&bad));
        assert_eq!(
            problems,
            [
                "items: expected at least 2, got 1",
                "item 0 `body`: required, got null",
                "item 0 `date`: expected an ISO date (YYYY-MM-DD), got \"2026-02-30\"",
                "item 0 `rating`: expected a number in 1..5, got 7",
            ]
        );
        assert_eq!(
            e.check("hard_block", None),
            ["outcome: expected content (ok or empty), got hard_block"]
        );
    }

    #[test]
    fn exact_items_diff_field_by_field() {
        let want = items(json!([{"a": 1, "b": "x"}, {"a": 2}]));
        let got = items(json!([{"a": 1, "b": null}]));
        assert_eq!(
            diff_items(&want, &got),
            [
                "items: expected 2, got 1",
                "item 0 `b`: expected \"x\", got null",
                "item 1: missing"
            ]
        );
    }
}
