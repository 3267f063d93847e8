//! A JSON response read where a strategy's pointers lead, in one pass and
//! without a `Value` tree of the rest: the parse walks the document once,
//! follows the keys and indexes the pointers name, builds values only for
//! what a pointer ends on (an item list, a flag, the HTML of an
//! `html_in_json` tier) and skips everything else (serde's `IgnoredAny`:
//! validated, not kept). serde_json's recursion limit bounds the depth of
//! what is built; skipping is iterative (no stack to overflow).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::pointer::{JsonPointer, index};

/// The pointers as a tree of their tokens.
#[derive(Default)]
struct Node {
    /// Pointers (their positions) that end here.
    ends: Vec<usize>,
    children: Vec<(String, Node)>,
}

impl Node {
    fn add(&mut self, tokens: &[String], at: usize) {
        match tokens.split_first() {
            None => self.ends.push(at),
            Some((t, rest)) => {
                let i = match self.children.iter().position(|(k, _)| k == t) {
                    Some(i) => i,
                    None => {
                        self.children.push((t.clone(), Node::default()));
                        self.children.len() - 1
                    }
                };
                self.children[i].1.add(rest, at);
            }
        }
    }

    /// Every pointer under this node, with its tokens from here.
    fn under<'t>(&'t self, path: &mut Vec<&'t str>, out: &mut Vec<(usize, Vec<&'t str>)>) {
        for &at in &self.ends {
            out.push((at, path.clone()));
        }
        for (k, child) in &self.children {
            path.push(k);
            child.under(path, out);
            path.pop();
        }
    }

    fn clear(&self, out: &mut [Option<Value>]) {
        let mut all = Vec::new();
        self.under(&mut Vec::new(), &mut all);
        for (at, _) in all {
            out[at] = None;
        }
    }
}

/// A key, borrowed from the text when it has no escapes.
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

/// Read the value at `node` into `out`.
struct At<'n, 'o> {
    node: &'n Node,
    out: &'o mut [Option<Value>],
}

impl<'de> DeserializeSeed<'de> for At<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.node.ends.is_empty() {
            return d.deserialize_any(Walk(self));
        }
        // A pointer ends here: this value is built, and the pointers below
        // it are read out of it.
        let v = Value::deserialize(d)?;
        let mut all = Vec::new();
        self.node.under(&mut Vec::new(), &mut all);
        for (at, path) in all {
            let mut cur = Some(&v);
            for t in path {
                cur = cur.and_then(|c| match c {
                    Value::Object(m) => m.get(t),
                    Value::Array(a) => index(t).and_then(|i| a.get(i)),
                    _ => None,
                });
            }
            self.out[at] = cur.cloned();
        }
        Ok(())
    }
}

struct Walk<'n, 'o>(At<'n, 'o>);

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let At { node, out } = self.0;
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            match node.children.iter().find(|(t, _)| *t == k) {
                Some((_, child)) => {
                    // A key given twice: the last one counts, as in `Value`.
                    child.clear(out);
                    map.next_value_seed(At { node: child, out })?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let At { node, out } = self.0;
        let mut i = 0usize;
        loop {
            let wanted = node.children.iter().find(|(t, _)| index(t) == Some(i));
            let more = match wanted {
                Some((_, child)) => seq.next_element_seed(At { node: child, out })?.is_some(),
                None => seq.next_element::<IgnoredAny>()?.is_some(),
            };
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The values `pointers` lead to in `text` (`None`: nothing there), read in
/// one pass; `Err` names why `text` is not one JSON document (or what is
/// nested deeper than serde_json parses, where a pointer leads into it).
pub(super) fn pick(text: &str, pointers: &[&JsonPointer]) -> Result<Vec<Option<Value>>, String> {
    let mut root = Node::default();
    for (at, p) in pointers.iter().enumerate() {
        root.add(&p.tokens, at);
    }
    let mut out = vec![None; pointers.len()];
    let mut de = serde_json::Deserializer::from_str(text);
    At {
        node: &root,
        out: &mut out,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|e| format!("response is not JSON ({e})"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(s: &str) -> JsonPointer {
        JsonPointer::new(s)
    }

    #[test]
    fn reads_what_pointers_lead_to_as_value_would() {
        let doc = r#"{"html": "<p class=\"x\">hi</p>", "total": 3, "has_more": false,
            "a": {"b": [10, {"c": "deep"}]}, "list": ["<i>1</i>", "<i>2</i>"],
            "dup": {"x": 1}, "dup": {"y": 2}, "a/b": {"m~n": 7}, "skip": [[[{"q": "\u00e9"}]]]}"#;
        let tree: Value = serde_json::from_str(doc).unwrap();
        let all = [
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
            "/dup/x",
            "/dup/y",
            "/a~1b/m~0n",
            "/list/1",
        ];
        let ptrs: Vec<JsonPointer> = all.iter().map(|p| ptr(p)).collect();
        // All at once, and each alone: the same as reading the whole tree.
        let refs: Vec<&JsonPointer> = ptrs.iter().collect();
        let got = pick(doc, &refs).unwrap();
        for (i, p) in all.iter().enumerate() {
            assert_eq!(got[i], tree.pointer(p).cloned(), "pointer `{p}` among all");
            assert_eq!(
                pick(doc, &[&ptrs[i]]).unwrap()[0],
                tree.pointer(p).cloned(),
                "pointer `{p}` alone"
            );
        }
    }

    #[test]
    fn a_broken_or_too_deep_document_is_named() {
        let p = ptr("/x");
        assert!(pick(r#"{"x": "#, &[&p]).unwrap_err().contains("not JSON"));
        // Broken where no pointer leads: still refused (the whole text is read).
        assert!(pick(r#"{"y": [1, }"#, &[&p]).is_err());
        assert!(pick(r#"{"x": 1} trailing"#, &[&p]).is_err());
        // Deeper than serde_json parses: skipped safely where no pointer
        // leads, refused by name where one does.
        let deep = format!(
            "{{\"x\": {}{}, \"ok\": 1}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(
            pick(&deep, &[&ptr("/ok")]).unwrap()[0],
            Some(Value::from(1))
        );
        let err = pick(&deep, &[&p]).unwrap_err();
        assert!(err.contains("recursion"), "{err}");
        assert_eq!(pick("42", &[&ptr("")]).unwrap()[0], Some(Value::from(42)));
        assert_eq!(pick("42", &[&ptr("/a")]).unwrap()[0], None);
    }
}
