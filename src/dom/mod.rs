//! HTML from a site that may be hostile, parsed within bounds: at most
//! [`MAX_DEPTH`] levels of elements (Blink's cap), a deadline, and the
//! caller's selectors checked before they are parsed (see [`selector`]).
//! Heavy work on a page runs off the runtime threads ([`offload`]).
//!
//! The cap is kept twice. While parsing, a filter between html5ever's
//! tokenizer and its tree builder drops start tags that would open an
//! element deeper than the cap (their text stays; their end tags are dropped
//! with them), so the tree builder's stack of open elements, which it scans
//! on most tags, never grows with the page. After parsing, one iterative pass
//! flattens to their text any elements the tree builder still nested deeper
//! (it re-opens formatting elements on its own), so nothing walking the tree
//! recursively (an HTML→markdown converter, a serializer) can exhaust a stack.

pub mod offload;
mod page_state;
pub use page_state::PageState;
pub mod selector;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};
use html5ever::{LocalName, QualName, local_name, namespace_url, ns};
use scraper::{Html, HtmlTreeSink};

/// Elements nested deeper than this are cut (Blink's
/// `kMaximumHTMLParserDOMTreeDepth`).
pub const MAX_DEPTH: usize = 512;

/// How long one page may take to parse before the rest of it is cut.
pub const PARSE_DEADLINE: Duration = Duration::from_secs(10);

/// What a bounded parse left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Elements deeper than [`MAX_DEPTH`] were flattened to their text.
    pub depth: bool,
    /// The deadline passed: the page after that point is missing.
    pub deadline: bool,
}

impl Cut {
    pub fn any(&self) -> bool {
        self.depth || self.deadline
    }

    /// What was cut, in words for a result's `warnings`.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.depth {
            out.push(format!(
                "the page nests elements deeper than {MAX_DEPTH} levels; those deeper were flattened to their text"
            ));
        }
        if self.deadline {
            out.push(format!(
                "the page took longer than {} s to parse; the rest of it was cut",
                PARSE_DEADLINE.as_secs()
            ));
        }
        out
    }

    pub fn merge(&mut self, other: Cut) {
        self.depth |= other.depth;
        self.deadline |= other.deadline;
    }
}

/// A parsed page and what its parse cut.
pub struct Parsed {
    pub html: Html,
    pub cut: Cut,
}

/// Parse a whole document, bounded; the deadline is [`PARSE_DEADLINE`] from now.
pub fn document(text: &str) -> Parsed {
    document_until(text, Instant::now() + PARSE_DEADLINE)
}

/// [`document`] with a deadline of the caller's.
pub fn document_until(text: &str, deadline: Instant) -> Parsed {
    let tb = TreeBuilder::new(
        HtmlTreeSink::new(Html::new_document()),
        TreeBuilderOpts::default(),
    );
    run(tb, TokenizerOpts::default(), text, deadline)
}

/// Parse a fragment (as inside `<body>`), bounded.
pub fn fragment(text: &str) -> Parsed {
    let sink = HtmlTreeSink::new(Html::new_fragment());
    let context = html5ever::tree_builder::create_element(
        &sink,
        QualName::new(None, ns!(html), local_name!("body")),
        Vec::new(),
    );
    let tb = TreeBuilder::new_for_fragment(sink, context, None, TreeBuilderOpts::default());
    let opts = TokenizerOpts {
        initial_state: Some(tb.tokenizer_state_for_context_elem()),
        ..TokenizerOpts::default()
    };
    run(tb, opts, text, Instant::now() + PARSE_DEADLINE)
}

fn run(
    tb: TreeBuilder<ego_tree::NodeId, HtmlTreeSink>,
    opts: TokenizerOpts,
    text: &str,
    deadline: Instant,
) -> Parsed {
    let filter = Bounded::new(tb, deadline);
    let tok = Tokenizer::new(filter, opts);
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(text));
    while let html5ever::tokenizer::TokenizerResult::Script(_) = tok.feed(&input) {}
    tok.end();
    let mut cut = tok.sink.cut.get();
    let mut html = html5ever::tree_builder::TreeSink::finish(tok.sink.inner.sink);
    cut.depth |= flatten_deeper_than(&mut html, MAX_DEPTH);
    Parsed { html, cut }
}

