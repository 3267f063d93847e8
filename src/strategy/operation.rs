//! Operations: a strategy's named extractions (`[operations.NAME]`), with typed
//! parameters (→ JSON Schema), up to three tiers (request templates) and the
//! extraction rules that turn a response into items.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use toml::Spanned;

pub use super::extract::Format;
use super::extract::{ExtractFile, Extractor};
use super::template::{check_json_template, check_template};
use crate::diag::Diagnostic;
use crate::error::{Error, Result};

pub use super::coerce::ParamKind;
pub use super::params::{BUILTIN_VARS, Param, Parts, toml_to_json};
use super::params::{ParamFile, compile_params};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierFile {
    #[serde(default)]
    method: Option<String>,
    url: Spanned<String>,
    #[serde(default)]
    form: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    json: Option<Spanned<toml::Value>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    format: Format,
    #[serde(default)]
    html_pointer: Option<String>,
    #[serde(default)]
    wait_for: Option<Spanned<String>>,
    /// Override of the extraction's `next` for this tier (e.g. a JSON field).
    #[serde(default)]
    next: Option<Spanned<String>>,
    /// Override of the extraction's `empty` for this tier.
    #[serde(default)]
    empty: Option<Spanned<String>>,
    #[serde(default)]
    extract: Option<ExtractFile>,
    /// What means "this tier is refused" here (the identity's other tiers
    /// may still be served).
    #[serde(default)]
    block: Option<super::markers::MarkerFile>,
}

/// One tier's request template and extraction.
#[derive(Debug, Clone)]
pub struct Tier {
    /// 1, 2 or 3.
    pub number: u8,
    pub method: http::Method,
    pub url: String,
    pub form: Option<BTreeMap<String, String>>,
    pub json: Option<Value>,
    pub headers: BTreeMap<String, String>,
    pub format: Format,
    pub html_pointer: Option<String>,
    pub wait_for: Option<String>,
    pub extractor: Extractor,
    /// This tier's own block markers: a match is a block of this tier only.
    pub block: Option<super::MarkerSet>,
}

/// An operation file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OperationFile {
    #[serde(default)]
    description: String,
    #[serde(default)]
    params: BTreeMap<String, Spanned<ParamFile>>,
    /// Regex with one capture group: the item id inside an item URL.
    #[serde(default)]
    item_id_from_url: Option<Spanned<String>>,
    /// Extraction shared by tiers that do not define their own.
    #[serde(default)]
    extract: Option<ExtractFile>,
    #[serde(default)]
    tier1: Option<TierFile>,
    #[serde(default)]
    tier2: Option<TierFile>,
    #[serde(default)]
    tier3: Option<TierFile>,
    #[serde(default)]
    requires_login: bool,
    #[serde(default)]
    fallback_operation: Option<Spanned<String>>,
    /// Fields worked out from the extracted ones.
    #[serde(default)]
    derive: BTreeMap<String, super::derive::DeriveFile>,
    /// Rules every live result is checked against (warnings).
    #[serde(default)]
    expect: Option<super::expect::Expect>,
}

/// A validated operation.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub description: String,
    pub params: Vec<Param>,
    pub item_id_from_url: Option<regex::Regex>,
    /// Present tiers, cheapest first.
    pub tiers: Vec<Tier>,
    /// Only signed-in identities (`logged_in`, or `unknown` and probed) may
    /// run it; a `[session].logged_out` page is `login_required`.
    pub requires_login: bool,
    /// Run instead when no slot is signed in (an operation of the same
    /// strategy that needs no login).
    pub fallback: Option<String>,
    /// Fields worked out from the extracted ones (`[operations.NAME.derive]`).
    pub derive: Vec<super::derive::Derived>,
    /// `[operations.NAME.expect]`: rules each live result is checked against.
    pub expect: Option<super::expect::Expect>,
}

/// Where a strategy file's text is, for diagnostics at a span of it.
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

