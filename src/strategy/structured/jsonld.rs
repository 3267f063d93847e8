//! JSON-LD: every `<script type="application/ld+json">` block of a page, read
//! as pages really write them. Besides plain JSON: a CDATA or HTML-comment
//! wrapper, `//` and `/* */` comments, raw line breaks inside strings, and
//! text after the JSON (an extra `}`) are tolerated; a block that is still
//! not JSON is skipped with a note naming it. Objects become [`Item`]s:
//! `@graph` and top-level arrays open into their nodes, `@type` may be a
//! list, `{"@value": …}` is its value, and a node that is only an `@id`
//! takes the node of that `@id` elsewhere on the page.

use std::collections::HashMap;

use scraper::{Html, Selector};
use serde_json::Value;

use super::item::{Item, Val, short_name};
use super::limits::{Bounds, Notes};

/// The items of the page's JSON-LD blocks.
pub fn read(html: &Html, bounds: &Bounds, notes: &mut Notes) -> Vec<Item> {
    let Ok(scripts) = Selector::parse("script[type]") else {
        return Vec::new();
    };
    let mut items = Vec::new();
    // One budget for the page's nodes, nested ones and every block's.
    let mut budget = bounds.items;
    let mut n = 0usize;
    for script in html.select(&scripts) {
        let kind = script.value().attr("type").unwrap_or_default();
        let kind = kind.split(';').next().unwrap_or_default().trim();
        if !kind.eq_ignore_ascii_case("application/ld+json") {
            continue;
        }
        n += 1;
        if n > bounds.blocks {
            notes.push(format!(
                "the page has more than {} JSON-LD blocks; the rest were not read",
                bounds.blocks
            ));
            break;
        }
        let text: String = script.text().collect();
        if text.len() > bounds.block_bytes {
            notes.push(format!(
                "JSON-LD block {n} is {} bytes, over the {}-byte bound; skipped",
                text.len(),
                bounds.block_bytes
            ));
            continue;
        }
        for value in parse_block(n, &text, notes) {
            nodes(&value, 0, bounds, &mut budget, &mut items);
            if budget == 0 {
                notes.push(format!(
                    "the page's JSON-LD holds more than {} items; the rest were not read",
                    bounds.items
                ));
                return resolve(items, bounds);
            }
        }
    }
    resolve(items, bounds)
}

/// The JSON values of block `n` (usually one); what could not be read, noted.
pub fn parse_block(n: usize, text: &str, notes: &mut Notes) -> Vec<Value> {
    let clean = clean(text);
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(&clean).into_iter::<Value>();
    loop {
        match stream.next() {
            None => break,
            Some(Ok(v)) => values.push(v),
            Some(Err(e)) => {
                let why = if e.to_string().contains("recursion limit") {
                    "it nests deeper than 128 levels".to_string()
                } else {
                    format!("it is not JSON ({e})")
                };
                if values.is_empty() {
                    notes.push(format!("JSON-LD block {n} was skipped: {why}"));
                } else {
                    notes.push(format!(
                        "JSON-LD block {n}: what follows its JSON was ignored ({e})"
                    ));
                }
                break;
            }
        }
    }
    values
}

/// The block's text without what is not JSON: comments and CDATA or
/// comment markers outside strings; raw control characters inside strings
/// become spaces.
fn clean(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut start = 0; // start of the run being copied
    let mut in_string = false;
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    i += 1;
                }
                0..=0x1f => {
                    out.push_str(&text[start..i]);
                    out.push(' ');
                    i += 1;
                    start = i;
                }
                _ => i += 1,
            }
            continue;
        }
        let rest = &b[i..];
        let skip = if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        } else if rest.starts_with(b"//") {
            memchr::memchr(b'\n', rest).unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            memchr::memmem::find(&rest[2..], b"*/").map_or(rest.len(), |e| e + 4)
        } else if rest.starts_with(b"<![CDATA[") {
            9
        } else if rest.starts_with(b"]]>") || rest.starts_with(b"-->") {
            3
        } else if rest.starts_with(b"<!--") {
            4
        } else {
            i += 1;
            continue;
        };
        out.push_str(&text[start..i]);
        i += skip;
        start = i.min(b.len());
    }
    if start < b.len() {
        out.push_str(&text[start..]);
    }
    out
}

