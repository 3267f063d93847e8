//! Extraction rules: from a response body to items with fields.
//!
//! HTML tiers use CSS selectors; JSON tiers use JSON pointers; `html_in_json`
//! tiers use CSS on the HTML found at `html_pointer`, and JSON pointers for
//! `empty` and `next` (pagination lives in the JSON there).

use std::collections::BTreeMap;
use std::path::Path;

use scraper::{Html, Selector};
use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use super::Body;
use super::field::{Ctx, Field, FieldFile, Locate};
use super::locale::Locale;
use super::pointer::JsonPointer;
use crate::diag::Diagnostic;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractFile {
    /// A selector (or pointer), or for html a priority list of selectors:
    /// the first that finds any element gives the items.
    items: Spanned<toml::Value>,
    #[serde(default)]
    fields: BTreeMap<String, FieldFile>,
    /// What the site hides (html): left out of every field's text.
    #[serde(default)]
    skip: Option<Spanned<String>>,
    #[serde(default)]
    empty: Option<Spanned<String>>,
    #[serde(default)]
    next: Option<Spanned<String>>,
}

#[derive(Debug, Clone)]
enum Locator {
    Css(Selector),
    /// A priority list: the first selector that finds anything.
    CssList(Vec<Selector>),
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

/// Compiled extraction rules for one tier.
#[derive(Debug, Clone)]
pub struct Extractor {
    format: Format,
    items: Locator,
    fields: Vec<Field>,
    skip: Option<Selector>,
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
        let css = |s: &Spanned<String>, what: &str| l.css(s, what).map(Locator::Css);
        let ptr = |s: &Spanned<String>, what: &str| l.ptr(s, what).map(Locator::Pointer);
        let items = match (format, self.items.get_ref()) {
            (Format::Json, toml::Value::String(p)) => {
                ptr(&Spanned::new(self.items.span(), p.clone()), "items")?
            }
            (Format::Json, _) => {
                return Err(l.at(
                    self.items.span(),
                    format!("{label}.items of a json tier is one JSON pointer"),
                ));
            }
            _ => Locator::CssList(l.css_list(&self.items, "items")?),
        };
        let (empty, next) = match format {
            Format::Html => (
                empty_rule.map(|e| css(e, "empty")).transpose()?,
                next_rule.map(|n| css(n, "next")).transpose()?,
            ),
            Format::Json | Format::HtmlInJson => (
                empty_rule.map(|e| ptr(e, "empty")).transpose()?,
                next_rule.map(|n| ptr(n, "next")).transpose()?,
            ),
        };
        let skip = match (&self.skip, format) {
            (Some(s), Format::Json) => {
                return Err(l.at(s.span(), format!("{label}.skip is for html tiers")));
            }
            (Some(s), _) => Some(l.css(s, "skip")?),
            (None, _) => None,
        };
        let mut fields = Vec::new();
        for (name, f) in &self.fields {
            fields.push(f.compile(name, format != Format::Json, &l)?);
        }
        mark_sole_readers(&mut fields);
        Ok(Extractor {
            format,
            items,
            fields,
            skip,
            empty,
            next,
        })
    }
}

