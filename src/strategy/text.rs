//! The text a person sees in an element: no `<script>`, `<style>`,
//! `<template>` or `<noscript>`, nothing `hidden` or `display:none`, and
//! nothing the strategy says the site hides (`skip`, e.g. Amazon's
//! `.aok-hidden` translation spans). Whitespace is collapsed.

use scraper::{ElementRef, Node, Selector};

/// What a person sees: no `skip` of a strategy's, hidden parts left out.
pub const SHOWN: Visibility<'static> = Visibility {
    skip: None,
    all: false,
};

/// What text extraction leaves out.
#[derive(Debug, Clone, Copy)]
pub struct Visibility<'a> {
    /// The extraction's `skip` selector.
    pub skip: Option<&'a Selector>,
    /// `all_text = true`: keep everything (the old behaviour).
    pub all: bool,
}

impl Visibility<'_> {
    /// Whether this element (not its ancestors) is left out.
    pub fn hides(&self, e: ElementRef<'_>) -> bool {
        if self.all {
            return false;
        }
        let v = e.value();
        matches!(v.name(), "script" | "style" | "template" | "noscript")
            || v.attr("hidden").is_some()
            || v.attr("style").is_some_and(display_none)
            || self.skip.is_some_and(|s| s.matches(&e))
    }

    /// Whether `e` or an ancestor of it below `root` is left out.
    pub fn hidden_within(&self, e: ElementRef<'_>, root: ElementRef<'_>) -> bool {
        if self.all {
            return false;
        }
        let mut node = Some(e);
        while let Some(n) = node {
            if self.hides(n) {
                return true;
            }
            if n.id() == root.id() {
                return false;
            }
            node = n.parent().and_then(ElementRef::wrap);
        }
        false
    }

    /// The visible text of `e` as a browser's `innerText` runs it
    /// together: inline elements join as written (`<b>4</b>.<i>5</i>` is
    /// "4.5"), block elements and `<br>` break words; whitespace collapsed.
    pub fn text(&self, e: ElementRef<'_>) -> String {
        self.text_upto(e, usize::MAX)
    }

    /// [`Visibility::text`], at most `max` bytes: the walk stops there,
    /// and after 16 nodes a byte, however much the element holds (what a
    /// site sends may nest text in text, or hide megabytes in a price).
    pub fn text_upto(&self, e: ElementRef<'_>, max: usize) -> String {
        let mut out = Collapsed::default();
        let mut nodes = max.saturating_mul(16).saturating_add(256);
        // Depth-first without recursion; children pushed in reverse, with a
        // break after each block element.
        enum Step<'a> {
            Node(ego_tree::NodeRef<'a, Node>),
            Break,
        }
        let mut stack = vec![Step::Node(*e)];
        while let Some(step) = stack.pop() {
            if out.text.len() >= max || nodes == 0 {
                break;
            }
            let node = match step {
                Step::Break => {
                    out.gap = true;
                    continue;
                }
                Step::Node(n) => n,
            };
            nodes -= 1;
            match node.value() {
                Node::Text(t) => out.push(t, max),
                Node::Element(el) => {
                    if let Some(er) = ElementRef::wrap(node)
                        && er.id() != e.id()
                        && self.hides(er)
                    {
                        continue;
                    }
                    if is_block(el.name()) {
                        out.gap = true;
                        stack.push(Step::Break);
                    }
                    let children: Vec<_> = node.children().collect();
                    stack.extend(children.into_iter().rev().map(Step::Node));
                }
                _ => {}
            }
        }
        let mut text = out.text;
        text.truncate(crate::dom::floor_char(&text, max));
        text
    }
}

/// Text with its whitespace collapsed as it is written: runs of spaces
/// (and the breaks of block elements) become one space between words.
#[derive(Default)]
struct Collapsed {
    text: String,
    /// A space is owed before the next word.
    gap: bool,
}

