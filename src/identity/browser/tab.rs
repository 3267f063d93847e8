//! Tabs of their own in a slot's Chromium, for interactive sessions
//! (`browser_*` tools): opened and closed in a turn, kept through tab
//! recycling, read as an accessibility snapshot whose elements carry refs
//! (`e12`, as playwright-mcp writes them) that clicks, typing and selects
//! aim at. Clicks and keys are real input events.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::accessibility::{AxNode, GetFullAxTreeParams};
use chromiumoxide::cdp::browser_protocol::dom::{
    BackendNodeId, FocusParams, GetContentQuadsParams, ScrollIntoViewIfNeededParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{CallArgument, CallFunctionOnParams};
use chromiumoxide::layout::Point;

use super::page::cdp;
use crate::error::{Error, ErrorKind, Result};
use crate::request::Until;

/// Lines a snapshot holds at most (callers read it in pieces).
pub const MAX_LINES: usize = 50_000;
/// Levels of nesting shown; deeper elements are shown at this depth.
const MAX_DEPTH: usize = 64;
/// Refs a session's book holds before it starts numbering again.
const MAX_REFS: usize = 200_000;

/// One element of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// How deep it sits (its indentation).
    pub depth: usize,
    /// `- role "name" [ref=eN]`, without the indentation.
    pub text: String,
    /// A link, button, field or other control a person can use.
    pub interactive: bool,
}

/// What a snapshot shows.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub url: String,
    pub title: String,
    pub lines: Vec<Line>,
}

impl Snapshot {
    /// The tree as text, one indented line per element.
    pub fn text(&self) -> String {
        indented(&self.lines)
    }
}

/// `lines` as text, each indented by its depth.
pub fn indented(lines: &[Line]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for _ in 0..l.depth {
            out.push_str("  ");
        }
        out.push_str(&l.text);
    }
    out
}

/// The refs of one session's snapshots: an element keeps its ref from one
/// snapshot to the next (so a snapshot of the changes only still points
/// at the elements it does not show). A ref is never given twice: when the
/// book forgets (past [`MAX_REFS`], or on another site), old refs become
/// unknown, never another element's.
#[derive(Debug, Default)]
pub struct RefBook {
    by_node: HashMap<BackendNodeId, String>,
    by_ref: HashMap<String, BackendNodeId>,
    /// Refs given so far (the next is `e{given + 1}`).
    given: u64,
}

impl RefBook {
    /// The element `r` names.
    pub fn get(&self, r: &str) -> Option<BackendNodeId> {
        self.by_ref.get(r).copied()
    }

    /// Forget every element (their refs become unknown; numbering goes on).
    pub fn forget(&mut self) {
        self.by_node.clear();
        self.by_ref.clear();
    }

    fn name(&mut self, node: BackendNodeId) -> String {
        if let Some(r) = self.by_node.get(&node) {
            return r.clone();
        }
        self.given += 1;
        let r = format!("e{}", self.given);
        self.by_node.insert(node, r.clone());
        self.by_ref.insert(r.clone(), node);
        r
    }
}

/// Roles a person acts on: what `interactive_only` keeps.
const INTERACTIVE: &[&str] = &[
    "link",
    "button",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
];

/// Roles that only group: their children are shown in their place.
const GROUPING: &[&str] = &[
    "generic",
    "none",
    "GenericContainer",
    "InlineTextBox",
    "RootWebArea",
    "LineBreak",
];

fn value_str(v: Option<&chromiumoxide::cdp::browser_protocol::accessibility::AxValue>) -> String {
    v.and_then(|v| v.value.as_ref())
        .map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// A tab's accessibility tree as read, before it is shown.
pub struct Tree {
    pub url: String,
    pub title: String,
    nodes: Vec<AxNode>,
    /// Where the snapshot starts (an index into `nodes`).
    root: Option<usize>,
}

/// The tab's accessibility tree; `within`: only the subtree of the first
/// element this CSS selector matches.
pub async fn read_tree(tab: &Page, within: Option<&str>) -> Result<Tree> {
    let root_node = match within {
        None => None,
        Some(sel) => {
            let el = tab.find_element(sel).await.map_err(|_| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("no element matches the selector `{sel}` on this page"),
                )
            })?;
            Some(el.backend_node_id)
        }
    };
    let tree = tab
        .execute(GetFullAxTreeParams::default())
        .await
        .map_err(cdp("read the accessibility tree"))?;
    let nodes = tree.result.nodes.clone();
    let root = match root_node {
        None => (!nodes.is_empty()).then_some(0),
        Some(id) => Some(
            nodes
                .iter()
                .position(|n| n.backend_dom_node_id == Some(id))
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "the element `{}` matches is not in the accessibility tree (hidden?)",
                            within.unwrap_or_default()
                        ),
                    )
                })?,
        ),
    };
    Ok(Tree {
        url: tab.url().await.ok().flatten().unwrap_or_default(),
        title: tab.get_title().await.ok().flatten().unwrap_or_default(),
        nodes,
        root,
    })
}

