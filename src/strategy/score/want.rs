//! What one field of an item should be ([`Want`], as `truth.json` writes
//! it), and whether an extracted value is it ([`same`]): leniently where a
//! person's reading and an extraction may differ in form only (`"24,99"`
//! and `24.99`, `"2K+"` and 2000, whitespace), exactly otherwise.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::strategy::expect::is_blank;

/// What one field should be.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub enum Want {
    /// `null`: blank (absent, null, `""`, `[]`).
    Blank,
    /// Exactly this boolean.
    Bool(bool),
    /// This number; a string is read leniently (`"1,279.00"`, `"24,99"`).
    Number(serde_json::Number),
    /// This text, whitespace collapsed; `"2K+"` also matches the number 2000.
    Text(String),
    /// `{"contains": s}`: the text holds `s`, case-insensitively.
    Contains(String),
    /// `{"startswith": s}`: the text, whitespace collapsed, starts with `s`.
    StartsWith(String),
    /// `{"not_contains": s}`: the text does not hold `s`.
    NotContains(String),
}

impl TryFrom<Value> for Want {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        Ok(match v {
            Value::Null => Want::Blank,
            Value::Bool(b) => Want::Bool(b),
            Value::Number(n) => Want::Number(n),
            Value::String(s) => Want::Text(s),
            Value::Object(m) => {
                let mut it = m.into_iter();
                match (it.next(), it.next()) {
                    (Some((k, Value::String(s))), None) => match k.as_str() {
                        "contains" => Want::Contains(s),
                        "startswith" => Want::StartsWith(s),
                        "not_contains" => Want::NotContains(s),
                        _ => {
                            return Err(format!(
                                "unknown rule `{k}`, expected contains, startswith or not_contains"
                            ));
                        }
                    },
                    _ => {
                        return Err(
                            "a rule is one of {\"contains\": s}, {\"startswith\": s}, {\"not_contains\": s}"
                                .into(),
                        );
                    }
                }
            }
            Value::Array(_) => {
                return Err(
                    "a list cannot be compared: want null, a boolean, a number, a text or a rule"
                        .into(),
                );
            }
        })
    }
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Want::Blank => f.write_str("null"),
            Want::Bool(b) => write!(f, "{b}"),
            Want::Number(n) => write!(f, "{n}"),
            Want::Text(s) => f.write_str(&show(Some(&Value::String(s.clone())))),
            Want::Contains(s) => write!(f, "contains {}", quoted(s)),
            Want::StartsWith(s) => write!(f, "startswith {}", quoted(s)),
            Want::NotContains(s) => write!(f, "not_contains {}", quoted(s)),
        }
    }
}

/// A rule's text in full, as written.
fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// A value as a report shows it: JSON, cut to 60 characters.
pub fn show(v: Option<&Value>) -> String {
    let s = v.map_or_else(|| "null".to_string(), Value::to_string);
    if s.chars().count() <= 60 {
        s
    } else {
        let head: String = s.chars().take(57).collect();
        format!("{head}...")
    }
}

/// Whether `got` (a field as extracted; `None` when absent) is what `want` says.
pub fn same(want: &Want, got: Option<&Value>) -> bool {
    let text = || match got {
        _ if is_blank(got) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    };
    match want {
        Want::Contains(s) => text().to_lowercase().contains(&s.to_lowercase()),
        Want::StartsWith(s) => norm(&text()).starts_with(s.as_str()),
        Want::NotContains(s) => !text().contains(s.as_str()),
        Want::Blank => is_blank(got),
        Want::Bool(b) => got == Some(&Value::Bool(*b)),
        Want::Number(n) => match (n.as_f64(), got.and_then(num)) {
            (Some(w), Some(g)) => (g - w).abs() < 1e-6,
            _ => false,
        },
        Want::Text(s) => match (thousands(s), got) {
            // "1K+ bought" read as its lower bound.
            (Some(k), Some(Value::Number(g))) => g.as_f64().is_some_and(|g| g == k),
            (_, Some(Value::String(g))) => norm(g) == norm(s),
            _ => false,
        },
    }
}

/// `"2K+"` as 2000.
fn thousands(s: &str) -> Option<f64> {
    let n = s.strip_suffix("K+")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse::<f64>().ok().map(|n| n * 1000.0)
}

