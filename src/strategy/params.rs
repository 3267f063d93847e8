//! An operation's typed parameters (`[operations.NAME.params.X]`): kinds,
//! defaults, bounds, and strings that hold a list (`separator`,
//! `max_parts`, `part_pattern`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};
use toml::Spanned;

use super::coerce::ParamKind;
use crate::diag::Diagnostic;

/// Template variables every operation has besides its parameters.
pub const BUILTIN_VARS: &[&str] = &["base_url"];

#[derive(Clone, Copy)]
struct Src<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Src<'_> {
    fn at(&self, span: std::ops::Range<usize>, msg: String) -> Diagnostic {
        Diagnostic::at(self.path, self.text, Some(span), msg)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParamFile {
    #[serde(rename = "type")]
    kind: ParamKind,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    default: Option<toml::Value>,
    #[serde(default)]
    description: String,
    /// Allowed values of an `enum`.
    #[serde(default)]
    values: Vec<String>,
    #[serde(default)]
    minimum: Option<i64>,
    #[serde(default)]
    maximum: Option<i64>,
    /// A string holding a list: its separator (`|`), at most `max_parts`
    /// parts, each matching `part_pattern`.
    #[serde(default)]
    separator: Option<String>,
    #[serde(default)]
    max_parts: Option<usize>,
    #[serde(default)]
    part_pattern: Option<String>,
}

/// How a string parameter holding a list is checked.
#[derive(Debug, Clone)]
pub struct Parts {
    pub separator: String,
    pub max: Option<usize>,
    pub pattern: Option<regex::Regex>,
}

impl Parts {
    /// Why `s` is not such a list, if it is not.
    pub(super) fn problem(&self, s: &str) -> Option<String> {
        let parts: Vec<&str> = s.split(self.separator.as_str()).map(str::trim).collect();
        if let Some(max) = self.max
            && parts.len() > max
        {
            return Some(format!(
                "takes at most {max} items joined with `{}`, got {}",
                self.separator,
                parts.len()
            ));
        }
        if let Some(bad) = parts.iter().find(|p| p.is_empty()) {
            return Some(format!(
                "has an empty item `{bad}` between `{}`",
                self.separator
            ));
        }
        let re = self.pattern.as_ref()?;
        parts
            .iter()
            .find(|p| !re.is_match(p))
            .map(|p| format!("item `{p}` does not match {}", re.as_str()))
    }
}

/// One declared parameter.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    pub required: bool,
    pub default: Option<Value>,
    pub description: String,
    pub values: Vec<String>,
    pub minimum: Option<i64>,
    pub maximum: Option<i64>,
    /// A list in a string (`separator`, `max_parts`, `part_pattern`).
    pub parts: Option<Parts>,
}

pub(super) fn compile_params(
    files: &BTreeMap<String, Spanned<ParamFile>>,
    name: &str,
    path: &Path,
    text: &str,
) -> Result<Vec<Param>, Diagnostic> {
    let src = Src { path, text };
    let mut params = Vec::new();
    for (pname, p) in files {
        let span = p.span();
        let p = p.get_ref();
        if BUILTIN_VARS.contains(&pname.as_str()) {
            let why = format!("operations.{name}.params.{pname}: `{pname}` is reserved");
            return Err(src.at(span, format!("{why} (the strategy's own base_url)")));
        }
        if p.kind == ParamKind::Enum && p.values.is_empty() {
            return Err(src.at(
                span,
                format!("operations.{name}.params.{pname}: an enum needs `values`"),
            ));
        }
        let default = match &p.default {
            Some(v) => Some(coerce(p, pname, &toml_to_json(v)).map_err(|e| {
                src.at(
                    span.clone(),
                    format!("operations.{name}.params.{pname}: default {e}"),
                )
            })?),
            None => None,
        };
        let parts = match (&p.separator, p.kind) {
            (Some(sep), ParamKind::String) if !sep.is_empty() => Some(Parts {
                separator: sep.clone(),
                max: p.max_parts,
                pattern: match &p.part_pattern {
                    Some(r) => Some(regex::Regex::new(r).map_err(|e| {
                        src.at(
                            span.clone(),
                            format!("operations.{name}.params.{pname}.part_pattern: {e}"),
                        )
                    })?),
                    None => None,
                },
            }),
            (None, _) if p.max_parts.is_none() && p.part_pattern.is_none() => None,
            _ => {
                return Err(src.at(
                    span,
                    format!(
                        "operations.{name}.params.{pname}: max_parts and part_pattern need a string parameter with a non-empty separator"
                    ),
                ));
            }
        };
        params.push(Param {
            name: pname.clone(),
            kind: p.kind,
            required: p.required,
            default,
            description: p.description.clone(),
            values: p.values.clone(),
            minimum: p.minimum,
            maximum: p.maximum,
            parts,
        });
    }
    Ok(params)
}

/// TOML value to JSON.
pub fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

fn coerce(p: &ParamFile, _name: &str, v: &Value) -> std::result::Result<Value, String> {
    super::coerce::coerce_kind(p.kind, &p.values, p.minimum, p.maximum, v)
}