/// `tree` as lines, each element named in `book` (no waiting: the caller
/// may hold the session's lock).
pub fn render_tree(tree: &Tree, book: &mut RefBook) -> Snapshot {
    if book.by_ref.len() >= MAX_REFS {
        book.forget();
    }
    let nodes: HashMap<&str, &AxNode> = (tree.nodes.iter())
        .map(|n| (n.node_id.inner().as_str(), n))
        .collect();
    let mut out = Snapshot {
        url: tree.url.clone(),
        title: tree.title.clone(),
        ..Snapshot::default()
    };
    if let Some(root) = tree.root.and_then(|i| tree.nodes.get(i)) {
        render(root, &nodes, &mut out.lines, book);
    }
    if out.lines.len() > MAX_LINES {
        out.lines.truncate(MAX_LINES);
        out.lines.push(Line {
            depth: 0,
            text: format!("- … (cut at {MAX_LINES} lines)"),
            interactive: false,
        });
    }
    out
}

/// A name or value shown at most this long (a page may label an element
/// with a whole book).
const MAX_NAME_CHARS: usize = 500;

fn shortened(s: String) -> String {
    if s.chars().count() <= MAX_NAME_CHARS {
        return s;
    }
    let mut t: String = s.chars().take(MAX_NAME_CHARS).collect();
    t.push('…');
    t
}

/// The tree under `root` as lines, depth first, without recursion (a
/// hostile page may nest as deep as it likes).
fn render<'a>(
    root: &'a AxNode,
    nodes: &HashMap<&str, &'a AxNode>,
    lines: &mut Vec<Line>,
    book: &mut RefBook,
) {
    let mut stack: Vec<(&'a AxNode, usize)> = vec![(root, 0)];
    while let Some((node, depth)) = stack.pop() {
        if lines.len() > MAX_LINES {
            return;
        }
        let children: Vec<&'a AxNode> = (node.child_ids.iter().flatten())
            .filter_map(|id| nodes.get(id.inner().as_str()).copied())
            .collect();
        // Children go on the stack last first, so they come out in order.
        let mut push = |children: &[&'a AxNode], depth: usize| {
            for c in children.iter().rev() {
                stack.push((c, depth.min(MAX_DEPTH)));
            }
        };
        let role = value_str(node.role.as_ref());
        let name = shortened(
            value_str(node.name.as_ref())
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        );
        if node.ignored
            || (GROUPING.contains(&role.as_str()) && (name.is_empty() || role == "RootWebArea"))
        {
            push(&children, depth);
            continue;
        }
        if role == "StaticText" {
            if !name.is_empty() {
                lines.push(Line {
                    depth,
                    text: format!("- text: {name}"),
                    interactive: false,
                });
            }
            continue;
        }
        let mut line = format!("- {role}");
        if !name.is_empty() {
            line.push_str(&format!(" {}", serde_json::Value::String(name.clone())));
        }
        for p in node.properties.iter().flatten() {
            let key = format!("{:?}", p.name).to_lowercase();
            let v = value_str(Some(&p.value));
            match key.as_str() {
                "level" => line.push_str(&format!(" [level={v}]")),
                "checked" | "pressed" | "expanded" | "selected" if v == "true" => {
                    line.push_str(&format!(" [{key}]"));
                }
                "disabled" if v == "true" => line.push_str(" [disabled]"),
                _ => {}
            }
        }
        let value = shortened(value_str(node.value.as_ref()));
        if !value.is_empty() {
            line.push_str(&format!(": {}", serde_json::Value::String(value)));
        }
        if let Some(id) = node.backend_dom_node_id {
            line.push_str(&format!(" [ref={}]", book.name(id)));
        }
        let interactive = INTERACTIVE.contains(&role.as_str());
        // Children that only repeat the name (a link's or button's text) are not shown.
        let text: String = (children.iter())
            .filter(|c| value_str(c.role.as_ref()) == "StaticText")
            .map(|c| value_str(c.name.as_ref()))
            .collect::<Vec<_>>()
            .join(" ");
        let only_text = children
            .iter()
            .all(|c| value_str(c.role.as_ref()) == "StaticText");
        if children.is_empty()
            || (only_text && text.split_whitespace().collect::<Vec<_>>().join(" ") == name)
        {
            lines.push(Line {
                depth,
                text: line,
                interactive,
            });
            continue;
        }
        line.push(':');
        lines.push(Line {
            depth,
            text: line,
            interactive,
        });
        push(&children, depth + 1);
    }
}

/// Click the element at its centre, scrolled into view first.
pub async fn click(tab: &Page, node: BackendNodeId) -> Result<()> {
    let _ = tab
        .execute(
            ScrollIntoViewIfNeededParams::builder()
                .backend_node_id(node)
                .build(),
        )
        .await;
    let quads = tab
        .execute(
            GetContentQuadsParams::builder()
                .backend_node_id(node)
                .build(),
        )
        .await
        .map_err(|_| gone("is not on the page any more"))?;
    let q = (quads.result.quads.first())
        .map(|q| q.inner().clone())
        .filter(|q| q.len() == 8)
        .ok_or_else(|| gone("has no box to click (hidden?)"))?;
    let x = (q[0] + q[2] + q[4] + q[6]) / 4.0;
    let y = (q[1] + q[3] + q[5] + q[7]) / 4.0;
    tab.click(Point { x, y }).await.map_err(cdp("click"))?;
    Ok(())
}

fn gone(what: &str) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("the element {what}; take a new snapshot"),
    )
}

