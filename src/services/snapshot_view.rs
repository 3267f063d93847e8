//! What a `browser_*` answer shows of a page's snapshot: all of it, only
//! what a person acts on (`interactive_only`), or only what changed since
//! the session's last snapshot (`changes_only`), and in pieces that keep
//! to the caller's budget (`max_chars`, `start_index`).

use std::collections::HashMap;

use crate::identity::browser::tab::{Line, indented};

/// How a step's snapshot is shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Only links, buttons, fields and other controls, with their labels,
    /// one flat line each.
    pub interactive_only: bool,
    /// Only the subtree of the first element this CSS selector matches.
    pub selector: Option<String>,
    /// Only the lines added (`+`) and removed (`-`) since the session's
    /// last snapshot.
    pub changes_only: bool,
}

/// The lines `view` shows of `now`, given the session's last snapshot
/// (`before`; `None`: this is its first).
pub fn show(view: &View, before: Option<&[Line]>, now: &[Line]) -> String {
    let keep = |l: &Line| !view.interactive_only || l.interactive;
    let flat = |l: &Line, mark: &str| Line {
        depth: 0,
        text: format!("{mark}{}", l.text),
        interactive: l.interactive,
    };
    match (view.changes_only, before) {
        (true, Some(before)) => {
            let (added, removed) = changes(before, now);
            let added: Vec<&Line> = added.into_iter().filter(|l| keep(l)).collect();
            let removed: Vec<&Line> = removed.into_iter().filter(|l| keep(l)).collect();
            let mut lines = vec![Line {
                depth: 0,
                text: format!(
                    "# changes since the last snapshot: {} added, {} removed",
                    added.len(),
                    removed.len()
                ),
                interactive: false,
            }];
            lines.extend(added.into_iter().map(|l| flat(l, "+ ")));
            lines.extend(removed.into_iter().map(|l| flat(l, "- ")));
            indented(&lines)
        }
        _ if view.interactive_only => {
            let lines: Vec<Line> = now
                .iter()
                .filter(|l| keep(l))
                .map(|l| flat(l, ""))
                .collect();
            indented(&lines)
        }
        _ => indented(now),
    }
}

/// The lines of `now` that `before` did not have, and those of `before`
/// that `now` lacks, each in its own order (a line is its text: an element
/// keeps its ref, so a moved or renamed element shows as removed and added).
fn changes<'a>(before: &'a [Line], now: &'a [Line]) -> (Vec<&'a Line>, Vec<&'a Line>) {
    let count = |lines: &'a [Line]| {
        let mut m: HashMap<&'a str, usize> = HashMap::new();
        for l in lines {
            *m.entry(l.text.as_str()).or_default() += 1;
        }
        m
    };
    let mut had = count(before);
    let mut has = count(now);
    let mut added = Vec::new();
    for l in now {
        match had.get_mut(l.text.as_str()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => added.push(l),
        }
    }
    let mut removed = Vec::new();
    for l in before {
        match has.get_mut(l.text.as_str()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => removed.push(l),
        }
    }
    (added, removed)
}

/// A piece of a snapshot's text: whole lines from `start` (a character
/// offset at a line's start) within `max` characters (at least one line).
/// Returns the piece and where the next starts (`None`: the last).
pub fn piece(text: &str, start: usize, max: usize) -> (String, Option<usize>) {
    let total = text.chars().count();
    let start = start.min(total);
    let from = text
        .char_indices()
        .nth(start)
        .map_or(text.len(), |(i, _)| i);
    let mut out = String::new();
    let mut used = 0;
    let mut at = start;
    for line in text[from..].split_inclusive('\n') {
        let n = line.chars().count();
        if used > 0 && used + n > max {
            return (out.trim_end_matches('\n').to_string(), Some(at));
        }
        out.push_str(line);
        used += n;
        at += n;
    }
    (out.trim_end_matches('\n').to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(depth: usize, text: &str, interactive: bool) -> Line {
        Line {
            depth,
            text: text.into(),
            interactive,
        }
    }

    #[test]
    fn interactive_only_keeps_controls_with_their_labels() {
        let now = [
            line(0, "- heading \"Cart\" [level=1] [ref=e1]", false),
            line(1, "- text: two items", false),
            line(1, "- button \"Check out\" [ref=e2]", true),
            line(2, "- textbox \"Coupon\" [ref=e3]", true),
        ];
        let v = View {
            interactive_only: true,
            ..View::default()
        };
        assert_eq!(
            show(&v, None, &now),
            "- button \"Check out\" [ref=e2]\n- textbox \"Coupon\" [ref=e3]"
        );
    }

    #[test]
    fn changes_only_names_what_came_and_went() {
        let before = [
            line(0, "- button \"Add\" [ref=e1]", true),
            line(0, "- text: 0 items", false),
        ];
        let now = [
            line(0, "- button \"Add\" [ref=e1]", true),
            line(0, "- text: 1 item", false),
            line(0, "- button \"Remove\" [ref=e4]", true),
        ];
        let v = View {
            changes_only: true,
            ..View::default()
        };
        assert_eq!(
            show(&v, Some(&before), &now),
            "# changes since the last snapshot: 2 added, 1 removed\n+ - text: 1 item\n+ - button \"Remove\" [ref=e4]\n- - text: 0 items"
        );
        // The first snapshot of a session shows the page.
        assert!(show(&v, None, &now).contains("- text: 1 item"));
        // With interactive_only, the count is of what is shown.
        let both = View {
            changes_only: true,
            interactive_only: true,
            ..View::default()
        };
        assert_eq!(
            show(&both, Some(&before), &now),
            "# changes since the last snapshot: 1 added, 0 removed\n+ - button \"Remove\" [ref=e4]"
        );
    }

    #[test]
    fn pieces_hold_every_line_once() {
        let text: String = (0..500)
            .map(|i| format!("- link \"item {i}\" [ref=e{i}]"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut got = Vec::new();
        let mut start = Some(0);
        while let Some(s) = start {
            let (p, next) = piece(&text, s, 1_000);
            assert!(p.chars().count() <= 1_000);
            got.extend(p.lines().map(str::to_string));
            start = next;
        }
        let want: Vec<String> = text.lines().map(str::to_string).collect();
        assert_eq!(got, want);
    }
}
