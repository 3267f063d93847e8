//! The truth file's format (`truth.json`): the pages, and for each the
//! checks (an operation, its params, the outcome, the count and the items'
//! wanted fields) and the signed-in state it should give; parsed strictly
//! (unknown keys refused, fields kept in the file's order), every error
//! naming its line, column and place (`pages[3].checks[0].outcome`).

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::strategy::{LoginState, Outcome};

use super::error::ScoreError;
use super::want::Want;

/// `truth.json`: the pages and what each should give.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Truth {
    /// Free text: how the truth was made.
    pub about: Option<String>,
    pub pages: Vec<Page>,
}

/// One saved page.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    /// The page's file: `DIR/pages/FILE`, else `DIR/FILE`; `.gz` is gunzipped.
    pub file: String,
    /// What kind of page it is (`product`, `reviews`, `wall`…): the last
    /// line counts right pages per kind.
    pub kind: Option<String>,
    /// The answer's final URL (it picks the marketplace, and resolves links).
    pub url: String,
    /// The answer's status.
    #[serde(default = "ok_status")]
    pub status: u16,
    #[serde(default)]
    pub checks: Vec<Check>,
    /// The signed-in state the page shows, judged with the `[session]` markers.
    pub session: Option<LoginState>,
    /// Notes for people; not judged.
    pub year: Option<u16>,
    pub market: Option<String>,
    pub note: Option<String>,
}

fn ok_status() -> u16 {
    200
}

impl Page {
    /// Its kind, else its first check's operation (`session` without checks).
    pub fn kind(&self) -> &str {
        match (&self.kind, self.checks.first()) {
            (Some(k), _) => k,
            (None, Some(c)) => &c.operation,
            (None, None) => "session",
        }
    }

    /// Its name in a report: the file without `.gz` and `.html`.
    pub fn label(&self) -> &str {
        let f = self.file.strip_suffix(".gz").unwrap_or(&self.file);
        [".html", ".htm"]
            .iter()
            .find_map(|e| f.strip_suffix(e))
            .unwrap_or(f)
    }

    /// The content type it is judged as: JSON for `.json`, else HTML (as
    /// `strategy record --body` decides).
    pub fn content_type(&self) -> &'static str {
        let f = self.file.strip_suffix(".gz").unwrap_or(&self.file);
        if f.ends_with(".json") {
            "application/json"
        } else {
            "text/html; charset=utf-8"
        }
    }
}

/// One operation run on a page, and what it should give.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub operation: String,
    /// The operation's arguments (checked by its `bind`).
    #[serde(default)]
    pub params: Map<String, Value>,
    pub outcome: OutcomeName,
    /// Other outcomes that are a fair reading of the page too.
    #[serde(default)]
    pub outcome_any: Vec<OutcomeName>,
    /// How many items.
    pub count: Option<usize>,
    /// Also right: this many items in all, of which `count` have
    /// `country` = `local_country` and the rest another country (reviews
    /// from abroad shown on the page).
    pub count_with_foreign: Option<usize>,
    pub local_country: Option<String>,
    /// Whether the page links to a next one (compared only when the
    /// outcome is `outcome`).
    pub has_more: Option<bool>,
    #[serde(default)]
    pub items: Vec<ItemWant>,
    pub note: Option<String>,
}

/// An outcome's name, one of [`Outcome`]'s (`skipped` aside).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct OutcomeName(String);

const OUTCOMES: [Outcome; 8] = [
    Outcome::Ok,
    Outcome::Empty,
    Outcome::HardBlock,
    Outcome::TierBlock,
    Outcome::RateLimited,
    Outcome::Challenge,
    Outcome::LoginRequired,
    Outcome::Failed,
];

impl TryFrom<String> for OutcomeName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if OUTCOMES.iter().any(|o| o.as_str() == s) {
            Ok(OutcomeName(s))
        } else {
            let names: Vec<&str> = OUTCOMES.iter().map(|o| o.as_str()).collect();
            Err(format!(
                "unknown outcome `{s}`, expected one of {}",
                names.join(", ")
            ))
        }
    }
}

impl OutcomeName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The wanted fields of one item.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "ItemFile")]
pub struct ItemWant {
    pub select: Select,
    /// In the file's order.
    pub fields: Vec<(String, Want)>,
}

