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

use super::Body;
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
    /// Personal data (a reviewer's name, a profile link): masked for callers
    /// below `security.pii_role`.
    #[serde(default)]
    pii: bool,
}

#[derive(Debug, Clone)]
enum Locator {
    Css(Selector),
    Pointer(JsonPointer),
}

/// Response format of a tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    #[default]
    Html,
    Json,
    /// JSON whose `html_pointer` holds HTML (a string or a list of fragments).
    HtmlInJson,
}

/// A JSON pointer split into its unescaped tokens once, at load
/// (`Value::pointer` splits and unescapes on every lookup).
#[derive(Debug, Clone, PartialEq, Eq)]
struct JsonPointer {
    text: String,
    tokens: Vec<String>,
}

impl JsonPointer {
    fn new(text: &str) -> Self {
        let tokens = text
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        JsonPointer {
            text: text.to_string(),
            tokens,
        }
    }

    fn get<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        self.tokens.iter().try_fold(v, |v, t| match v {
            Value::Object(m) => m.get(t),
            Value::Array(a) => index(t).and_then(|i| a.get(i)),
            _ => None,
        })
    }

    fn get_mut<'v>(&self, v: &'v mut Value) -> Option<&'v mut Value> {
        self.tokens.iter().try_fold(v, |v, t| match v {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => index(t).and_then(|i| a.get_mut(i)),
            _ => None,
        })
    }

    /// Whether one of the two pointers leads into (or is) the other.
    fn overlaps(&self, other: &JsonPointer) -> bool {
        let n = self.tokens.len().min(other.tokens.len());
        self.tokens[..n] == other.tokens[..n]
    }
}

/// An array index token as RFC 6901 writes it (no sign, no leading zero).
fn index(t: &str) -> Option<usize> {
    if t.starts_with('+') || (t.len() > 1 && t.starts_with('0')) {
        return None;
    }
    t.parse().ok()
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
    pii: bool,
    /// JSON tiers: no other field reads this value, so it can be moved out
    /// of the parsed response instead of copied.
    sole_reader: bool,
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
    /// What the bounded parse of the page left out.
    pub cut: crate::dom::Cut,
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
        let l = Locate { path, text, label };
        let (items, empty, next) = match format {
            Format::Html => (
                l.css(&self.items, "items")?,
                empty_rule.map(|e| l.css(e, "empty")).transpose()?,
                next_rule.map(|n| l.css(n, "next")).transpose()?,
            ),
            Format::Json => (
                l.ptr(&self.items, "items")?,
                empty_rule.map(|e| l.ptr(e, "empty")).transpose()?,
                next_rule.map(|n| l.ptr(n, "next")).transpose()?,
            ),
            Format::HtmlInJson => (
                l.css(&self.items, "items")?,
                empty_rule.map(|e| l.ptr(e, "empty")).transpose()?,
                next_rule.map(|n| l.ptr(n, "next")).transpose()?,
            ),
        };
        let mut fields = Vec::new();
        for (name, f) in &self.fields {
            fields.push(f.compile(name, format, &l)?);
        }
        mark_sole_readers(&mut fields);
        Ok(Extractor {
            format,
            items,
            fields,
            empty,
            next,
        })
    }
}

/// Where the rules are written, to compile their locators with diagnostics.
struct Locate<'a> {
    path: &'a Path,
    text: &'a str,
    label: &'a str,
}

impl Locate<'_> {
    fn at(&self, span: std::ops::Range<usize>, msg: String) -> Diagnostic {
        Diagnostic::at(self.path, self.text, Some(span), msg)
    }

    fn css(&self, s: &Spanned<String>, what: &str) -> Result<Locator, Diagnostic> {
        crate::dom::selector::parse(s.get_ref())
            .map(Locator::Css)
            .map_err(|why| {
                self.at(
                    s.span(),
                    format!(
                        "{}.{what} `{}` {why}",
                        self.label,
                        crate::dom::selector::shown(s.get_ref()),
                    ),
                )
            })
    }

    fn ptr(&self, s: &Spanned<String>, what: &str) -> Result<Locator, Diagnostic> {
        if pointer_ok(s.get_ref()) {
            Ok(Locator::Pointer(JsonPointer::new(s.get_ref())))
        } else {
            Err(self.at(
                s.span(),
                format!(
                    "{}.{what} `{}` is not a JSON pointer (use \"\" or \"/a/0/b\")",
                    self.label,
                    s.get_ref()
                ),
            ))
        }
    }
}

impl FieldFile {
    /// One field: `css` for html tiers, `pointer` for json ones, never both.
    fn compile(&self, name: &str, format: Format, l: &Locate<'_>) -> Result<Field, Diagnostic> {
        let label = format!("{}.fields.{name}", l.label);
        let loc = match (format, &self.css, &self.pointer) {
            (_, Some(_), Some(p)) => {
                return Err(l.at(
                    p.span(),
                    format!("{label}: give `css` or `pointer`, not both"),
                ));
            }
            (Format::Json, Some(c), None) => {
                return Err(l.at(
                    c.span(),
                    format!("{label}: a json tier reads fields by `pointer`, not `css`"),
                ));
            }
            (Format::Html | Format::HtmlInJson, None, Some(p)) => {
                return Err(l.at(
                    p.span(),
                    format!("{label}: an html tier reads fields by `css`, not `pointer`"),
                ));
            }
            (_, Some(c), None) => Some(l.css(c, &format!("fields.{name}"))?),
            (_, None, Some(p)) => Some(l.ptr(p, &format!("fields.{name}"))?),
            (_, None, None) => None,
        };
        let regex = match &self.regex {
            Some(r) => Some(regex::Regex::new(r.get_ref()).map_err(|e| {
                l.at(
                    r.span(),
                    format!("{label}.regex is not a valid regex ({e})"),
                )
            })?),
            None => None,
        };
        Ok(Field {
            name: name.to_string(),
            at: loc,
            attr: self.attr.clone(),
            regex,
            number: self.number,
            exists: self.exists,
            pii: self.pii,
            sole_reader: false,
        })
    }
}

