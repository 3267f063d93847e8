//! One field of an extraction: where it is (a CSS selector or a priority
//! list of them, inside a `within` container, or a JSON pointer), what of it
//! is read (the visible text, an attribute) and how that becomes a value (a
//! list of patterns, a `map` of words, a number or a date in the page's
//! locale, an absolute URL). An empty value is `null`, never `""`.

use std::collections::BTreeMap;
use std::path::Path;

use scraper::{ElementRef, Selector};
use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::locale::Locale;
use super::pointer::JsonPointer;
use super::text::Visibility;
use crate::diag::Diagnostic;

/// Where the rules are written, to compile their locators with diagnostics.
pub(super) struct Locate<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
    pub(super) label: &'a str,
}

impl Locate<'_> {
    pub(super) fn at(&self, span: std::ops::Range<usize>, msg: String) -> Diagnostic {
        Diagnostic::at(self.path, self.text, Some(span), msg)
    }

    fn css_str(
        &self,
        css: &str,
        span: std::ops::Range<usize>,
        what: &str,
    ) -> Result<Selector, Diagnostic> {
        crate::dom::selector::parse(css).map_err(|why| {
            self.at(
                span,
                format!(
                    "{}.{what} `{}` {why}",
                    self.label,
                    crate::dom::selector::shown(css),
                ),
            )
        })
    }

    pub(super) fn css(&self, s: &Spanned<String>, what: &str) -> Result<Selector, Diagnostic> {
        self.css_str(s.get_ref(), s.span(), what)
    }

    /// A selector, or a priority list of them.
    pub(super) fn css_list(
        &self,
        v: &Spanned<toml::Value>,
        what: &str,
    ) -> Result<Vec<Selector>, Diagnostic> {
        strings(v, &format!("{}.{what}", self.label), "a CSS selector", self)?
            .iter()
            .map(|s| self.css_str(s, v.span(), what))
            .collect()
    }

    pub(super) fn ptr(&self, s: &Spanned<String>, what: &str) -> Result<JsonPointer, Diagnostic> {
        if JsonPointer::ok(s.get_ref()) {
            Ok(JsonPointer::new(s.get_ref()))
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

/// A string or a non-empty list of strings.
fn strings(
    v: &Spanned<toml::Value>,
    label: &str,
    kind: &str,
    l: &Locate<'_>,
) -> Result<Vec<String>, Diagnostic> {
    let bad = || {
        l.at(
            v.span(),
            format!("{label} must be {kind} or a list of them"),
        )
    };
    match v.get_ref() {
        toml::Value::String(s) => Ok(vec![s.clone()]),
        toml::Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        _ => Err(bad()),
    }
}

/// A number read as a value: "4.0 out of 5" is the integer 4; "4.5" stays
/// a float.
fn number_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// The most steps an `ld` path takes.
const LD_STEPS: usize = 8;

/// `aggregateRating.ratingValue` as its steps; `None` when it is no path
/// (a keyword such as `@id` or `@type` is no property a path can step to).
fn ld_path(p: &str) -> Option<Vec<String>> {
    let steps: Vec<String> = p.split('.').map(str::to_string).collect();
    let ok = steps.len() <= LD_STEPS
        && steps.iter().all(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':'))
        });
    ok.then_some(steps)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FieldFile {
    /// A CSS selector (a comma inside it keeps document order), or a
    /// priority list: the first selector that yields a value wins.
    #[serde(default)]
    css: Option<Spanned<toml::Value>>,
    /// A container (or priority list of them) inside the item; `css` is
    /// looked for in the first one found.
    #[serde(default)]
    within: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pointer: Option<Spanned<String>>,
    /// A path into the page's structured data (JSON-LD, microdata, RDFa),
    /// from its product (`aggregateRating.ratingValue`), or a priority list
    /// of them; tried before `css`.
    #[serde(default)]
    ld: Option<Spanned<toml::Value>>,
    /// An attribute instead of the text, or a list of them: the first the
    /// element has with a value.
    #[serde(default)]
    attr: Option<Spanned<toml::Value>>,
    /// A regex, or a list: the first that matches; its first capture group
    /// that took part (else the whole match) is the value.
    #[serde(default)]
    regex: Option<Spanned<toml::Value>>,
    /// Words read as values after the regex ("One" → 1).
    #[serde(default)]
    map: BTreeMap<String, toml::Value>,
    /// The value when nothing yields one (e.g. `false`).
    #[serde(default)]
    default: Option<toml::Value>,
    /// `true`: a number in the page's locale; `"integer"`: a whole number
    /// (a count, a rank), where `.` or `,` before three digits always
    /// groups thousands.
    #[serde(default)]
    number: Option<Spanned<toml::Value>>,
    /// A date in the page's languages, as `YYYY-MM-DD`.
    #[serde(default)]
    date: bool,
    /// A link resolved against the page's URL.
    #[serde(default)]
    url: bool,
    /// A link that may be the site's click-tracking redirect: the URL it
    /// leads to (resolved against the page's URL, as `url`).
    #[serde(default)]
    unwrap_redirect: bool,
    #[serde(default)]
    exists: bool,
    /// Keep script, style and hidden text.
    #[serde(default)]
    all_text: bool,
    /// Personal data (a reviewer's name, a profile link): masked for callers
    /// below `security.pii_role`.
    #[serde(default)]
    pii: bool,
}

