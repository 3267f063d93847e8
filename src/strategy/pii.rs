//! Personal data in extracted items. A strategy marks a field `pii = true`
//! (a reviewer's name, a profile link, an email); callers below
//! `security.pii_role` get those fields masked: names as `J*** D***`, emails
//! as `j***@e***`, links and ids as a keyed hash (`pii:3f9a…`, the same
//! person gives the same hash, so items still group by reviewer, but the
//! hash cannot be looked up without the daemon's key). `scrape` output is
//! the page itself and is not masked.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::operation::Operation;

/// The fields any tier of `op` marks `pii = true`, sorted.
pub fn fields_of(op: &Operation) -> Vec<String> {
    let all: BTreeSet<&str> = op
        .tiers
        .iter()
        .flat_map(|t| t.extractor.pii_fields())
        .collect();
    all.into_iter().map(str::to_string).collect()
}

/// Masks values with the daemon's own key.
#[derive(Clone)]
pub struct PiiMask {
    key: [u8; 32],
}

impl std::fmt::Debug for PiiMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PiiMask")
    }
}

impl PiiMask {
    pub fn new(key: [u8; 32]) -> PiiMask {
        PiiMask { key }
    }

    /// Mask `fields` in every item; the names of those that held a value.
    pub fn mask_items(&self, items: &mut [Map<String, Value>], fields: &[String]) -> Vec<String> {
        let mut masked = BTreeSet::new();
        for item in items.iter_mut() {
            for f in fields {
                if let Some(v) = item.get_mut(f)
                    && self.mask_value(v)
                {
                    masked.insert(f.clone());
                }
            }
        }
        masked.into_iter().collect()
    }

    /// Mask one value in place; whether there was anything to mask.
    pub fn mask_value(&self, v: &mut Value) -> bool {
        match v {
            Value::String(s) if !s.is_empty() => {
                *s = self.mask_text(s);
                true
            }
            Value::Number(n) => {
                *v = Value::String(self.hash(&n.to_string()));
                true
            }
            Value::Array(a) => {
                let mut any = false;
                for x in a.iter_mut() {
                    any |= self.mask_value(x);
                }
                any
            }
            Value::Object(o) => {
                let mut any = false;
                for x in o.values_mut() {
                    any |= self.mask_value(x);
                }
                any
            }
            _ => false,
        }
    }

    fn mask_text(&self, s: &str) -> String {
        let t = s.trim();
        let linkish = t.contains("://") || t.starts_with('/') || !t.contains(char::is_alphabetic);
        if linkish {
            return self.hash(t);
        }
        if let Some((local, domain)) = t.split_once('@')
            && !t.contains(char::is_whitespace)
        {
            return format!("{}@{}", initial(local), initial(domain));
        }
        t.split_whitespace()
            .map(initial)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn hash(&self, s: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update(s.as_bytes());
        let d = h.finalize();
        let hex: String = d[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("pii:{hex}")
    }
}

/// `John` → `J***`; a word without a letter to show → `***`.
fn initial(word: &str) -> String {
    match word.chars().next() {
        Some(c) if c.is_alphanumeric() => format!("{c}***"),
        _ => "***".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::PiiMask;

    fn item(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn names_emails_and_links_are_masked_and_named() {
        let m = PiiMask::new([7; 32]);
        let mut items = vec![
            item(
                json!({"author": "Jane Doe", "profile": "https://shop.test/u/123", "email": "jane@shop.test", "rating": 5}),
            ),
            item(json!({"author": "", "profile": null, "rating": 4})),
        ];
        let fields = ["author".to_string(), "profile".into(), "email".into()];
        let masked = m.mask_items(&mut items, &fields);
        assert_eq!(masked, ["author", "email", "profile"]);
        assert_eq!(items[0]["author"], "J*** D***");
        assert_eq!(items[0]["email"], "j***@s***");
        let p = items[0]["profile"].as_str().unwrap_or_default();
        assert!(p.starts_with("pii:") && p.len() == 20, "{p}");
        assert!(!p.contains("123"));
        assert_eq!(items[0]["rating"], 5, "other fields stay");
        assert_eq!(items[1]["profile"], Value::Null);
    }

    #[test]
    fn the_same_person_hashes_alike_and_another_key_differently() {
        let a = PiiMask::new([1; 32]);
        let b = PiiMask::new([2; 32]);
        let link = "/gp/profile/amzn1.account.X";
        assert_eq!(a.hash(link), a.hash(link));
        assert_ne!(a.hash(link), b.hash(link));
        assert_ne!(a.hash(link), a.hash("/gp/profile/amzn1.account.Y"));
    }
}
