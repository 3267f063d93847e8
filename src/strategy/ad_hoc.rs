//! Extraction rules given in a call rather than a strategy file (`scrape`'s
//! `selectors`), compiled by the same code as a strategy's.

use std::path::Path;

use serde_json::{Map, Value};

use super::extract::{ExtractFile, Extractor, Format};

impl Extractor {
    /// Rules given in a call rather than a strategy file (`scrape`'s
    /// `selectors`): each field a CSS selector, or `{css, attr, regex,
    /// number, exists}` as in a strategy; read inside each `items` element,
    /// or in the whole page as one item.
    pub fn ad_hoc(items: Option<&str>, fields: &Map<String, Value>) -> Result<Extractor, String> {
        let mut table = toml::Table::new();
        table.insert("items".into(), items.unwrap_or(":root").into());
        let mut rules = toml::Table::new();
        for (name, rule) in fields {
            let rule = match rule {
                Value::String(css) => {
                    toml::Table::from_iter([("css".to_string(), css.as_str().into())])
                }
                Value::Object(o) => {
                    let mut t = toml::Table::new();
                    for (k, v) in o {
                        let v = match (k.as_str(), v) {
                            ("css" | "attr" | "regex", Value::String(x)) => {
                                toml::Value::from(x.as_str())
                            }
                            ("number" | "exists", Value::Bool(b)) => toml::Value::from(*b),
                            _ => {
                                return Err(format!(
                                    "field `{name}`: `{k}` must be {}",
                                    if matches!(k.as_str(), "number" | "exists") {
                                        "true or false"
                                    } else if matches!(k.as_str(), "css" | "attr" | "regex") {
                                        "a string"
                                    } else {
                                        "one of css, attr, regex, number, exists"
                                    }
                                ));
                            }
                        };
                        t.insert(k.clone(), v);
                    }
                    t
                }
                _ => {
                    return Err(format!(
                        "field `{name}` must be a CSS selector or an object"
                    ));
                }
            };
            rules.insert(name.clone(), rule.into());
        }
        table.insert("fields".into(), rules.into());
        let text = toml::to_string(&table).map_err(|e| e.to_string())?;
        let file: ExtractFile = toml::from_str(&text).map_err(|e| e.message().to_string())?;
        file.compile(
            Path::new("selectors"),
            &text,
            "selectors",
            Format::Html,
            None,
            None,
        )
        .map_err(|d| d.message)
    }
}