/// A field whose pointer no other field's overlaps may move its value out
/// of the item instead of copying it.
fn mark_sole_readers(fields: &mut [Field]) {
    let pointers: Vec<Option<&JsonPointer>> = fields
        .iter()
        .map(|f| match &f.at {
            Some(Locator::Pointer(p)) => Some(p),
            _ => None,
        })
        .collect();
    let sole: Vec<bool> = (0..fields.len())
        .map(|i| {
            pointers[i].is_some_and(|p| {
                pointers
                    .iter()
                    .enumerate()
                    .all(|(j, q)| j == i || q.is_some_and(|q| !p.overlaps(q)))
            })
        })
        .collect();
    for (f, sole) in fields.iter_mut().zip(sole) {
        f.sole_reader = sole;
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

/// The element's text, whitespace collapsed (text nodes are separated by a space).
fn text_of(e: ElementRef<'_>) -> String {
    let mut out = String::new();
    for word in e.text().flat_map(str::split_whitespace) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
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
        self.extract_body(&Body::new(body, None), html_pointer, page_url)
    }

    /// [`Extractor::extract`] on a body that may already be parsed (by the
    /// markers that classified it).
    /// The names of the fields each item gets.
    pub fn field_names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }

    /// The fields marked `pii = true`.
    pub fn pii_fields(&self) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .filter(|f| f.pii)
            .map(|f| f.name.as_str())
    }

    pub fn extract_body(
        &self,
        body: &Body<'_>,
        html_pointer: Option<&str>,
        page_url: &url::Url,
    ) -> Result<Extracted, String> {
        let out = match self.format {
            Format::Html => {
                let doc = body.html();
                let mut out = self.html_items(doc);
                out.cut = body.cut();
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
                // The parse is this extraction's own: items are moved out of it.
                let mut json = body.take_json()?;
                let empty = match &self.empty {
                    Some(Locator::Pointer(p)) => p.get(&json).is_some_and(|v| !truthy(v)),
                    _ => false,
                };
                let (mut has_more, mut next_url) = (false, None);
                if let Some(Locator::Pointer(p)) = &self.next
                    && let Some(v) = p.get(&json)
                {
                    has_more = truthy(v);
                    next_url = v
                        .as_str()
                        .and_then(|h| page_url.join(h).ok())
                        .map(|u| u.to_string());
                }
                let mut out = if self.format == Format::Json {
                    self.json_items(&mut json)?
                } else {
                    let p = html_pointer.unwrap_or("");
                    let doc = match json.pointer(p) {
                        Some(Value::String(s)) => crate::dom::fragment(s),
                        Some(Value::Array(a)) => crate::dom::fragment(
                            &a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join("\n"),
                        ),
                        _ => return Err(format!("no HTML at `{p}` in the JSON response")),
                    };
                    let mut out = self.html_items(&doc.html);
                    out.cut = doc.cut;
                    out
                };
                out.empty = empty;
                out.has_more = has_more;
                out.next_url = next_url;
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

    fn json_items(&self, json: &mut Value) -> Result<Extracted, String> {
        let Locator::Pointer(p) = &self.items else {
            return Ok(Extracted::default());
        };
        let list = match p.get_mut(json) {
            Some(Value::Array(a)) => std::mem::take(a),
            Some(_) => return Err(format!("`{}` in the JSON response is not a list", p.text)),
            None => Vec::new(),
        };
        let items = list
            .into_iter()
            .map(|mut item| {
                let mut m = Map::new();
                for f in &self.fields {
                    let v = match &f.at {
                        Some(Locator::Pointer(fp)) => fp.get(&item),
                        _ => Some(&item),
                    };
                    let v = if f.exists {
                        Value::Bool(v.is_some_and(|v| !v.is_null()))
                    } else if f.regex.is_some() || f.number {
                        finish(
                            v.map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)),
                            f,
                        )
                    } else if let (true, Some(Locator::Pointer(fp))) = (f.sole_reader, &f.at) {
                        // A top-level field named as it is read: move the
                        // entry, key and all.
                        if let ([token], Value::Object(obj)) = (fp.tokens.as_slice(), &mut item)
                            && *token == f.name
                        {
                            if let Some((k, v)) = obj.remove_entry(token) {
                                m.insert(k, v);
                            } else {
                                m.insert(f.name.clone(), Value::Null);
                            }
                            continue;
                        }
                        fp.get_mut(&mut item).map_or(Value::Null, Value::take)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_unescape_once_and_index_arrays() {
        let v: Value = serde_json::from_str(r#"{"a/b": {"m~n": [10, 20]}, "01": 1}"#).unwrap();
        let p = JsonPointer::new("/a~1b/m~0n/1");
        assert_eq!(p.get(&v), Some(&Value::from(20)));
        assert_eq!(JsonPointer::new("").get(&v), Some(&v));
        assert_eq!(JsonPointer::new("/a~1b/m~0n/01").get(&v), None);
        assert_eq!(JsonPointer::new("/01").get(&v), Some(&Value::from(1)));
        assert!(JsonPointer::new("/a").overlaps(&JsonPointer::new("/a/b")));
        assert!(!JsonPointer::new("/a").overlaps(&JsonPointer::new("/b")));
    }
}