impl OperationFile {
    pub(super) fn compile(
        self,
        name: &str,
        path: &Path,
        text: &str,
    ) -> std::result::Result<Operation, Diagnostic> {
        let src = Src { path, text };
        let params = compile_params(&self.params, name, src.path, src.text)?;
        let item_id_from_url = match &self.item_id_from_url {
            Some(r) => Some(compile_item_id(r, name, src)?),
            None => None,
        };
        let vars: Vec<&str> = params
            .iter()
            .map(|p| p.name.as_str())
            .chain(BUILTIN_VARS.iter().copied())
            .collect();
        let shared = self.extract;
        let mut tiers = Vec::new();
        for (number, tier) in [(1u8, self.tier1), (2, self.tier2), (3, self.tier3)] {
            if let Some(t) = tier {
                let label = format!("operations.{name}.tier{number}");
                tiers.push(t.compile(number, &label, &vars, shared.as_ref(), src)?);
            }
        }
        if tiers.is_empty() {
            let pos = text.find(&format!("[operations.{name}")).unwrap_or(0);
            return Err(src.at(
                pos..pos,
                format!("operations.{name} has no tier1, tier2 or tier3"),
            ));
        }
        let fields: Vec<&str> = tiers
            .iter()
            .flat_map(|t| t.extractor.field_names())
            .collect();
        let derive = super::derive::compile(&self.derive, &fields, name).map_err(|m| {
            let pos = text
                .find(&format!("[operations.{name}.derive"))
                .unwrap_or(0);
            src.at(pos..pos, m)
        })?;
        let expect = self.expect;
        if let Some(e) = &expect {
            e.validate().map_err(|m| {
                let pos = text
                    .find(&format!("[operations.{name}.expect"))
                    .unwrap_or(0);
                src.at(pos..pos, format!("operations.{name}.expect.{m}"))
            })?;
        }
        Ok(Operation {
            name: name.to_string(),
            description: self.description,
            params,
            item_id_from_url,
            tiers,
            requires_login: self.requires_login,
            fallback: self.fallback_operation.map(|f| f.into_inner()),
            derive,
            expect,
        })
    }
}

/// `item_id_from_url`: a regex with exactly one capture group.
fn compile_item_id(
    r: &Spanned<String>,
    name: &str,
    src: Src<'_>,
) -> std::result::Result<regex::Regex, Diagnostic> {
    let re = regex::Regex::new(r.get_ref()).map_err(|e| {
        src.at(
            r.span(),
            format!("operations.{name}.item_id_from_url is not a valid regex ({e})"),
        )
    })?;
    if re.captures_len() != 2 {
        return Err(src.at(
            r.span(),
            format!("operations.{name}.item_id_from_url needs exactly one capture group"),
        ));
    }
    Ok(re)
}

impl TierFile {
    /// Check one tier (templates, method, what the browser tier may do,
    /// `wait_for`, extraction) and compile it.
    fn compile(
        self,
        number: u8,
        label: &str,
        vars: &[&str],
        shared: Option<&ExtractFile>,
        src: Src<'_>,
    ) -> std::result::Result<Tier, Diagnostic> {
        let json = self.check_templates(label, vars, src)?;
        let method = self.method(label, src)?;
        if number == 3
            && (self.format != Format::Html
                || self.form.is_some()
                || self.json.is_some()
                || method != http::Method::GET)
        {
            return Err(src.at(
                self.url.span(),
                format!("{label}: the browser tier loads pages: GET, format html, no body"),
            ));
        }
        if let Some(w) = &self.wait_for {
            if number != 3 {
                return Err(src.at(
                    w.span(),
                    format!("{label}.wait_for only applies to tier3 (the browser)"),
                ));
            }
            crate::dom::selector::parse(w.get_ref()).map_err(|why| {
                src.at(
                    w.span(),
                    format!(
                        "{label}.wait_for `{}` {why}",
                        crate::dom::selector::shown(w.get_ref()),
                    ),
                )
            })?;
        }
        if self.format == Format::HtmlInJson && self.html_pointer.is_none() {
            return Err(src.at(
                self.url.span(),
                format!("{label}: format html_in_json needs html_pointer"),
            ));
        }
        let extract = self.extract.as_ref().or(shared).ok_or_else(|| {
            src.at(
                self.url.span(),
                format!("{label} has no extract rules (and the operation has no shared `extract`)"),
            )
        })?;
        let extractor = extract.compile(
            src.path,
            src.text,
            &format!("{label}.extract"),
            self.format,
            self.next.as_ref(),
            self.empty.as_ref(),
        )?;
        let block = match &self.block {
            Some(b) => Some(b.compile(src.path, src.text, &format!("{label}.block"), &[])?),
            None => None,
        };
        Ok(Tier {
            number,
            block,
            method,
            url: self.url.get_ref().clone(),
            form: self.form.as_ref().map(|f| f.get_ref().clone()),
            json,
            headers: self.headers,
            format: self.format,
            html_pointer: self.html_pointer,
            wait_for: self.wait_for.map(|w| w.get_ref().clone()),
            extractor,
        })
    }

    /// Every `{var}` of the URL, form and JSON body is a parameter or a
    /// built-in; the JSON body as JSON.
    fn check_templates(
        &self,
        label: &str,
        vars: &[&str],
        src: Src<'_>,
    ) -> std::result::Result<Option<Value>, Diagnostic> {
        check_template(self.url.get_ref(), vars).map_err(|v| {
            src.at(
                self.url.span(),
                format!(
                    "{label}.url uses unknown template variable `{{{v}}}` (known: {})",
                    vars.join(", ")
                ),
            )
        })?;
        if let Some(form) = &self.form {
            for v in form.get_ref().values() {
                check_template(v, vars).map_err(|bad| {
                    src.at(
                        form.span(),
                        format!("{label}.form uses unknown template variable `{{{bad}}}`"),
                    )
                })?;
            }
        }
        let Some(j) = &self.json else {
            return Ok(None);
        };
        let json = toml_to_json(j.get_ref());
        check_json_template(&json, vars).map_err(|bad| {
            src.at(
                j.span(),
                format!("{label}.json uses unknown template variable `{{{bad}}}`"),
            )
        })?;
        Ok(Some(json))
    }