/// Whitespace collapsed and trimmed.
fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A number, or a string read as one: only its digits, dots and commas
/// kept; `24,99` is 24.99, `92.284` is 92284, `1,279.00` is 1279.
pub fn num(v: &Value) -> Option<f64> {
    let s = match v {
        Value::Number(n) => return n.as_f64(),
        Value::String(s) => s,
        _ => return None,
    };
    let s: String = s
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .collect();
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let decimal_comma = match s.split_once(',') {
        Some((a, b)) => digits(a) && digits(b) && b.len() <= 2,
        None => false,
    };
    let thousand_dots = {
        let mut parts = s.split('.');
        let first = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        digits(first)
            && first.len() <= 3
            && !rest.is_empty()
            && rest.iter().all(|p| digits(p) && p.len() == 3)
    };
    let s = if decimal_comma {
        s.replace(',', ".")
    } else if thousand_dots {
        s.replace('.', "")
    } else {
        s.replace(',', "")
    };
    // Rust reads "5." and ".5" as Python's float() does; not "" or ".".
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn want(v: Value) -> Want {
        Want::try_from(v).expect("a valid want")
    }

    #[test]
    fn same_compares_as_a_person_reads() {
        // Numbers, numerically, from a string leniently.
        assert!(same(&want(json!(24.99)), Some(&json!("24,99"))));
        assert!(same(&want(json!(24.99)), Some(&json!("$24.99"))));
        assert!(same(&want(json!(1279)), Some(&json!("1,279.00"))));
        assert!(same(&want(json!(92284)), Some(&json!("92.284"))));
        assert!(same(&want(json!(4.4)), Some(&json!(4.4))));
        assert!(same(&want(json!(5)), Some(&json!(5.0))));
        assert!(!same(&want(json!(24.99)), Some(&json!(24))));
        assert!(!same(&want(json!(1)), Some(&json!(true))));
        assert!(!same(&want(json!(1)), None));
        assert!(!same(&want(json!(1)), Some(&json!("n/a"))));
        // null is blank.
        for blank in [None, Some(json!(null)), Some(json!("")), Some(json!([]))] {
            assert!(same(&Want::Blank, blank.as_ref()), "{blank:?}");
        }
        assert!(!same(&Want::Blank, Some(&json!(0))));
        assert!(!same(&Want::Blank, Some(&json!("x"))));
        // Booleans exactly.
        assert!(same(&want(json!(true)), Some(&json!(true))));
        assert!(!same(&want(json!(true)), Some(&json!(1))));
        assert!(!same(&want(json!(false)), None));
        // Text, whitespace collapsed; "NK+" against a number.
        assert!(same(
            &want(json!("As  advertised")),
            Some(&json!(" As advertised\n"))
        ));
        assert!(!same(
            &want(json!("As advertised")),
            Some(&json!("as advertised"))
        ));
        assert!(!same(&want(json!("5")), Some(&json!(5))));
        assert!(same(&want(json!("2K+")), Some(&json!(2000))));
        assert!(!same(&want(json!("2K+")), Some(&json!(2001))));
        assert!(same(&want(json!("2K+")), Some(&json!("2K+"))));
        // Rules.
        assert!(same(
            &want(json!({"contains": "in stock"})),
            Some(&json!("Only 2 In Stock"))
        ));
        assert!(!same(&want(json!({"contains": "x"})), None));
        assert!(same(
            &want(json!({"startswith": "Bright Lamp"})),
            Some(&json!("  Bright   Lamp B0TESTA1"))
        ));
        assert!(!same(
            &want(json!({"startswith": "bright"})),
            Some(&json!("Bright"))
        ));
        assert!(same(&want(json!({"not_contains": "Sponsored"})), None));
        assert!(!same(
            &want(json!({"not_contains": "Sponsored"})),
            Some(&json!("Sponsored ad"))
        ));
    }

    #[test]
    fn wants_that_cannot_compare_are_refused() {
        assert!(Want::try_from(json!([1])).is_err());
        assert!(Want::try_from(json!({"equals": "x"})).is_err());
        assert!(Want::try_from(json!({"contains": "x", "startswith": "y"})).is_err());
        assert!(Want::try_from(json!({"contains": 3})).is_err());
    }

    #[test]
    fn num_reads_prices_and_counts() {
        // The same as score.sh's Python `num()` gives.
        for (s, n) in [
            ("₹1,02,900", Some(102900.0)),
            ("4,4", Some(4.4)),
            ("24,99", Some(24.99)),
            ("$24.99", Some(24.99)),
            ("1,279.00", Some(1279.0)),
            ("92.284", Some(92284.0)),
            ("1.234.567", Some(1234567.0)),
            ("12,345", Some(12345.0)),
            ("1,2,3", Some(123.0)),
            ("5.", Some(5.0)),
            (".5", Some(0.5)),
            ("", None),
            (".", None),
            ("n/a", None),
        ] {
            assert_eq!(num(&json!(s)), n, "{s}");
        }
        assert_eq!(num(&json!(3)), Some(3.0));
        assert_eq!(num(&json!(null)), None);
        assert_eq!(num(&json!(false)), None);
    }
}