/// The nodes of a JSON value: an object is a node (or a `@graph` of them),
/// an array its elements.
fn nodes(v: &Value, depth: usize, bounds: &Bounds, budget: &mut usize, out: &mut Vec<Item>) {
    if depth > bounds.depth || *budget == 0 {
        return;
    }
    match v {
        Value::Array(a) => {
            for x in a {
                nodes(x, depth + 1, bounds, budget, out);
            }
        }
        Value::Object(o) => {
            if let Some(g) = o.get("@graph") {
                nodes(g, depth + 1, bounds, budget, out);
            }
            let own = o.keys().any(|k| k != "@context" && k != "@graph");
            if own && let Some(item) = node(o, depth, bounds, budget) {
                out.push(item);
            }
        }
        _ => {}
    }
}

fn node(
    o: &serde_json::Map<String, Value>,
    depth: usize,
    bounds: &Bounds,
    budget: &mut usize,
) -> Option<Item> {
    if depth > bounds.depth || *budget == 0 {
        return None;
    }
    *budget -= 1;
    let mut item = Item::default();
    for (k, v) in o {
        match k.as_str() {
            "@context" => {}
            "@type" => {
                let mut types = Vec::new();
                texts(v, &mut types);
                item.types.extend(types.iter().map(|t| short_name(t)));
            }
            "@id" => item.id = v.as_str().map(str::to_string),
            _ => {
                let key = short_name(k);
                let mut vals = Vec::new();
                values(v, depth + 1, bounds, budget, &mut vals);
                item.props
                    .extend(vals.into_iter().map(|v| (key.clone(), v)));
            }
        }
    }
    Some(item)
}

fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .for_each(|s| out.push(s.into())),
        _ => {}
    }
}

fn values(v: &Value, depth: usize, bounds: &Bounds, budget: &mut usize, out: &mut Vec<Val>) {
    if depth > bounds.depth {
        return;
    }
    match v {
        Value::Null => {}
        Value::Bool(b) => out.push(Val::Text(b.to_string())),
        Value::Number(n) => out.push(Val::Text(n.to_string())),
        Value::String(s) => out.push(Val::Text(s.clone())),
        Value::Array(a) => {
            for x in a.iter().take(bounds.values) {
                values(x, depth + 1, bounds, budget, out);
            }
        }
        Value::Object(o) => {
            if let Some(v) = o.get("@value") {
                values(v, depth + 1, bounds, budget, out);
            } else if let Some(l) = o.get("@list").or_else(|| o.get("@set")) {
                values(l, depth + 1, bounds, budget, out);
            } else if let Some(item) = node(o, depth, bounds, budget) {
                out.push(Val::Item(Box::new(item)));
            }
        }
    }
}

/// Nodes that are only an `@id` take the page's node of that `@id` (to a
/// few levels, never around a cycle); one the page does not hold is its
/// `@id` as text (a URL, mostly).
fn resolve(items: Vec<Item>, bounds: &Bounds) -> Vec<Item> {
    let mut whole: HashMap<&str, &Item> = HashMap::new();
    for item in &items {
        collect(item, &mut whole, 0, bounds);
    }
    if whole.is_empty() {
        return items;
    }
    let mut fragments: HashMap<&str, Option<&Item>> = HashMap::new();
    for (id, item) in &whole {
        if let Some(at) = id.find('#').filter(|at| *at > 0) {
            fragments
                .entry(&id[at..])
                .and_modify(|seen| *seen = None)
                .or_insert(Some(*item));
        }
    }
    let by_id = Ids { whole, fragments };
    // Filling a reference copies its node: the copies, weighed in nodes
    // and text, share the page's item bound.
    let mut copies = bounds.items;
    items
        .iter()
        .map(|i| fill(i, &by_id, &mut Vec::new(), &mut copies))
        .collect()
}