/// Elements that never have an end tag.
fn is_void(name: &LocalName) -> bool {
    matches!(
        name.as_ref(),
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "source"
            | "track"
            | "wbr"
            | "param"
            | "keygen"
            | "frame"
            | "basefont"
            | "bgsound"
            | "image"
    )
}

/// Elements that switch the tokenizer's state or the tree builder's mode:
/// always passed on, so a dropped tag never changes how the rest is read.
fn always_passed(name: &LocalName) -> bool {
    matches!(
        name.as_ref(),
        "script"
            | "style"
            | "textarea"
            | "title"
            | "xmp"
            | "iframe"
            | "noembed"
            | "noframes"
            | "noscript"
            | "plaintext"
            | "template"
            | "svg"
            | "math"
            | "html"
            | "head"
            | "body"
            | "frameset"
            | "select"
            | "table"
    )
}

/// Elements a start tag of the same kind closes (`<li>` after `<li>`), with
/// the elements that stop the search for the open one.
fn closes_own_kind(name: &str) -> Option<&'static [&'static str]> {
    const LIST: &[&str] = &["ul", "ol", "menu", "table", "body", "html", "template"];
    const DEF: &[&str] = &["dl", "table", "body", "html", "template"];
    const ROW: &[&str] = &["table", "tbody", "thead", "tfoot", "body", "html"];
    const CELL: &[&str] = &["tr", "table", "body", "html"];
    const OPTION: &[&str] = &["select", "datalist", "optgroup", "body", "html"];
    match name {
        "li" => Some(LIST),
        "dd" | "dt" => Some(DEF),
        "tr" => Some(ROW),
        "td" | "th" => Some(CELL),
        "option" => Some(OPTION),
        "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => Some(&[
            "button", "table", "td", "th", "caption", "object", "body", "html", "template",
        ]),
        _ => None,
    }
}

/// Start tags that close an open `<p>` (the spec's "close a p element"):
/// the block elements.
fn closes_p(name: &str) -> bool {
    is_block(name)
}

/// HTML's block elements: each starts on a line of its own (`innerText`
/// and markdown break around it) and closes an open `<p>`. The one list:
/// what reads text (`strategy/text.rs`) adds the elements that only break
/// a line.
pub fn is_block(name: &str) -> bool {
    BLOCKS.binary_search(&name).is_ok()
}

/// The largest byte index at most `i` where `s` may be cut without
/// splitting a character (`str::floor_char_boundary`, which needs a newer
/// Rust than the crate's `rust-version`).
pub fn floor_char(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    (0..=i)
        .rev()
        .find(|&at| s.is_char_boundary(at))
        .unwrap_or(0)
}

/// [`is_block`]'s elements, sorted.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "ul",
];

/// The token filter: an estimate of the open elements (what the tags
/// opened, less what the common implied end tags close), and the start tags
/// it dropped, per name, so their end tags go too.
struct Bounded<S> {
    inner: S,
    open: RefCell<Vec<LocalName>>,
    /// Open `svg`/`math` elements: inside them `<x/>` opens nothing.
    foreign: Cell<usize>,
    dropped: RefCell<HashMap<LocalName, usize>>,
    deadline: Instant,
    tokens: Cell<u32>,
    stopped: Cell<bool>,
    cut: Cell<Cut>,
}

impl<S> Bounded<S> {
    fn new(inner: S, deadline: Instant) -> Self {
        Bounded {
            inner,
            open: RefCell::new(Vec::new()),
            foreign: Cell::new(0),
            dropped: RefCell::new(HashMap::new()),
            deadline,
            tokens: Cell::new(0),
            stopped: Cell::new(false),
            cut: Cell::new(Cut::default()),
        }
    }

