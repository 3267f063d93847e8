//! Extraction rules: from a response body to items with fields.
//!
//! HTML tiers use CSS selectors; JSON tiers use JSON pointers; `html_in_json`
//! tiers use CSS on the HTML found at `html_pointer`, and JSON pointers for
//! `empty` and `next` (pagination lives in the JSON there).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use scraper::{ElementRef, Html, Selector};
use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use super::operation::Format;
use crate::diag::Diagnostic;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractFile {
    items: Spanned<String>,
    #[serde(default)]
    fields: BTreeMap<String, FieldFile>,
    #[serde(default)]
    empty: Option<Spanned<String>>,
    #[serde(default)]
    next: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldFile {
    #[serde(default)]
    css: Option<Spanned<String>>,
    #[serde(default)]
    pointer: Option<Spanned<String>>,
    #[serde(default)]
    attr: Option<String>,
    #[serde(default)]
    regex: Option<Spanned<String>>,
    #[serde(default)]
    number: bool,
    #[serde(default)]
    exists: bool,
}

#[derive(Debug, Clone)]
enum Locator {
    Css(Selector),
    Pointer(String),
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    /// `None`: the item element / value itself.
    at: Option<Locator>,
    attr: Option<String>,
    regex: Option<regex::Regex>,
    number: bool,
    exists: bool,
}

/// Compiled extraction rules for one tier.
#[derive(Debug, Clone)]
pub struct Extractor {
    format: Format,
    items: Locator,
    fields: Vec<Field>,
    empty: Option<Locator>,
    next: Option<Locator>,
}

/// What a page yielded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub items: Vec<Map<String, Value>>,
    pub has_more: bool,
    /// The next page's URL, when the page links to it.
    pub next_url: Option<String>,
    /// The page proved itself genuinely empty.
    pub empty: bool,
}

fn pointer_ok(p: &str) -> bool {
    p.is_empty() || p.starts_with('/')
}

impl ExtractFile {
    pub(super) fn compile(
        &self,
        path: &Path,
        text: &str,
        label: &str,
        format: Format,
        next_override: Option<&Spanned<String>>,
        empty_override: Option<&Spanned<String>>,
    ) -> Result<Extractor, Diagnostic> {
        let next_rule = next_override.or(self.next.as_ref());
        let empty_rule = empty_override.or(self.empty.as_ref());
        let at =
            |span: std::ops::Range<usize>, msg: String| Diagnostic::at(path, text, Some(span), msg);
        let css = |s: &Spanned<String>, what: &str| {
            Selector::parse(s.get_ref()).map(Locator::Css).map_err(|e| {
                at(
                    s.span(),
                    format!(
                        "{label}.{what} `{}` is not a valid CSS selector ({e})",
                        s.get_ref()
                    ),
                )
            })
        };
        let ptr = |s: &Spanned<String>, what: &str| {
            if pointer_ok(s.get_ref()) {
                Ok(Locator::Pointer(s.get_ref().clone()))
            } else {
                Err(at(
                    s.span(),
                    format!(
                        "{label}.{what} `{}` is not a JSON pointer (use \"\" or \"/a/0/b\")",
                        s.get_ref()
                    ),
                ))
            }
        };
        let (items, empty, next) = match format {
            Format::Html => (
                css(&self.items, "items")?,
                empty_rule.map(|e| css(e, "empty")).transpose()?,
                next_rule.map(|n| css(n, "next")).transpose()?,
            ),
            Format::Json => (
                ptr(&self.items, "items")?,
                empty_rule.map(|e| ptr(e, "empty")).transpose()?,
                next_rule.map(|n| ptr(n, "next")).transpose()?,
            ),
            Format::HtmlInJson => (
                css(&self.items, "items")?,
                empty_rule.map(|e| ptr(e, "empty")).transpose()?,
                next_rule.map(|n| ptr(n, "next")).transpose()?,
            ),
        };
        let mut fields = Vec::new();
        for (name, f) in &self.fields {
            let flabel = format!("fields.{name}");
            let loc = match (format, &f.css, &f.pointer) {
                (_, Some(_), Some(p)) => {
                    return Err(at(
                        p.span(),
                        format!("{label}.{flabel}: give `css` or `pointer`, not both"),
                    ));
                }
                (Format::Json, Some(c), None) => {
                    return Err(at(
                        c.span(),
                        format!(
                            "{label}.{flabel}: a json tier reads fields by `pointer`, not `css`"
                        ),
                    ));
                }
                (Format::Html | Format::HtmlInJson, None, Some(p)) => {
                    return Err(at(
                        p.span(),
                        format!(
                            "{label}.{flabel}: an html tier reads fields by `css`, not `pointer`"
                        ),
                    ));
                }
                (_, Some(c), None) => Some(css(c, &flabel)?),
                (_, None, Some(p)) => Some(ptr(p, &flabel)?),
                (_, None, None) => None,
            };
            let regex = match &f.regex {
                Some(r) => Some(regex::Regex::new(r.get_ref()).map_err(|e| {
                    at(
                        r.span(),
                        format!("{label}.{flabel}.regex is not a valid regex ({e})"),
                    )
                })?),
                None => None,
            };
            fields.push(Field {
                name: name.clone(),
                at: loc,
                attr: f.attr.clone(),
                regex,
                number: f.number,
                exists: f.exists,
            });
        }
        Ok(Extractor {
            format,
            items,
            fields,
            empty,
            next,
        })
    }
}