/// A compiled field.
#[derive(Debug, Clone)]
pub(super) struct Field {
    pub(super) name: String,
    /// Empty: the item (or its `within` container) itself.
    css: Vec<Selector>,
    within: Vec<Selector>,
    /// JSON tiers (`None`: the item value itself).
    pub(super) pointer: Option<JsonPointer>,
    /// Paths into the page's structured data, tried before `css`.
    pub(super) ld: Vec<Vec<String>>,
    /// Empty: the text.
    attr: Vec<String>,
    regex: Vec<regex::Regex>,
    map: Vec<(String, Value)>,
    default: Option<Value>,
    number: Option<Number>,
    date: bool,
    url: bool,
    unwrap_redirect: bool,
    pub(super) exists: bool,
    all_text: bool,
    pub(super) pii: bool,
    /// JSON tiers: no other field reads this value, so it can be moved out
    /// of the parsed response instead of copied.
    pub(super) sole_reader: bool,
}

/// How a field reads a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Number {
    /// As the page's locale writes any number.
    Any,
    /// A whole number (`number = "integer"`).
    Whole,
}

/// What reading a value needs besides the field.
#[derive(Clone, Copy)]
pub(super) struct Ctx<'a> {
    pub(super) skip: Option<&'a Selector>,
    pub(super) locale: &'a Locale,
    pub(super) page_url: &'a url::Url,
    /// The page's main product in its structured data, found once when a
    /// field has `ld`.
    pub(super) ld: Option<&'a super::structured::Item>,
}