/// Focus the element, type `text`, and press Enter when `submit`.
pub async fn type_into(tab: &Page, node: BackendNodeId, text: &str, submit: bool) -> Result<()> {
    tab.execute(FocusParams::builder().backend_node_id(node).build())
        .await
        .map_err(|_| gone("cannot take the focus"))?;
    let focused = tab
        .find_element(":focus")
        .await
        .map_err(|_| gone("lost the focus"))?;
    focused.type_str(text).await.map_err(cdp("type"))?;
    if submit {
        focused
            .press_key("Enter")
            .await
            .map_err(cdp("press Enter"))?;
    }
    Ok(())
}

/// Press `key` on the focused element (or the body).
pub async fn press(tab: &Page, key: &str) -> Result<()> {
    let e = match tab.find_element(":focus").await {
        Ok(e) => e,
        Err(_) => tab
            .find_element("body")
            .await
            .map_err(cdp("find the page's body"))?,
    };
    e.press_key(key).await.map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("cannot press key `{key}` (a key name such as Enter, Tab, ArrowDown, a)"),
        )
    })?;
    Ok(())
}

/// Select `values` (by value or label) in a `<select>`; the page gets its
/// `input` and `change` events.
pub async fn select(tab: &Page, node: BackendNodeId, values: &[String]) -> Result<Vec<String>> {
    let object = super::world::resolve(tab, node)
        .await
        .map_err(|_| gone("is not on the page any more"))?
        .ok_or_else(|| gone("cannot be reached"))?;
    let js = "function(values) { if (this.tagName !== 'SELECT') throw new Error('not a <select>'); \
              const wanted = o => values.includes(o.value) || values.includes(o.label); \
              if (this.multiple) { for (const o of this.options) o.selected = wanted(o); } \
              else { const i = Array.from(this.options).findIndex(wanted); if (i < 0) throw new Error('no option ' + JSON.stringify(values)); this.selectedIndex = i; } \
              this.dispatchEvent(new Event('input', {bubbles: true})); this.dispatchEvent(new Event('change', {bubbles: true})); \
              return Array.from(this.selectedOptions).map(o => o.value); }";
    let call = CallFunctionOnParams::builder()
        .function_declaration(js)
        .object_id(object)
        .argument(
            CallArgument::builder()
                .value(serde_json::json!(values))
                .build(),
        )
        .return_by_value(true)
        .build()
        .map_err(|e| Error::new(ErrorKind::Internal, format!("select: {e}")))?;
    let r = tab.execute(call).await.map_err(cdp("select"))?;
    if let Some(ex) = &r.result.exception_details {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "cannot select: {}",
                ex.exception
                    .as_ref()
                    .and_then(|e| e.description.clone())
                    .unwrap_or_else(|| ex.text.clone())
            ),
        ));
    }
    Ok((r.result.result.value.as_ref())
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default())
}

/// Wait until the page shows `until`, or fail at `deadline`.
pub async fn wait_for(tab: &Page, until: &Until, deadline: Instant) -> Result<()> {
    let js = match until {
        Until::Time(d) => {
            tokio::time::sleep(*d).await;
            return Ok(());
        }
        Until::Text(t) => format!(
            "(document.body && document.body.innerText.includes({}))",
            serde_json::Value::String(t.clone())
        ),
        Until::Selector(s) => format!(
            "document.querySelector({}) !== null",
            serde_json::Value::String(s.clone())
        ),
    };
    loop {
        let found = (super::world::eval(tab, js.as_str()).await.ok())
            .and_then(|r| r.into_value::<bool>().ok())
            .unwrap_or(false);
        if found {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let what = match until {
                Until::Text(t) => format!("the text `{t}`"),
                Until::Selector(s) => format!("`{s}`"),
                Until::Time(_) => "the time".into(),
            };
            return Err(Error::new(
                ErrorKind::Timeout,
                format!("{what} did not appear in time"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Take `tab` off the page it shows (to `about:blank`): a page it may not
/// stay on. Bounded; a tab that does not answer is left to its session.
pub async fn blank(tab: &Page) {
    use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
    let blank = tab.execute(NavigateParams::new("about:blank"));
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), blank).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_is_never_given_twice() {
        let mut book = RefBook::default();
        let a = book.name(BackendNodeId::new(7));
        assert_eq!(a, "e1");
        assert_eq!(
            book.name(BackendNodeId::new(7)),
            "e1",
            "the same element keeps it"
        );
        assert_eq!(book.name(BackendNodeId::new(8)), "e2");
        book.forget();
        assert_eq!(book.get("e1"), None, "a forgotten ref is unknown");
        // The same node, or another, after forgetting: a new number.
        assert_eq!(book.name(BackendNodeId::new(8)), "e3");
        assert_eq!(book.get("e3"), Some(BackendNodeId::new(8)));
    }
}
