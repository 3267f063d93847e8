//! A JSON response read where a strategy's pointers lead, without a
//! `Value` tree of the rest. The document's top level is scanned once into
//! borrowed slices of the text (`RawValue`; the scan validates the whole
//! document); a pointer walks down from there, scanning only the levels it
//! passes through, and only what it ends on is parsed: into a `Value` (an
//! item list, a flag), or a string borrowed from the text when it has no
//! escapes (the HTML of an `html_in_json` tier). serde_json's recursion
//! limit bounds every scan's depth.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::pointer::JsonPointer;

/// One level of the document: its children as slices of the text.
enum Level<'a> {
    /// Keys in document order (a key given twice: the last one counts, as
    /// in `serde_json::Value`).
    Object(Vec<(Cow<'a, str>, &'a RawValue)>),
    Array(Vec<&'a RawValue>),
    Scalar,
}

impl<'a> Level<'a> {
    fn scan(raw: &'a RawValue) -> Result<Level<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(raw.get());
        de.deserialize_any(LevelVisitor)
    }

    fn child(&self, token: &str) -> Option<&'a RawValue> {
        match self {
            Level::Object(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k == token)
                .map(|(_, v)| *v),
            Level::Array(items) => super::pointer::index(token).and_then(|i| items.get(i).copied()),
            Level::Scalar => None,
        }
    }
}

struct LevelVisitor;

/// A key borrowed from the text when it has no escapes.
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de> Visitor<'de> for LevelVisitor {
    type Value = Level<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Level<'de>, A::Error> {
        let mut entries = Vec::new();
        while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
            entries.push((k, v));
        }
        Ok(Level::Object(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Level<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element::<&'de RawValue>()? {
            items.push(v);
        }
        Ok(Level::Array(items))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Level<'de>, E> {
        Ok(Level::Scalar)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Level<'de>, E> {
        Ok(Level::Scalar)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Level<'de>, E> {
        Ok(Level::Scalar)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Level<'de>, E> {
        Ok(Level::Scalar)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Level<'de>, E> {
        Ok(Level::Scalar)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Level<'de>, E> {
        Ok(Level::Scalar)
    }
}

/// A JSON document, its top level scanned.
pub(super) struct LazyJson<'a> {
    top: Level<'a>,
    root: &'a RawValue,
}

impl<'a> LazyJson<'a> {
    /// `Err` names why `text` is not one JSON document.
    pub(super) fn new(text: &'a str) -> Result<Self, String> {
        let bad = |e: serde_json::Error| format!("response is not JSON ({e})");
        let root: &RawValue = serde_json::from_str(text).map_err(bad)?;
        let top = Level::scan(root).map_err(bad)?;
        Ok(LazyJson { top, root })
    }

    /// The slice of the text `p` points at.
    fn raw(&self, p: &JsonPointer) -> Option<&'a RawValue> {
        let Some((first, rest)) = p.tokens.split_first() else {
            return Some(self.root);
        };
        let mut at = self.top.child(first)?;
        for t in rest {
            at = Level::scan(at).ok()?.child(t)?;
        }
        Some(at)
    }

    /// The value at `p`, parsed on its own (the rest of the document is
    /// not); `Err` when it is nested deeper than serde_json parses (128).
    pub(super) fn get(&self, p: &JsonPointer) -> Result<Option<Value>, String> {
        self.raw(p)
            .map(|raw| serde_json::from_str(raw.get()))
            .transpose()
            .map_err(|e| format!("`{}` in the JSON response: {e}", p.text))
    }

    /// What `p` points at as text: a string (borrowed when it has no
    /// escapes), or a list's strings joined by newlines; `None` for
    /// anything else.
    pub(super) fn text(&self, p: &JsonPointer) -> Option<Cow<'a, str>> {
        let raw = self.raw(p)?;
        if let Ok(Key(s)) = serde_json::from_str::<Key<'a>>(raw.get()) {
            return Some(s);
        }
        let Ok(Level::Array(items)) = Level::scan(raw) else {
            return None;
        };
        let parts: Vec<Cow<'a, str>> = items
            .iter()
            .filter_map(|r| serde_json::from_str::<Key<'a>>(r.get()).ok().map(|k| k.0))
            .collect();
        Some(Cow::Owned(parts.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(s: &str) -> JsonPointer {
        JsonPointer::new(s)
    }

    #[test]
    fn reads_what_pointers_lead_to_as_value_would() {
        let doc = r#"{"html": "<p class=\"x\">hi</p>", "plain": "<b>no escapes</b>",
            "total": 3, "has_more": false, "a": {"b": [10, {"c": "deep"}]},
            "list": ["<i>1</i>", "<i>2</i>"], "dup": 1, "dup": 2, "a/b": {"m~n": 7}}"#;
        let lazy = LazyJson::new(doc).unwrap();
        let tree: Value = serde_json::from_str(doc).unwrap();
        for p in [
            "",
            "/html",
            "/total",
            "/has_more",
            "/a",
            "/a/b",
            "/a/b/0",
            "/a/b/1/c",
            "/a/b/2",
            "/a/b/01",
            "/missing",
            "/total/x",
            "/dup",
            "/a~1b/m~0n",
            "/list/1",
        ] {
            assert_eq!(
                lazy.get(&ptr(p)),
                Ok(tree.pointer(p).cloned()),
                "pointer `{p}`"
            );
        }
        assert_eq!(lazy.text(&ptr("/html")).unwrap(), r#"<p class="x">hi</p>"#);
        // A string without escapes is read in place.
        assert!(matches!(
            lazy.text(&ptr("/plain")),
            Some(Cow::Borrowed("<b>no escapes</b>"))
        ));
        assert_eq!(lazy.text(&ptr("/list")).unwrap(), "<i>1</i>\n<i>2</i>");
        assert_eq!(lazy.text(&ptr("/total")), None);
    }

    #[test]
    fn a_broken_or_too_deep_document_is_named() {
        assert!(
            LazyJson::new(r#"{"x": "#)
                .err()
                .unwrap()
                .contains("not JSON")
        );
        // Garbage after the document, even past the first level.
        assert!(LazyJson::new(r#"{"x": [1, }"#).is_err());
        assert!(LazyJson::new(r#"{"x": 1} trailing"#).is_err());
        // Deeper than serde_json parses: skipping it is iterative (no
        // stack to overflow), and reading it is refused by name.
        let deep = format!(
            "{{\"x\": {}{}, \"ok\": 1}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let lazy = LazyJson::new(&deep).unwrap();
        assert_eq!(lazy.get(&ptr("/ok")), Ok(Some(Value::from(1))));
        let err = lazy.get(&ptr("/x")).unwrap_err();
        assert!(err.contains("`/x`") && err.contains("recursion"), "{err}");
        let scalar = LazyJson::new("42").unwrap();
        assert_eq!(scalar.get(&ptr("")), Ok(Some(Value::from(42))));
        assert_eq!(scalar.get(&ptr("/a")), Ok(None));
    }
}