impl FieldFile {
    /// One field: `css` for html tiers, `pointer` for json ones, never both.
    pub(super) fn compile(
        &self,
        name: &str,
        html: bool,
        l: &Locate<'_>,
    ) -> Result<Field, Diagnostic> {
        let label = format!("{}.fields.{name}", l.label);
        if let (Some(_), Some(p)) = (&self.css, &self.pointer) {
            return Err(l.at(
                p.span(),
                format!("{label}: give `css` or `pointer`, not both"),
            ));
        }
        if let (false, Some(c)) = (html, &self.css) {
            return Err(l.at(
                c.span(),
                format!("{label}: a json tier reads fields by `pointer`, not `css`"),
            ));
        }
        if let (false, Some(c)) = (html, &self.within) {
            return Err(l.at(c.span(), format!("{label}: `within` is for html tiers")));
        }
        if let (true, Some(p)) = (html, &self.pointer) {
            return Err(l.at(
                p.span(),
                format!("{label}: an html tier reads fields by `css`, not `pointer`"),
            ));
        }
        if let (false, Some(p)) = (html, &self.ld) {
            return Err(l.at(
                p.span(),
                format!("{label}: `ld` reads a page's structured data, on html tiers"),
            ));
        }
        let ld = match &self.ld {
            Some(v) => strings(v, &format!("{label}.ld"), "a path like \"aggregateRating.ratingValue\"", l)?
                .into_iter()
                .map(|p| ld_path(&p).ok_or_else(|| {
                    l.at(
                        v.span(),
                        format!(
                            "{label}.ld `{p}` is not a path of property names (e.g. \"offers.price\", at most {LD_STEPS} steps)"
                        ),
                    )
                }))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let what = format!("fields.{name}");
        let css = match &self.css {
            Some(c) => l.css_list(c, &what)?,
            None => Vec::new(),
        };
        let within = match &self.within {
            Some(c) => l.css_list(c, &format!("{what}.within"))?,
            None => Vec::new(),
        };
        let pointer = self.pointer.as_ref().map(|p| l.ptr(p, &what)).transpose()?;
        let attr = match &self.attr {
            Some(a) => strings(a, &format!("{label}.attr"), "an attribute name", l)?,
            None => Vec::new(),
        };
        let regex = match &self.regex {
            Some(r) => strings(r, &format!("{label}.regex"), "a regex", l)?
                .iter()
                .map(|x| {
                    regex::Regex::new(x).map_err(|e| {
                        l.at(
                            r.span(),
                            format!("{label}.regex `{x}` is not a valid regex ({e})"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let number = match self.number.as_ref().map(|n| (n, n.get_ref())) {
            None | Some((_, toml::Value::Boolean(false))) => None,
            Some((_, toml::Value::Boolean(true))) => Some(Number::Any),
            Some((_, toml::Value::String(k))) if k == "integer" => Some(Number::Whole),
            Some((n, _)) => {
                return Err(l.at(
                    n.span(),
                    format!("{label}.number must be true or \"integer\""),
                ));
            }
        };
        let kinds = [
            number.is_some(),
            self.date,
            self.url || self.unwrap_redirect,
            self.exists,
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if kinds > 1 {
            let pos = l.text.find(&format!("{name} =")).unwrap_or(0);
            return Err(l.at(
                pos..pos,
                format!("{label}: give one of number, date, url, exists"),
            ));
        }
        let map = self
            .map
            .iter()
            .map(|(k, v)| {
                (
                    k.to_lowercase(),
                    serde_json::to_value(v).unwrap_or(Value::Null),
                )
            })
            .collect();
        Ok(Field {
            name: name.to_string(),
            css,
            within,
            pointer,
            ld,
            attr,
            regex,
            map,
            default: self
                .default
                .as_ref()
                .map(|v| serde_json::to_value(v).unwrap_or(Value::Null)),
            number,
            date: self.date,
            url: self.url,
            unwrap_redirect: self.unwrap_redirect,
            exists: self.exists,
            all_text: self.all_text,
            pii: self.pii,
            sole_reader: false,
        })
    }
}

impl Field {
    pub(super) fn reads_raw(&self) -> bool {
        !self.regex.is_empty()
            || !self.map.is_empty()
            || self.number.is_some()
            || self.date
            || self.url
            || self.unwrap_redirect
    }

    /// This field of one HTML item (its `default` when it yields nothing).
    pub(super) fn html(&self, item: ElementRef<'_>, cx: &Ctx<'_>) -> Value {
        match self.html_value(item, cx) {
            Value::Null => self.default.clone().unwrap_or(Value::Null),
            v => v,
        }
    }

    fn html_value(&self, item: ElementRef<'_>, cx: &Ctx<'_>) -> Value {
        if !self.ld.is_empty() {
            let found = cx.ld.and_then(|item| {
                self.ld.iter().find_map(|path| {
                    let raw = super::structured::model::lookup(item, path)?;
                    Some(self.finish_ld(raw, cx)).filter(|v| !v.is_null())
                })
            });
            match found {
                Some(_) if self.exists => return Value::Bool(true),
                Some(v) => return v,
                // Nothing more to try: the page's own text is no fallback.
                None if self.css.is_empty() && self.within.is_empty() => {
                    return if self.exists {
                        Value::Bool(false)
                    } else {
                        Value::Null
                    };
                }
                None => {}
            }
        }
        let vis = Visibility {
            skip: cx.skip,
            all: self.all_text,
        };
        let scope = if self.within.is_empty() {
            Some(item)
        } else {
            self.within
                .iter()
                .find_map(|s| item.select(s).find(|e| !vis.hidden_within(*e, item)))
        };
        let Some(scope) = scope else {
            return if self.exists {
                Value::Bool(false)
            } else {
                Value::Null
            };
        };
        if self.css.is_empty() {
            return if self.exists {
                Value::Bool(true)
            } else {
                self.finish(self.raw(scope, &vis), cx)
            };
        }
        for sel in &self.css {
            let mut found = scope.select(sel).filter(|e| !vis.hidden_within(*e, item));
            if self.exists {
                if found.next().is_some() {
                    return Value::Bool(true);
                }
                continue;
            }
            if let Some(v) = found
                .map(|e| self.finish(self.raw(e, &vis), cx))
                .find(|v| !v.is_null())
            {
                return v;
            }
        }
        if self.exists {
            Value::Bool(false)
        } else {
            Value::Null
        }
    }

    fn raw(&self, e: ElementRef<'_>, vis: &Visibility<'_>) -> Option<String> {
        match self.attr.as_slice() {
            [] => Some(vis.text(e)),
            names => names
                .iter()
                .filter_map(|a| e.value().attr(a))
                .find(|v| !v.trim().is_empty())
                .map(str::to_string),
        }
    }

    /// A value from structured data: its text made plain (entities, tags),
    /// its numbers machine-written (`"1299.00"` whatever the locale), the
    /// rest as [`Field::finish`] reads any value.
    fn finish_ld(&self, raw: String, cx: &Ctx<'_>) -> Value {
        use super::structured::values;
        let text = values::plain(&raw, super::structured::Bounds::default().text_bytes);
        if let Some(kind) = self.number
            && self.regex.is_empty()
            && self.map.is_empty()
        {
            if kind == Number::Whole {
                // A count that is not whole is no count.
                return values::whole(&text).map_or(Value::Null, Value::from);
            }
            return values::number(&text).map_or(Value::Null, number_value);
        }
        if self.date && self.regex.is_empty() {
            return values::date(&text, cx.locale).map_or(Value::Null, Value::String);
        }
        self.finish(Some(text), cx)
    }

    /// The value of a raw string: patterns, words, number, date or URL.
    pub(super) fn finish(&self, raw: Option<String>, cx: &Ctx<'_>) -> Value {
        let Some(raw) = raw else { return Value::Null };
        let mut s = raw.trim().to_string();
        if !self.regex.is_empty() {
            let Some(c) = self.regex.iter().find_map(|re| re.captures(&s)) else {
                return Value::Null;
            };
            let m = (1..c.len()).find_map(|i| c.get(i)).or_else(|| c.get(0));
            s = m.map(|m| m.as_str().trim().to_string()).unwrap_or_default();
        }
        if s.is_empty() {
            return Value::Null;
        }
        let lower = s.to_lowercase();
        if let Some((_, v)) = self.map.iter().find(|(k, _)| *k == lower) {
            return v.clone();
        }
        if let Some(kind) = self.number {
            let n = match kind {
                Number::Any => cx.locale.number(&s),
                Number::Whole => cx.locale.whole_number(&s),
            };
            return n.map_or(Value::Null, number_value);
        }
        if self.date {
            return cx.locale.date(&s).map_or(Value::Null, Value::String);
        }
        if self.url || self.unwrap_redirect {
            return cx
                .page_url
                .join(&s)
                .ok()
                .and_then(|u| match self.unwrap_redirect {
                    true => super::redirect::unwrap(u),
                    false => Some(u),
                })
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .map_or(Value::Null, |u| Value::String(u.to_string()));
        }
        Value::String(s)
    }
}