/// Which item a want is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Select {
    /// The item at this index (0-based).
    At(usize),
    /// The item whose `asin` is this.
    Asin(String),
}

impl fmt::Display for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Select::At(i) => write!(f, "item {i}"),
            Select::Asin(a) => write!(f, "asin {a}"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemFile {
    #[serde(default)]
    at: Option<usize>,
    #[serde(default)]
    asin: Option<String>,
    fields: Fields,
}

impl TryFrom<ItemFile> for ItemWant {
    type Error = String;
    fn try_from(f: ItemFile) -> Result<Self, String> {
        let select = match (f.at, f.asin) {
            (Some(i), None) => Select::At(i),
            (None, Some(a)) => Select::Asin(a),
            _ => return Err("an item is picked by exactly one of `at` and `asin`".into()),
        };
        Ok(ItemWant {
            select,
            fields: f.fields.0,
        })
    }
}

/// A JSON object read in its order.
struct Fields(Vec<(String, Want)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of field names and wanted values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Fields, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry::<String, Want>()? {
                    out.push(entry);
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(InOrder)
    }
}

/// Parse a truth file's text (`file` names it in errors).
pub fn parse(file: &Path, text: &str) -> Result<Truth, ScoreError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed: Result<Truth, _> = serde_path_to_error::deserialize(&mut de);
    let truth = parsed.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        format_error(file, &path, &inner)
    })?;
    de.end().map_err(|e| format_error(file, ".", &e))?;
    Ok(truth)
}

fn format_error(file: &Path, path: &str, e: &serde_json::Error) -> ScoreError {
    let (line, column) = (e.line(), e.column());
    let full = e.to_string();
    let message = full
        .strip_suffix(&format!(" at line {line} column {column}"))
        .unwrap_or(&full)
        .to_string();
    let message = if path == "." || path.is_empty() {
        message
    } else {
        format!("{path}: {message}")
    };
    ScoreError::Format {
        file: file.to_path_buf(),
        line,
        column,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truth_errors_name_the_line_and_the_place() {
        let f = Path::new("truth.json");
        let bad = "{\"pages\": [\n {\"file\": \"a.html\", \"url\": \"https://x/\", \"checks\": [\n  {\"operation\": \"r\", \"outcome\": \"okk\"}]}]}";
        let e = parse(f, bad).expect_err("unknown outcome").to_string();
        assert!(e.starts_with("truth.json:3:"), "{e}");
        assert!(e.contains("pages[0].checks[0].outcome"), "{e}");
        assert!(e.contains("unknown outcome `okk`"), "{e}");
        let e = parse(f, "{\"pages\": [}")
            .expect_err("bad JSON")
            .to_string();
        assert!(e.starts_with("truth.json:1:"), "{e}");
        let e = parse(f, "{\"pages\": [], \"pagez\": 1}").expect_err("unknown key");
        assert!(e.to_string().contains("unknown field `pagez`"), "{e}");
        let e = parse(
            f,
            r#"{"pages": [{"file": "a", "url": "u", "checks": [{"operation": "r", "outcome": "ok", "items": [{"fields": {}}]}]}]}"#,
        )
        .expect_err("no at nor asin")
        .to_string();
        assert!(e.contains("exactly one of `at` and `asin`"), "{e}");
        let e = parse(
            f,
            r#"{"pages": [{"file": "a", "url": "u", "session": "in"}]}"#,
        )
        .expect_err("bad session")
        .to_string();
        assert!(e.contains("pages[0].session"), "{e}");
    }

    #[test]
    fn fields_keep_the_files_order() {
        let t = parse(
            Path::new("t"),
            r#"{"pages": [{"file": "a", "url": "u", "kind": "k", "year": 2026, "market": "m", "note": "n",
                "checks": [{"operation": "r", "outcome": "ok", "items": [{"at": 0, "fields": {"z": 1, "a": 2, "m": 3}}]}]}]}"#,
        )
        .expect("parses");
        let names: Vec<&str> = t.pages[0].checks[0].items[0]
            .fields
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(names, ["z", "a", "m"]);
        assert_eq!(t.pages[0].status, 200);
    }
}
