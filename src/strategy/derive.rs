//! Fields worked out from other fields of an item, after extraction
//! (`[operations.NAME.derive]`). One kind for now: a ratio.
//!
//! ```toml
//! [operations.review_counts.derive]
//! ratio = { divide = ["written_reviews", "global_ratings"], digits = 3 }
//! ```
//!
//! A derived field is `null` when either number is missing or the divisor
//! is zero.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

/// One derived field as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeriveFile {
    divide: [String; 2],
    #[serde(default = "three")]
    digits: u32,
}

fn three() -> u32 {
    3
}

/// A compiled derived field.
#[derive(Debug, Clone)]
pub struct Derived {
    pub name: String,
    numerator: String,
    denominator: String,
    digits: u32,
}

/// Check the derived fields against the fields the operation extracts.
pub(super) fn compile(
    files: &BTreeMap<String, DeriveFile>,
    extracted: &[&str],
    op: &str,
) -> Result<Vec<Derived>, String> {
    let mut out = Vec::new();
    for (name, f) in files {
        for input in &f.divide {
            if !extracted.contains(&input.as_str()) {
                return Err(format!(
                    "operations.{op}.derive.{name}: `{input}` is not a field this operation extracts"
                ));
            }
        }
        if f.digits > 9 {
            return Err(format!(
                "operations.{op}.derive.{name}: digits must be 0..9"
            ));
        }
        out.push(Derived {
            name: name.clone(),
            numerator: f.divide[0].clone(),
            denominator: f.divide[1].clone(),
            digits: f.digits,
        });
    }
    Ok(out)
}

/// Add the derived fields to each item.
pub fn apply(derived: &[Derived], items: &mut [Map<String, Value>]) {
    for item in items {
        for d in derived {
            let num = item.get(&d.numerator).and_then(Value::as_f64);
            let den = item.get(&d.denominator).and_then(Value::as_f64);
            let v = match (num, den) {
                (Some(n), Some(q)) if q != 0.0 => {
                    let scale = 10f64.powi(d.digits as i32);
                    serde_json::Number::from_f64((n / q * scale).round() / scale)
                        .map_or(Value::Null, Value::Number)
                }
                _ => Value::Null,
            };
            item.insert(d.name.clone(), v);
        }
    }
}