static NUMBER: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"-?\d[\d,]*(?:\.\d+)?").unwrap_or_else(|_| unreachable!()));

fn finish(raw: Option<String>, f: &Field) -> Value {
    let Some(mut s) = raw else {
        return Value::Null;
    };
    if let Some(re) = &f.regex {
        match re.captures(&s) {
            Some(c) => {
                s = c
                    .get(1)
                    .or_else(|| c.get(0))
                    .map(|m| m.as_str().to_string())
                    .unwrap_or_default()
            }
            None => return Value::Null,
        }
    }
    if f.number {
        let Some(m) = NUMBER.find(&s) else {
            return Value::Null;
        };
        let clean = m.as_str().replace(',', "");
        // "4.0 out of 5" is the integer 4; "4.5" stays a float.
        return match clean.parse::<f64>() {
            Ok(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            Ok(f) => Value::from(f),
            Err(_) => Value::Null,
        };
    }
    Value::String(s)
}

fn text_of(e: ElementRef<'_>) -> String {
    e.text()
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

impl Extractor {
    /// Extract items from `body`. `page_url` resolves relative `next` links.
    /// A page with no items is accepted only when its `empty` rule proves it.
    pub fn extract(
        &self,
        body: &str,
        html_pointer: Option<&str>,
        page_url: &url::Url,
    ) -> Result<Extracted, String> {
        let out = match self.format {
            Format::Html => {
                let doc = Html::parse_document(body);
                let mut out = self.html_items(&doc);
                out.empty =
                    matches!(&self.empty, Some(Locator::Css(s)) if doc.select(s).next().is_some());
                if let Some(Locator::Css(s)) = &self.next
                    && let Some(a) = doc.select(s).next()
                {
                    out.has_more = true;
                    out.next_url = a
                        .value()
                        .attr("href")
                        .and_then(|h| page_url.join(h).ok())
                        .map(|u| u.to_string());
                }
                out
            }
            Format::Json | Format::HtmlInJson => {
                let json: Value = serde_json::from_str(body)
                    .map_err(|e| format!("response is not JSON ({e})"))?;
                let mut out = if self.format == Format::Json {
                    self.json_items(&json)?
                } else {
                    let p = html_pointer.unwrap_or("");
                    let html = match json.pointer(p) {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Array(a)) => a
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("\n"),
                        _ => return Err(format!("no HTML at `{p}` in the JSON response")),
                    };
                    self.html_items(&Html::parse_fragment(&html))
                };
                if let Some(Locator::Pointer(p)) = &self.empty {
                    out.empty = json.pointer(p).is_some_and(|v| !truthy(v));
                }
                if let Some(Locator::Pointer(p)) = &self.next
                    && let Some(v) = json.pointer(p)
                {
                    out.has_more = truthy(v);
                    out.next_url = v
                        .as_str()
                        .and_then(|h| page_url.join(h).ok())
                        .map(|u| u.to_string());
                }
                out
            }
        };
        if out.items.is_empty() && !out.empty {
            return Err(
                "no items found and nothing proves the page empty (layout change or soft block?)"
                    .into(),
            );
        }
        Ok(out)
    }

    fn html_items(&self, doc: &Html) -> Extracted {
        let Locator::Css(items) = &self.items else {
            return Extracted::default();
        };
        let items = doc
            .select(items)
            .map(|item| {
                let mut m = Map::new();
                for f in &self.fields {
                    let el = match &f.at {
                        Some(Locator::Css(s)) => item.select(s).next(),
                        _ => Some(item),
                    };
                    let v = if f.exists {
                        Value::Bool(el.is_some())
                    } else {
                        finish(
                            el.and_then(|e| match &f.attr {
                                Some(a) => e.value().attr(a).map(str::to_string),
                                None => Some(text_of(e)),
                            }),
                            f,
                        )
                    };
                    m.insert(f.name.clone(), v);
                }
                m
            })
            .collect();
        Extracted {
            items,
            ..Default::default()
        }
    }

    fn json_items(&self, json: &Value) -> Result<Extracted, String> {
        let Locator::Pointer(p) = &self.items else {
            return Ok(Extracted::default());
        };
        let list = match json.pointer(p) {
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(format!("`{p}` in the JSON response is not a list")),
            None => Vec::new(),
        };
        let items = list
            .iter()
            .map(|item| {
                let mut m = Map::new();
                for f in &self.fields {
                    let v = match &f.at {
                        Some(Locator::Pointer(fp)) => item.pointer(fp),
                        _ => Some(item),
                    };
                    let v = if f.exists {
                        Value::Bool(v.is_some_and(|v| !v.is_null()))
                    } else if f.regex.is_some() || f.number {
                        finish(
                            v.map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)),
                            f,
                        )
                    } else {
                        v.cloned().unwrap_or(Value::Null)
                    };
                    m.insert(f.name.clone(), v);
                }
                m
            })
            .collect();
        Ok(Extracted {
            items,
            ..Default::default()
        })
    }
}