impl Collapsed {
    fn push(&mut self, t: &str, max: usize) {
        let mut words = t.split_whitespace();
        let Some(first) = words.next() else {
            // Only whitespace: one space owed.
            self.gap |= !t.is_empty();
            return;
        };
        self.gap |= t.starts_with(char::is_whitespace);
        for (i, word) in std::iter::once(first).chain(words).enumerate() {
            if (i > 0 || self.gap) && !self.text.is_empty() {
                self.text.push(' ');
            }
            // A word longer than the room left is cut, not copied whole.
            let room = max.saturating_sub(self.text.len());
            self.text
                .push_str(&word[..crate::dom::floor_char(word, room)]);
            if self.text.len() >= max {
                return;
            }
        }
        self.gap = t.ends_with(char::is_whitespace);
    }
}

/// Elements `innerText` puts on a line of their own: HTML's block elements
/// (`crate::dom::is_block`), and those that break a line (a line break,
/// table rows and cells, form controls, images).
fn is_block(name: &str) -> bool {
    crate::dom::is_block(name)
        || matches!(
            name,
            "br" | "caption"
                | "tbody"
                | "td"
                | "tfoot"
                | "th"
                | "thead"
                | "tr"
                | "option"
                | "img"
                | "input"
                | "button"
                | "select"
                | "textarea"
        )
}

/// `display: none` in an inline style.
fn display_none(style: &str) -> bool {
    let compact: String = style
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    compact.contains("display:none")
}

#[cfg(test)]
mod tests {
    use super::*;
    use scraper::Html;

    #[test]
    fn scripts_and_hidden_parts_are_not_text() {
        let doc = Html::parse_fragment(
            "<div id=r><span>Good <b>kettle</b></span><script>var x = 1;</script>\
             <style>.a{}</style><span class='aok-hidden'>Guter Kessel</span>\
             <span hidden>h</span><span style='display : none'>n</span><noscript>ns</noscript>\
             <template>t</template> fast.</div>",
        );
        let root = doc.select(&Selector::parse("#r").unwrap()).next().unwrap();
        let skip = Selector::parse(".aok-hidden").unwrap();
        let v = Visibility {
            skip: Some(&skip),
            all: false,
        };
        assert_eq!(v.text(root), "Good kettle fast.");
        let price = Html::parse_fragment(
            "<section><span class=p><span>AED</span><span>55<span>.</span></span><span>00</span></span>\
             <span>x</span><div>a</div><div>b</div>c<br>d</section>",
        );
        let p = price
            .select(&Selector::parse("section").unwrap())
            .next()
            .unwrap();
        assert_eq!(v.text(p), "AED55.00x a b c d");
        let all = Visibility {
            skip: None,
            all: true,
        };
        assert!(all.text(root).contains("var x = 1;"));
        let hidden = doc
            .select(&Selector::parse(".aok-hidden").unwrap())
            .next()
            .unwrap();
        assert!(v.hidden_within(hidden, root));
        assert!(!all.hidden_within(hidden, root));
    }

    #[test]
    fn text_upto_stops_at_its_bound_and_reads_as_text_does() {
        let doc = Html::parse_fragment(
            "<div id=r>  Price: <b>4</b>.<i>5</i>\n\n<p>per\tunit</p>   <span>\u{e9}\u{e9}\u{e9}</span> </div>",
        );
        let r = doc
            .select(&Selector::parse("#r").expect("selector"))
            .next()
            .expect("r");
        let whole = SHOWN.text(r);
        assert_eq!(whole, "Price: 4.5 per unit \u{e9}\u{e9}\u{e9}");
        assert_eq!(SHOWN.text_upto(r, 1000), whole);
        assert_eq!(SHOWN.text_upto(r, 10), "Price: 4.5");
        // A cut never splits a character.
        let at = whole.len() - 3;
        assert_eq!(
            SHOWN.text_upto(r, at),
            &whole[..crate::dom::floor_char(&whole, at)]
        );
        // A huge word is cut, not copied whole.
        let big = format!("<p id=b>{}</p>", "x".repeat(1 << 20));
        let doc = Html::parse_fragment(&big);
        let b = doc
            .select(&Selector::parse("#b").expect("selector"))
            .next()
            .expect("b");
        assert_eq!(SHOWN.text_upto(b, 64).len(), 64);
    }
}
