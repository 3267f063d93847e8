//! A parameter's value coerced to its declared kind (a number given as a
//! string, `"true"` for a boolean), with its bounds checked.

use serde::Deserialize;
use serde_json::{Value, json};

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    String,
    Integer,
    Boolean,
    Enum,
}

pub(super) fn coerce_kind(
    kind: ParamKind,
    values: &[String],
    min: Option<i64>,
    max: Option<i64>,
    v: &Value,
) -> std::result::Result<Value, String> {
    match kind {
        ParamKind::String => match v {
            Value::String(_) => Ok(v.clone()),
            Value::Number(n) => Ok(Value::String(n.to_string())),
            _ => Err(format!("must be a string, got {v}")),
        },
        ParamKind::Integer => {
            let n = match v {
                Value::Number(n) => n
                    .as_i64()
                    .ok_or_else(|| format!("must be an integer, got {n}"))?,
                Value::String(s) => s
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("must be an integer, got \"{s}\""))?,
                _ => return Err(format!("must be an integer, got {v}")),
            };
            if let Some(m) = min.filter(|m| n < *m) {
                return Err(format!("must be at least {m}, got {n}"));
            }
            if let Some(m) = max.filter(|m| n > *m) {
                return Err(format!("must be at most {m}, got {n}"));
            }
            Ok(json!(n))
        }
        ParamKind::Boolean => match v {
            Value::Bool(_) => Ok(v.clone()),
            Value::String(s) if s == "true" || s == "false" => Ok(Value::Bool(s == "true")),
            _ => Err(format!("must be true or false, got {v}")),
        },
        ParamKind::Enum => match v.as_str() {
            Some(s) if values.iter().any(|x| x == s) => Ok(v.clone()),
            _ => Err(format!("must be one of {}, got {v}", values.join(", "))),
        },
    }
}
