//! What the three syntaxes read into: an item with its types, its `@id`
//! (or `itemid`, `resource`) and its properties in page order, each value
//! text or a nested item. Property names and types are kept short
//! (`http://schema.org/Product`, `schema:Product` → `Product`) and matched
//! without regard to case (`Offers` is `offers`).

/// One item of structured data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Item {
    pub types: Vec<String>,
    pub id: Option<String>,
    pub props: Vec<(String, Val)>,
}

/// A property's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Text(String),
    Item(Box<Item>),
}

impl Item {
    /// Whether the item is of type `t` (any of its types).
    pub fn is(&self, t: &str) -> bool {
        self.types.iter().any(|x| x.eq_ignore_ascii_case(t))
    }

    /// Every value of `key`, in page order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Val> + 'a {
        self.props
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }

    /// The first value of the first of `keys` the item has.
    pub fn get(&self, keys: &[&str]) -> Option<&Val> {
        keys.iter().find_map(|k| {
            (self.props.iter())
                .find(|(p, _)| p.eq_ignore_ascii_case(k))
                .map(|(_, v)| v)
        })
    }

    /// Every value under any of `keys`, the first key's first.
    fn under<'a>(&'a self, keys: &[&str]) -> Vec<&'a Val> {
        keys.iter()
            .flat_map(|k| {
                (self.props.iter())
                    .filter(|(p, _)| p.eq_ignore_ascii_case(k))
                    .map(|(_, v)| v)
            })
            .collect()
    }

    /// The first text value of the first of `keys` the item has, or the
    /// name of a nested item there (`brand: {"@type": "Brand", "name": …}`).
    pub fn text(&self, keys: &[&str]) -> Option<String> {
        (self.under(keys).into_iter())
            .find_map(Val::as_text)
            .filter(|t| !t.trim().is_empty())
    }

    /// The first nested item under any of `keys`.
    pub fn item(&self, keys: &[&str]) -> Option<&Item> {
        (self.under(keys).into_iter()).find_map(|v| match v {
            Val::Item(i) => Some(&**i),
            Val::Text(_) => None,
        })
    }

    /// How many items this one is, nested ones included (what a copy costs).
    pub fn size(&self) -> usize {
        1 + (self.props.iter())
            .map(|(_, v)| match v {
                Val::Item(i) => i.size(),
                Val::Text(_) => 0,
            })
            .sum::<usize>()
    }

    /// Every nested item under `key`.
    pub fn items<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Item> + 'a {
        self.all(key).filter_map(|v| match v {
            Val::Item(i) => Some(&**i),
            Val::Text(_) => None,
        })
    }
}

impl Val {
    /// The text of a value: itself, or a nested item's `name` (else its
    /// `@id`, `url` or `@value`-like `value`).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Val::Text(t) => Some(t.clone()),
            Val::Item(i) => i
                .text(&["name", "value", "url", "contentUrl"])
                .or_else(|| i.id.clone()),
        }
    }
}

/// A type or property name as schema.org names it: the part after the
/// vocabulary (`https://schema.org/InStock`, `schema:name`, `og:title` kept).
pub fn short_name(name: &str) -> String {
    let n = name.trim();
    let n = n
        .rsplit_once("schema.org/")
        .map(|(_, rest)| rest)
        .or_else(|| n.strip_prefix("schema:"))
        .unwrap_or(n);
    n.trim_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_vocabulary_and_keys_their_case() {
        assert_eq!(short_name("http://schema.org/Product"), "Product");
        assert_eq!(short_name("https://schema.org/InStock"), "InStock");
        assert_eq!(short_name("schema:ratingValue"), "ratingValue");
        assert_eq!(short_name("Review"), "Review");
        let item = Item {
            types: vec!["Product".into()],
            id: None,
            props: vec![("Offers".into(), Val::Text("x".into()))],
        };
        assert!(item.is("product"));
        assert_eq!(item.text(&["offers"]).as_deref(), Some("x"));
    }
}