/// A field whose pointer no other field's overlaps may move its value out
/// of the item instead of copying it.
fn mark_sole_readers(fields: &mut [Field]) {
    let pointers: Vec<Option<&JsonPointer>> = fields.iter().map(|f| f.pointer.as_ref()).collect();
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
        self.extract_body(
            &Body::new(body, None),
            html_pointer,
            page_url,
            &Locale::default(),
        )
    }

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

    /// The page's structured data, read once, when a field looks in it
    /// (its main product is what those fields read: [`main_of`]).
    fn structured(&self, doc: &scraper::Html) -> Option<Vec<super::structured::Item>> {
        self.fields.iter().any(|f| !f.ld.is_empty()).then(|| {
            let bounds = super::structured::Bounds::default();
            super::structured::items(doc, &bounds, &mut Vec::new())
        })
    }

    /// [`Extractor::extract`] on a body that may already be parsed (by the
    /// markers that classified it), with numbers and dates read in `locale`.
    pub fn extract_body(
        &self,
        body: &Body<'_>,
        html_pointer: Option<&str>,
        page_url: &url::Url,
        locale: &Locale,
    ) -> Result<Extracted, String> {
        let cx = Ctx {
            skip: self.skip.as_ref(),
            locale,
            page_url,
            ld: None,
        };
        let out = match self.format {
            Format::Html => {
                let doc = body.html();
                // Numbers and dates as the page's own language writes them.
                let lang = doc.root_element().value().attr("lang");
                let page_locale = locale.of_page(lang);
                let ld = self.structured(doc);
                let cx = Ctx {
                    locale: &page_locale,
                    ld: main_of(ld.as_deref()),
                    ..cx
                };
                let mut out = self.html_items(doc, &cx);
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
                // One pass over the response: values are built only where
                // the pointers lead (items are then the result's own).
                let html_at = JsonPointer::new(html_pointer.unwrap_or(""));
                fn ptr(l: &Option<Locator>) -> Option<&JsonPointer> {
                    match l {
                        Some(Locator::Pointer(p)) => Some(p),
                        _ => None,
                    }
                }
                let wanted: [Option<&JsonPointer>; 3] = [
                    ptr(&self.empty),
                    ptr(&self.next),
                    match (&self.items, self.format) {
                        (Locator::Pointer(p), Format::Json) => Some(p),
                        (_, Format::HtmlInJson) => Some(&html_at),
                        _ => None,
                    },
                ];
                let asked: Vec<&JsonPointer> = wanted.iter().flatten().copied().collect();
                let mut got = super::lazy_json::pick(body.text(), &asked)?.into_iter();
                let [empty_v, next_v, main_v] =
                    wanted.map(|w| w.and_then(|_| got.next().flatten()));
                let empty = empty_v.as_ref().is_some_and(|v| !truthy(v));
                let (mut has_more, mut next_url) = (false, None);
                if let Some(v) = &next_v {
                    has_more = truthy(v);
                    next_url = v
                        .as_str()
                        .and_then(|h| page_url.join(h).ok())
                        .map(|u| u.to_string());
                }
                let mut out = if self.format == Format::Json {
                    self.json_items(main_v, &cx)?
                } else {
                    let p = html_pointer.unwrap_or("");
                    let doc = match &main_v {
                        Some(Value::String(s)) => crate::dom::fragment(s),
                        Some(Value::Array(a)) => crate::dom::fragment(
                            &a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join("\n"),
                        ),
                        _ => return Err(format!("no HTML at `{p}` in the JSON response")),
                    };
                    let ld = self.structured(&doc.html);
                    let cx = Ctx {
                        ld: main_of(ld.as_deref()),
                        ..cx
                    };
                    let mut out = self.html_items(&doc.html, &cx);
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

    fn html_items(&self, doc: &Html, cx: &Ctx<'_>) -> Extracted {
        let Locator::CssList(list) = &self.items else {
            return Extracted::default();
        };
        // The first selector of the list that finds anything gives the items.
        let Some(first) = list.iter().find(|s| doc.select(s).next().is_some()) else {
            return Extracted::default();
        };
        let items = doc
            .select(first)
            .map(|item| {
                self.fields
                    .iter()
                    .map(|f| (f.name.clone(), f.html(item, cx)))
                    .collect()
            })
            .collect();
        Extracted {
            items,
            ..Default::default()
        }
    }

    /// `found`: what the items pointer leads to.
    fn json_items(&self, found: Option<Value>, cx: &Ctx<'_>) -> Result<Extracted, String> {
        let Locator::Pointer(p) = &self.items else {
            return Ok(Extracted::default());
        };
        let list = match found {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(format!("`{}` in the JSON response is not a list", p.text)),
            None => Vec::new(),
        };
        let items = list
            .into_iter()
            .map(|mut item| {
                let mut m = Map::new();
                for f in &self.fields {
                    let v = match &f.pointer {
                        Some(fp) => fp.get(&item),
                        None => Some(&item),
                    };
                    let v = if f.exists {
                        Value::Bool(v.is_some_and(|v| !v.is_null()))
                    } else if f.reads_raw() {
                        f.finish(
                            v.map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)),
                            cx,
                        )
                    } else if let (true, Some(fp)) = (f.sole_reader, &f.pointer) {
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

/// The main product among a page's structured data, if it was read.
fn main_of(items: Option<&[super::structured::Item]>) -> Option<&super::structured::Item> {
    super::structured::model::main_item(items?, &Default::default())
}
