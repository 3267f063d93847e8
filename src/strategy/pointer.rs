//! JSON pointers (RFC 6901) split into their unescaped tokens once, at
//! load (`Value::pointer` splits and unescapes on every lookup).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JsonPointer {
    pub(super) text: String,
    pub(super) tokens: Vec<String>,
}

impl JsonPointer {
    pub(super) fn new(text: &str) -> Self {
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

    /// Whether `p` is written as a pointer (`""` or `/a/0/b`).
    pub(super) fn ok(p: &str) -> bool {
        p.is_empty() || p.starts_with('/')
    }

    pub(super) fn get<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        self.tokens.iter().try_fold(v, |v, t| match v {
            Value::Object(m) => m.get(t),
            Value::Array(a) => index(t).and_then(|i| a.get(i)),
            _ => None,
        })
    }

    pub(super) fn get_mut<'v>(&self, v: &'v mut Value) -> Option<&'v mut Value> {
        self.tokens.iter().try_fold(v, |v, t| match v {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => index(t).and_then(|i| a.get_mut(i)),
            _ => None,
        })
    }

    /// Whether one of the two pointers leads into (or is) the other.
    pub(super) fn overlaps(&self, other: &JsonPointer) -> bool {
        let n = self.tokens.len().min(other.tokens.len());
        self.tokens[..n] == other.tokens[..n]
    }
}

/// An array index token as RFC 6901 writes it (no sign, no leading zero).
pub(super) fn index(t: &str) -> Option<usize> {
    if t.starts_with('+') || (t.len() > 1 && t.starts_with('0')) {
        return None;
    }
    t.parse().ok()
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