fn collect<'a>(
    item: &'a Item,
    by_id: &mut HashMap<&'a str, &'a Item>,
    depth: usize,
    bounds: &Bounds,
) {
    if depth > bounds.depth {
        return;
    }
    if let Some(id) = &item.id
        && (!item.props.is_empty() || !item.types.is_empty())
    {
        let known = by_id.get(id.as_str()).map_or(0, |k| k.props.len());
        if item.props.len() > known {
            by_id.insert(id, item);
        }
    }
    for (_, v) in &item.props {
        if let Val::Item(i) = v {
            collect(i, by_id, depth + 1, bounds);
        }
    }
}

/// A fragment-only `@id` (`"#product"`) names the page's own node, which
/// other blocks may write whole (`"https://shop.test/p/1#product"`): the
/// one whole id on the page with that fragment, when just one has it.
/// Whole ids match only whole (two pages' `#product` are two nodes).
struct Ids<'a> {
    whole: HashMap<&'a str, &'a Item>,
    /// Fragment → the node of the one whole id with it (`None`: several).
    fragments: HashMap<&'a str, Option<&'a Item>>,
}

impl<'a> Ids<'a> {
    fn get(&self, id: &str) -> Option<&'a Item> {
        if let Some(found) = self.whole.get(id) {
            return Some(found);
        }
        match id.find('#') {
            // `#x`, the page's own: the one whole id ending in it.
            Some(0) => self.fragments.get(id).copied().flatten(),
            // `https://…/page#x`, where the page wrote only `#x`.
            Some(at) => self.whole.get(&id[at..]).copied(),
            None => None,
        }
    }
}

/// How many references deep a node is filled in.
const REF_DEPTH: usize = 4;

/// What copying `item` costs against the page's bound: its nodes, and a
/// node for every KiB of its text.
fn weight(item: &Item) -> usize {
    let text: usize = (item.props.iter())
        .map(|(_, v)| match v {
            Val::Text(t) => t.len() / 1024,
            Val::Item(i) => weight(i),
        })
        .sum();
    1 + text
}

