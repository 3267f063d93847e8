//! Structured data written into the page's elements: microdata
//! (`itemscope`, `itemtype`, `itemprop`, `itemref`, `itemid`) and RDFa Lite
//! (`typeof`, `property`, `resource`, `vocab`/`prefix` names). Both say the
//! same thing the same way, an element that opens an item and elements
//! under it that name its properties, so one walker reads both: an item's
//! properties are the elements under it (and, in microdata, under the
//! elements its `itemref` names) that are not inside a nested item; a
//! property element that opens an item itself has that item as its value.

use std::collections::{HashMap, HashSet};

use ego_tree::NodeId;
use scraper::{ElementRef, Html, Selector};

use super::item::{Item, Val, short_name};
use super::limits::{Bounds, Notes};
use super::values;
use crate::strategy::locale::Locale;

/// Which attributes a syntax uses.
#[derive(Clone, Copy)]
pub struct Syntax {
    pub name: &'static str,
    /// Selects the elements that open an item.
    scope: &'static str,
    prop: &'static str,
    types: &'static str,
    id: &'static str,
}

pub const MICRODATA: Syntax = Syntax {
    name: "microdata",
    scope: "[itemscope]",
    prop: "itemprop",
    types: "itemtype",
    id: "itemid",
};

pub const RDFA: Syntax = Syntax {
    name: "RDFa",
    scope: "[typeof]",
    prop: "property",
    types: "typeof",
    id: "resource",
};

impl Syntax {
    fn opens(&self, e: &ElementRef<'_>) -> bool {
        match self.scope {
            "[itemscope]" => e.value().attr("itemscope").is_some(),
            _ => e.value().attr("typeof").is_some(),
        }
    }
}

/// The page's top-level items in `syntax` (those that are no property of
/// another item).
pub fn read(html: &Html, syntax: Syntax, bounds: &Bounds, notes: &mut Notes) -> Vec<Item> {
    let Ok(scopes) = Selector::parse(syntax.scope) else {
        return Vec::new();
    };
    let mut walk = Walk {
        items: bounds.items,
        elements: bounds.elements,
        text: bounds.page_text_bytes,
        locale: values::page_locale(html),
    };
    let mut items = Vec::new();
    // What `itemref` may name: every element with an `id`, found once.
    let refs = Selector::parse("[itemref]").ok();
    let ids: HashMap<&str, ElementRef<'_>> = match &refs {
        Some(r) if syntax.scope == MICRODATA.scope && html.select(r).next().is_some() => html
            .root_element()
            .descendants()
            .filter_map(ElementRef::wrap)
            .filter_map(|e| Some((e.value().id()?, e)))
            .fold(HashMap::new(), |mut ids, (id, e)| {
                // An id used twice names its first element, as in the DOM.
                ids.entry(id).or_insert(e);
                ids
            }),
        _ => HashMap::new(),
    };
    for e in html.select(&scopes) {
        if e.value().attr(syntax.prop).is_some() && inside_item(&e, syntax) {
            continue;
        }
        if walk.items == 0 || walk.elements == 0 {
            notes.push(format!(
                "the page's {} holds more than {} items or {} elements; the rest were not read",
                syntax.name, bounds.items, bounds.elements
            ));
            break;
        }
        let mut open = HashSet::new();
        items.push(item(&ids, e, syntax, 0, bounds, &mut walk, &mut open));
    }
    items
}

/// What is left of the page's bounds as the walk goes: items made (copies
/// included), elements visited, text read.
struct Walk {
    items: usize,
    elements: usize,
    text: usize,
    /// The page's language (`<html lang>`), in which its visible numbers
    /// are written.
    locale: Option<Locale>,
}

/// Properties whose value is a number: written in the page's language
/// where the value is the element's visible text (`1.299 €` on a German
/// page is 1299), in machine form where it is an attribute.
const NUMBERS: &[&str] = &[
    "price",
    "lowPrice",
    "highPrice",
    "minPrice",
    "maxPrice",
    "ratingValue",
    "bestRating",
    "worstRating",
    "reviewCount",
    "ratingCount",
];

/// The most property names one element's value is kept under
/// (`itemprop="name headline"`); each further name is a copy of the value.
const NAMES: usize = 4;

fn inside_item(e: &ElementRef<'_>, syntax: Syntax) -> bool {
    e.ancestors()
        .filter_map(ElementRef::wrap)
        .any(|a| syntax.opens(&a))
}