    fn mark(&self, f: impl FnOnce(&mut Cut)) {
        let mut c = self.cut.get();
        f(&mut c);
        self.cut.set(c);
    }

    /// Whether the tag goes on to the tree builder.
    fn admit(&self, kind: TagKind, name: &LocalName, self_closing: bool) -> bool {
        let mut open = self.open.borrow_mut();
        match kind {
            TagKind::StartTag => {
                if is_void(name) || (self_closing && self.foreign.get() > 0) {
                    return true;
                }
                if let Some(stops) = closes_own_kind(name) {
                    close_open(&mut open, |n| n == name.as_ref(), stops, &self.foreign);
                }
                if closes_p(name) && name.as_ref() != "p" {
                    close_open(
                        &mut open,
                        |n| n == "p",
                        closes_own_kind("p").unwrap_or(&[]),
                        &self.foreign,
                    );
                }
                if open.len() >= MAX_DEPTH && !always_passed(name) {
                    *self.dropped.borrow_mut().entry(name.clone()).or_insert(0) += 1;
                    self.mark(|c| c.depth = true);
                    return false;
                }
                if matches!(name.as_ref(), "svg" | "math") {
                    self.foreign.set(self.foreign.get() + 1);
                }
                open.push(name.clone());
                true
            }
            TagKind::EndTag => {
                if let Some(n) = self.dropped.borrow_mut().get_mut(name)
                    && *n > 0
                {
                    *n -= 1;
                    return false;
                }
                if let Some(pos) = open.iter().rposition(|n| n == name) {
                    pop_to(&mut open, pos, &self.foreign);
                }
                true
            }
        }
    }
}

/// Close the nearest open element `is_it` unless one of `stops` is nearer.
fn close_open(
    open: &mut Vec<LocalName>,
    is_it: impl Fn(&str) -> bool,
    stops: &[&str],
    foreign: &Cell<usize>,
) {
    for (pos, n) in open.iter().enumerate().rev() {
        if is_it(n.as_ref()) {
            pop_to(open, pos, foreign);
            return;
        }
        if stops.contains(&n.as_ref()) {
            return;
        }
    }
}

fn pop_to(open: &mut Vec<LocalName>, pos: usize, foreign: &Cell<usize>) {
    let gone = open[pos..]
        .iter()
        .filter(|n| matches!(n.as_ref(), "svg" | "math"))
        .count();
    foreign.set(foreign.get().saturating_sub(gone));
    open.truncate(pos);
}

impl<S: TokenSink> TokenSink for Bounded<S> {
    type Handle = S::Handle;

    fn process_token(&self, token: Token, line: u64) -> TokenSinkResult<S::Handle> {
        if matches!(token, Token::EOFToken) {
            return self.inner.process_token(token, line);
        }
        if self.stopped.get() {
            return TokenSinkResult::Continue;
        }
        let n = self.tokens.get().wrapping_add(1);
        self.tokens.set(n);
        if n.is_multiple_of(1024) && Instant::now() >= self.deadline {
            self.stopped.set(true);
            self.mark(|c| c.deadline = true);
            return TokenSinkResult::Continue;
        }
        if let Token::TagToken(tag) = &token
            && !self.admit(tag.kind, &tag.name, tag.self_closing)
        {
            return TokenSinkResult::Continue;
        }
        self.inner.process_token(token, line)
    }