/// `item` with its references filled in (a new tree).
fn fill(item: &Item, by_id: &Ids<'_>, path: &mut Vec<String>, copies: &mut usize) -> Item {
    let mut out = Item {
        types: item.types.clone(),
        id: item.id.clone(),
        props: Vec::with_capacity(item.props.len()),
    };
    if path.len() > REF_DEPTH {
        out.props = item.props.clone();
        return out;
    }
    if let Some(id) = &item.id {
        path.push(id.clone());
    }
    for (k, v) in &item.props {
        let v = match v {
            // A reference: only an `@id`, perhaps with its `@type` said again.
            Val::Item(i) if i.props.is_empty() && i.id.is_some() => {
                let id = i.id.clone().unwrap_or_default();
                match by_id.get(&id) {
                    Some(target)
                        if !(target.id.as_ref()).is_some_and(|t| path.contains(t))
                            && *copies >= weight(target) =>
                    {
                        *copies -= weight(target);
                        let mut filled = fill(target, by_id, path, copies);
                        for t in &i.types {
                            if !filled.types.contains(t) {
                                filled.types.push(t.clone());
                            }
                        }
                        Val::Item(Box::new(filled))
                    }
                    _ if i.types.is_empty() => Val::Text(id),
                    _ => Val::Item(i.clone()),
                }
            }
            Val::Item(i) => Val::Item(Box::new(fill(i, by_id, path, copies))),
            t => t.clone(),
        };
        out.props.push((k.clone(), v));
    }
    if item.id.is_some() {
        path.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items_of(html: &str) -> (Vec<Item>, Notes) {
        let page = crate::dom::document(html).html;
        let mut notes = Notes::default();
        let items = read(&page, &Bounds::default(), &mut notes);
        (items, notes)
    }

    fn block(json: &str) -> String {
        format!("<html><head><script type=\"application/ld+json\">{json}</script></head></html>")
    }

    #[test]
    fn cdata_comments_raw_newlines_and_a_trailing_brace_are_read() {
        let (items, notes) = items_of(&block(
            "//<![CDATA[\n{\"@type\": \"Product\", /* a note */ \"name\": \"Two\nlines\"}}\n//]]>",
        ));
        assert_eq!(items.len(), 1, "{notes:?}");
        assert_eq!(items[0].text(&["name"]).as_deref(), Some("Two lines"));
        assert_eq!(notes.len(), 1, "the extra brace is named: {notes:?}");
    }

    #[test]
    fn graphs_arrays_type_lists_and_references() {
        let (items, _) = items_of(&block(
            r##"{"@context": "https://schema.org", "@graph": [
                {"@type": ["Product", "Thing"], "@id": "#p", "name": "Lamp",
                 "brand": {"@id": "#b"}, "review": [{"@type": "Review", "itemReviewed": {"@id": "#p"}}]},
                {"@type": "Brand", "@id": "#b", "name": "Acme"}]}"##,
        ));
        let p = items.iter().find(|i| i.is("Product")).expect("product");
        assert!(p.is("Thing"));
        assert_eq!(p.text(&["brand"]).as_deref(), Some("Acme"));
        // A reference back to the product itself stops at the cycle.
        let r = p.item(&["review"]).expect("review");
        assert_eq!(r.text(&["itemReviewed"]).as_deref(), Some("#p"));
    }

    #[test]
    fn references_by_fragment_with_a_type_and_sets() {
        let (items, _) = items_of(&block(
            r##"{"@context": "https://schema.org", "@graph": [
                {"@type": "Product", "@id": "https://shop.test/p/1#p", "name": "Lamp",
                 "brand": {"@type": "Brand", "@id": "#b"}, "image": {"@set": ["a.jpg", "b.jpg"]}},
                {"@type": "Brand", "@id": "https://shop.test/p/1#b", "name": "Acme"},
                {"@type": "Review", "itemReviewed": {"@id": "#p"}, "author": {"@type": "Person", "@id": "#nobody"}}]}"##,
        ));
        let p = items.iter().find(|i| i.is("Product")).expect("product");
        assert_eq!(p.text(&["brand"]).as_deref(), Some("Acme"));
        assert_eq!(p.all("image").count(), 2);
        let r = items.iter().find(|i| i.is("Review")).expect("review");
        assert_eq!(
            r.item(&["itemReviewed"])
                .and_then(|i| i.text(&["name"]))
                .as_deref(),
            Some("Lamp")
        );
        // Two pages' `#product` are two nodes; a fragment two of them
        // share names neither.
        let (items, _) = items_of(&block(
            r##"{"@graph": [{"@type": "Product", "@id": "https://a.test/1#product", "name": "One"},
                {"@type": "Product", "@id": "https://a.test/2#product", "name": "Two"},
                {"@type": "Offer", "itemOffered": {"@id": "https://a.test/2#product"}, "seller": {"@id": "#product"}}]}"##,
        ));
        let o = items.iter().find(|i| i.is("Offer")).expect("offer");
        assert_eq!(
            o.item(&["itemOffered"])
                .and_then(|i| i.text(&["name"]))
                .as_deref(),
            Some("Two")
        );
        assert_eq!(o.text(&["seller"]).as_deref(), Some("#product"));
        // A typed reference the page does not hold stays a (typed) node.
        assert!(r.item(&["author"]).is_some_and(|a| a.is("Person")));
    }

    #[test]
    fn references_to_a_large_node_are_copied_within_the_bound() {
        let big = "x".repeat(1 << 20);
        let refs = vec![r##"{"@id":"#big"}"##; 5000].join(",");
        let json = format!(
            r##"{{"@graph":[{{"@id":"#big","@type":"Thing","description":"{big}"}},{{"@type":"Product","isRelatedTo":[{refs}]}}]}}"##
        );
        let (items, _) = items_of(&block(&json));
        let copied: usize = items.iter().map(weight).sum();
        assert!(copied <= 2 * Bounds::default().items + 2048, "{copied}");
    }

    #[test]
    fn broken_deep_and_huge_blocks_are_named_and_skipped() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let huge = format!("{{\"name\": \"{}\"}}", "x".repeat(10 << 20));
        let html =
            block("{\"name\": ") + &block(&deep) + &block(&huge) + &block("{\"@type\":\"Offer\"}");
        let (items, notes) = items_of(&html);
        assert_eq!(items.len(), 1);
        assert!(
            notes[0].contains("block 1 was skipped: it is not JSON"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("block 2 was skipped: it nests deeper than 128"),
            "{notes:?}"
        );
        assert!(notes[2].contains("block 3 is 10485772 bytes"), "{notes:?}");
    }
}