fn item<'a>(
    ids: &HashMap<&str, ElementRef<'a>>,
    e: ElementRef<'a>,
    syntax: Syntax,
    depth: usize,
    bounds: &Bounds,
    walk: &mut Walk,
    open: &mut HashSet<NodeId>,
) -> Item {
    walk.items = walk.items.saturating_sub(1);
    open.insert(e.id());
    let el = e.value();
    let mut it = Item {
        types: (el.attr(syntax.types).unwrap_or_default())
            .split_whitespace()
            .map(short_name)
            .filter(|t| !t.is_empty())
            .collect(),
        id: el.attr(syntax.id).map(str::to_string),
        props: Vec::new(),
    };
    // The elements whose subtrees hold the properties: the item's own, and
    // what its `itemref` names.
    let mut roots: Vec<ElementRef<'a>> = e.children().filter_map(ElementRef::wrap).collect();
    for id in el.attr("itemref").unwrap_or_default().split_whitespace() {
        if let Some(r) = ids.get(id)
            && !open.contains(&r.id())
        {
            roots.push(*r);
        }
    }
    let mut stack: Vec<ElementRef<'a>> = roots.into_iter().rev().collect();
    while let Some(p) = stack.pop() {
        if walk.elements == 0 {
            break;
        }
        walk.elements -= 1;
        let opens = syntax.opens(&p);
        if let Some(names) = p.value().attr(syntax.prop) {
            let value = if opens {
                if depth >= bounds.depth || walk.items == 0 || open.contains(&p.id()) {
                    None
                } else {
                    Some(Val::Item(Box::new(item(
                        ids,
                        p,
                        syntax,
                        depth + 1,
                        bounds,
                        walk,
                        open,
                    ))))
                }
            } else {
                let (text, shown) = value_of(&p, syntax, bounds, walk);
                let number = || {
                    names
                        .split_whitespace()
                        .any(|n| NUMBERS.contains(&short_name(n).as_str()))
                };
                let text = match &walk.locale {
                    Some(l) if shown && number() => {
                        values::shown_number(&text, l).map_or(text, |n| n.to_string())
                    }
                    _ => text,
                };
                Some(Val::Text(text))
            };
            if let Some(v) = value {
                let cost = match &v {
                    Val::Item(i) => i.size(),
                    Val::Text(_) => 0,
                };
                for (n, name) in names.split_whitespace().take(NAMES).enumerate() {
                    // The first name holds the value; each other one is a copy.
                    if n > 0 {
                        if walk.items < cost {
                            break;
                        }
                        walk.items -= cost;
                    }
                    if it.props.len() < bounds.values * NAMES {
                        it.props.push((short_name(name), v.clone()));
                    }
                }
            }
        }
        if !opens {
            let children: Vec<ElementRef<'a>> = p.children().filter_map(ElementRef::wrap).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    open.remove(&e.id());
    it
}

/// A property element's value, as the syntax reads it: `content` first
/// (microdata's `<meta>`, and what shops put on a visible price), then the
/// URL of a link or a media element, a `<time>`'s `datetime`, a `<data>` or
/// `<meter>`'s `value`, else the element's text; and whether it is the
/// text (what a person reads, in the page's language).
fn value_of(
    p: &ElementRef<'_>,
    syntax: Syntax,
    bounds: &Bounds,
    walk: &mut Walk,
) -> (String, bool) {
    let el = p.value();
    if let Some(c) = el.attr("content") {
        return (c.to_string(), false);
    }
    if syntax.scope == RDFA.scope
        && let Some(r) = el.attr("resource")
    {
        return (r.to_string(), false);
    }
    let attr = match el.name() {
        "a" | "area" | "link" => "href",
        "img" | "audio" | "video" | "source" | "embed" | "iframe" | "track" => "src",
        "object" => "data",
        "data" | "meter" => "value",
        "time" => "datetime",
        _ => "",
    };
    if let Some(v) = el.attr(attr) {
        return (v.to_string(), false);
    }
    // The text as a strategy's field reads it (`innerText`), hidden parts
    // included: a value hidden from people is still the page's value.
    let all = crate::strategy::text::Visibility {
        skip: None,
        all: true,
    };
    // Reading costs the text under the element: nested property elements
    // read it again, so the page's budget runs out, not the time.
    if walk.text == 0 {
        return (String::new(), true);
    }
    let text = all.text_upto(*p, bounds.text_bytes.min(walk.text));
    walk.text = walk.text.saturating_sub(text.len().max(1));
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(html: &str, syntax: Syntax) -> Vec<Item> {
        let page = crate::dom::document(html).html;
        read(&page, syntax, &Bounds::default(), &mut Notes::default())
    }

    #[test]
    fn visible_numbers_read_in_the_pages_language_and_ids_name_their_first_element() {
        let page = |lang: &str| {
            format!(
                r#"<html lang="{lang}"><body><div itemscope itemtype="https://schema.org/Product" itemref="r">
                  <span itemprop="name">Lamp</span>
                  <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
                    <span itemprop="price">1.299 €</span><span itemprop="lowPrice" content="1.299"></span></div></div>
                  <p id="r" itemprop="sku">A-1</p><p id="r" itemprop="sku">B-2</p></body></html>"#
            )
        };
        let read_page = |lang: &str| {
            let parsed = crate::dom::document(&page(lang));
            read(
                &parsed.html,
                MICRODATA,
                &Bounds::default(),
                &mut Notes::default(),
            )
        };
        let de = read_page("de-DE");
        let offer = de[0].item(&["offers"]).expect("offer");
        assert_eq!(offer.text(&["price"]).as_deref(), Some("1299"));
        // An attribute is machine-written, whatever the page's language.
        assert_eq!(offer.text(&["lowPrice"]).as_deref(), Some("1.299"));
        assert_eq!(de[0].text(&["sku"]).as_deref(), Some("A-1"));
        let en = read_page("en");
        let offer = en[0].item(&["offers"]).expect("offer");
        assert_eq!(offer.text(&["price"]).as_deref(), Some("1.299"));
    }

    #[test]
    fn microdata_items_nest_and_itemref_adds_properties() {
        let items = read_all(
            r#"<div itemscope itemtype="http://schema.org/Product" itemref="extra">
                 <h1 itemprop="name">Desk lamp</h1>
                 <div itemprop="aggregateRating" itemscope itemtype="http://schema.org/AggregateRating">
                   <span itemprop="ratingValue">4.5</span> of <meta itemprop="bestRating" content="5">
                   <span itemprop="reviewCount">12</span></div>
                 <a itemprop="url" href="/lamp">link</a>
               </div>
               <p id="extra"><span itemprop="sku">L-1</span></p>"#,
            MICRODATA,
        );
        assert_eq!(items.len(), 1, "the nested item is no top-level one");
        let p = &items[0];
        assert!(p.is("Product"));
        assert_eq!(p.text(&["name"]).as_deref(), Some("Desk lamp"));
        assert_eq!(p.text(&["sku"]).as_deref(), Some("L-1"));
        assert_eq!(p.text(&["url"]).as_deref(), Some("/lamp"));
        let r = p.item(&["aggregateRating"]).expect("rating");
        assert_eq!(r.text(&["ratingValue"]).as_deref(), Some("4.5"));
        assert_eq!(r.text(&["bestRating"]).as_deref(), Some("5"));
        assert!(p.item(&["name"]).is_none());
    }

    #[test]
    fn rdfa_lite_reads_the_same_way() {
        let items = read_all(
            r#"<div vocab="https://schema.org/" typeof="Product">
                 <span property="name">Desk lamp</span>
                 <div property="review" typeof="Review"><span property="author">Ann</span>
                   <span property="reviewRating" typeof="Rating"><meta property="ratingValue" content="4"></span></div>
               </div>"#,
            RDFA,
        );
        assert_eq!(items.len(), 1);
        let r = items[0].item(&["review"]).expect("review");
        assert_eq!(r.text(&["author"]).as_deref(), Some("Ann"));
        let rating = r.item(&["reviewRating"]).expect("rating");
        assert_eq!(rating.text(&["ratingValue"]).as_deref(), Some("4"));
    }

    #[test]
    fn many_names_on_nested_items_stay_within_the_bound() {
        // Each level's value under 500 names: 500^3 copies unbounded.
        let names = vec!["p"; 500].join(" ");
        let open = format!("<div itemprop=\"{names}\" itemscope>");
        let page = format!(
            "<div itemscope>{}<span itemprop=\"x\">v</span>{}</div>",
            open.repeat(3),
            "</div>".repeat(3)
        );
        let html = crate::dom::document(&page).html;
        let bounds = Bounds::default();
        let items = read(&html, MICRODATA, &bounds, &mut Notes::default());
        let made: usize = items.iter().map(Item::size).sum();
        assert!(made <= bounds.items, "{made} items made");
    }

    #[test]
    fn an_itemref_cycle_ends() {
        let items = read_all(
            r#"<div id="a" itemscope itemref="b"><span itemprop="name">x</span></div>
               <div id="b" itemprop="part" itemscope itemref="a"></div>"#,
            MICRODATA,
        );
        assert!(!items.is_empty());
    }
}