    fn end(&self) {
        self.inner.end()
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.inner
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// Replace the children of every element at depth `max` that has element
/// children by its text, in one iterative pass. Returns whether any was.
fn flatten_deeper_than(html: &mut Html, max: usize) -> bool {
    use ego_tree::iter::Edge;
    let mut at_cap = Vec::new();
    let mut depth = 0usize;
    for edge in html.tree.root().traverse() {
        match edge {
            Edge::Open(node) => {
                depth += 1;
                if depth == max && node.children().any(|c| c.value().is_element()) {
                    at_cap.push(node.id());
                }
            }
            Edge::Close(_) => depth -= 1,
        }
    }
    for id in &at_cap {
        let Some(node) = html.tree.get(*id) else {
            continue;
        };
        let text: String = node
            .descendants()
            .filter_map(|d| d.value().as_text().map(|t| t.text.to_string()))
            .collect();
        let Some(mut node) = html.tree.get_mut(*id) else {
            continue;
        };
        while let Some(mut child) = node.first_child() {
            child.detach();
        }
        if !text.is_empty() {
            node.append(scraper::Node::Text(scraper::node::Text {
                text: StrTendril::from_slice(&text),
            }));
        }
    }
    !at_cap.is_empty()
}

/// The deepest element nesting of a parsed page (tests and the fuzz target
/// check the cap with it).
pub fn depth(html: &Html) -> usize {
    use ego_tree::iter::Edge;
    let (mut depth, mut max) = (0usize, 0usize);
    for edge in html.tree.root().traverse() {
        match edge {
            Edge::Open(_) => {
                depth += 1;
                max = max.max(depth);
            }
            Edge::Close(_) => depth -= 1,
        }
    }
    max
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_block_list_is_sorted_for_its_search() {
        assert!(super::BLOCKS.windows(2).all(|w| w[0] < w[1]));
        assert!(super::is_block("div") && super::is_block("li") && !super::is_block("span"));
    }

    use super::*;

    fn nested(n: usize) -> String {
        format!(
            "<html><body>{}deep{}</body></html>",
            "<div>".repeat(n),
            "</div>".repeat(n)
        )
    }

    #[test]
    fn a_deep_page_is_cut_at_the_cap_and_keeps_its_text() {
        let p = document(&nested(100_000));
        assert!(p.cut.depth && !p.cut.deadline);
        assert!(depth(&p.html) <= MAX_DEPTH + 1, "{}", depth(&p.html));
        let text: String = p.html.root_element().text().collect();
        assert!(text.contains("deep"));
    }

    #[test]
    fn an_ordinary_page_is_whole() {
        let html = "<ul><li>a<li>b<li>c</ul><p>x<p>y<table><tr><td>1<td>2<tr><td>3</table>";
        let page = format!("<html><body>{}</body></html>", html.repeat(2_000));
        let p = document(&page);
        assert!(!p.cut.any(), "{:?}", p.cut);
        let plain = Html::parse_document(&page);
        assert_eq!(p.html.root_element().html(), plain.root_element().html());
    }

    #[test]
    fn depth_at_the_cap_is_not_cut() {
        let p = document(&nested(400));
        assert!(!p.cut.any());
        assert_eq!(
            p.html.root_element().html(),
            Html::parse_document(&nested(400)).root_element().html()
        );
    }

    #[test]
    fn formatting_elements_reopened_by_the_tree_builder_are_flattened() {
        // Each `</p>` closes the b's; the next text re-opens every one of
        // them: the tree builder nests deeper than the tags say.
        let mut page = String::from("<html><body>");
        for round in 0..6 {
            page.push_str("<p>");
            for i in 0..200 {
                page.push_str(&format!("<b id=r{round}i{i}>"));
            }
            page.push_str("x</p>");
        }
        page.push_str("tail</body></html>");
        let p = document(&page);
        assert!(depth(&p.html) <= MAX_DEPTH + 1, "{}", depth(&p.html));
    }

    #[test]
    fn a_passed_deadline_cuts_the_rest() {
        let page = "<p>x</p>".repeat(10_000);
        let p = document_until(&page, Instant::now());
        assert!(p.cut.deadline);
    }

    #[test]
    fn fragments_are_bounded_too() {
        let f = fragment(&"<span>".repeat(50_000));
        assert!(f.cut.depth);
        assert!(depth(&f.html) <= MAX_DEPTH + 1);
    }
}