    /// GET, or POST when the tier sends a body, unless `method` says.
    fn method(&self, label: &str, src: Src<'_>) -> std::result::Result<http::Method, Diagnostic> {
        let given = self.method.as_deref();
        let default = if self.form.is_some() || self.json.is_some() {
            "POST"
        } else {
            "GET"
        };
        match given.unwrap_or(default) {
            m if m.eq_ignore_ascii_case("get") => Ok(http::Method::GET),
            m if m.eq_ignore_ascii_case("post") => Ok(http::Method::POST),
            other => Err(src.at(
                self.url.span(),
                format!("{label}.method `{other}` is not GET or POST"),
            )),
        }
    }
}

impl Operation {
    /// Parse one operation from TOML (the body of an `[operations.NAME]` table);
    /// for compiled strategies that declare their requests the declarative way.
    pub fn parse(name: &str, toml_text: &str) -> std::result::Result<Operation, Diagnostic> {
        let path = Path::new("<compiled operation>");
        let file: OperationFile = crate::diag::parse_toml(path, toml_text)?;
        file.compile(name, path, toml_text)
    }

    /// The parameters as a JSON Schema object (for MCP `inputSchema`).
    pub fn json_schema(&self) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for p in &self.params {
            let mut s = Map::new();
            match p.kind {
                ParamKind::String => s.insert("type".into(), json!("string")),
                ParamKind::Integer => s.insert("type".into(), json!("integer")),
                ParamKind::Boolean => s.insert("type".into(), json!("boolean")),
                ParamKind::Enum => {
                    s.insert("type".into(), json!("string"));
                    s.insert("enum".into(), json!(p.values))
                }
            };
            if !p.description.is_empty() {
                s.insert("description".into(), json!(p.description));
            }
            if let Some(d) = &p.default {
                s.insert("default".into(), d.clone());
            }
            if let Some(m) = p.minimum {
                s.insert("minimum".into(), json!(m));
            }
            if let Some(m) = p.maximum {
                s.insert("maximum".into(), json!(m));
            }
            if p.required {
                required.push(p.name.clone());
            }
            props.insert(p.name.clone(), Value::Object(s));
        }
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    /// Check and complete caller arguments: types, enums, ranges, required, defaults.
    pub fn bind(&self, args: Map<String, Value>) -> Result<Map<String, Value>> {
        if let Some(unknown) = args
            .keys()
            .find(|k| !self.params.iter().any(|p| &p.name == *k))
        {
            let known: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
            return Err(Error::new(
                crate::ErrorKind::InvalidArgument,
                format!(
                    "operation `{}` has no parameter `{unknown}` (parameters: {})",
                    self.name,
                    known.join(", ")
                ),
            )
            .retryable(false));
        }
        let mut out = Map::new();
        for p in &self.params {
            match args.get(&p.name).filter(|v| !v.is_null()) {
                Some(v) => {
                    let v = super::coerce::coerce_kind(p.kind, &p.values, p.minimum, p.maximum, v)
                        .map_err(|e| {
                            Error::new(
                                crate::ErrorKind::InvalidArgument,
                                format!("parameter `{}` {e}", p.name),
                            )
                            .retryable(false)
                        })?;
                    if let (Some(parts), Some(s)) = (&p.parts, v.as_str())
                        && let Some(why) = parts.problem(s)
                    {
                        return Err(Error::new(
                            crate::ErrorKind::InvalidArgument,
                            format!("parameter `{}` {why}", p.name),
                        )
                        .retryable(false));
                    }
                    out.insert(p.name.clone(), v);
                }
                None => match (&p.default, p.required) {
                    (Some(d), _) => {
                        out.insert(p.name.clone(), d.clone());
                    }
                    (None, true) => {
                        return Err(Error::new(
                            crate::ErrorKind::InvalidArgument,
                            format!("missing required parameter `{}`", p.name),
                        )
                        .retryable(false));
                    }
                    (None, false) => {}
                },
            }
        }
        Ok(out)
    }

    /// The item id inside an item URL, when the operation knows how to find it.
    pub fn item_id_from(&self, url: &str) -> Option<String> {
        self.item_id_from_url
            .as_ref()?
            .captures(url)?
            .get(1)
            .map(|m| m.as_str().to_string())
    }
}
