//! Answers that fit a context window: every tool's `max_chars`.
//!
//! An answer longer than the caller's budget (`max_chars`, by default
//! `server.max_answer_chars`) comes in pieces: its longest list or text is
//! cut to fit, the piece says so
//! (`truncated`, `piece`), and the dispatcher keeps the whole answer a while
//! so that `cursor` gives the next piece without reaching a site again.
//! Tools that read a page in pieces themselves (`scrape`'s `start_index`,
//! `crawl_status`, the browser's snapshots) take `max_chars` as their own
//! argument and are not cut here ([`Budget::Own`]).

use serde_json::{Map, Value, json};

use crate::error::{Error, ErrorKind, Result};

/// A budget argument is wrong (as `spec::invalid`, which sits above this).
fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message).retryable(false)
}

/// The budget when neither the call nor `server.max_answer_chars` sets one.
pub const DEFAULT_MAX_CHARS: usize = crate::config::DEFAULT_MAX_ANSWER_CHARS;
/// The largest `max_chars` a call may ask for.
pub const MAX_MAX_CHARS: usize = crate::config::MAX_ANSWER_CHARS;
/// What the fields a piece adds (`truncated`, `piece`, `next_cursor`) take.
const PIECE_OVERHEAD: usize = 200;

/// Who keeps a tool's answer within its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The dispatcher: it cuts the answer's longest list or text and
    /// hands out a cursor for the rest.
    Items,
    /// The tool itself: it takes `max_chars` as one of its own arguments
    /// and answers with a continuation of its own (`start_index`).
    Own,
}

/// What a call asked of the budget: `max_chars`, and `cursor` for the next
/// piece of an earlier answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub max_chars: usize,
    pub cursor: Option<String>,
}

/// Take `max_chars` and `cursor` out of a [`Budget::Items`] tool's
/// arguments (the tool itself never sees them); `default` is the server's.
pub fn take(args: &mut Value, default: usize) -> Result<Ask> {
    let Some(o) = args.as_object_mut() else {
        return Ok(Ask {
            max_chars: default,
            cursor: None,
        });
    };
    let max_chars = match o.remove("max_chars") {
        None | Some(Value::Null) => default,
        Some(v) => checked_max(&v)?,
    };
    let cursor = match o.remove("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(invalid(format!(
                "argument `cursor` must be the string a previous answer gave as `next_cursor`, got {other}"
            )));
        }
    };
    Ok(Ask { max_chars, cursor })
}

/// A `max_chars` argument, checked.
pub fn checked_max(v: &Value) -> Result<usize> {
    v.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (1..=MAX_MAX_CHARS).contains(n))
        .ok_or_else(|| {
            invalid(format!(
                "argument `max_chars` must be an integer from 1 to {MAX_MAX_CHARS}, got {v}"
            ))
        })
}

/// Where a piece starts: the field that is cut, and the first item (or
/// character) of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    pub field: String,
    pub start: usize,
}

/// An answer within its budget.
#[derive(Debug)]
pub enum Fit {
    /// It fits as it is; `text` is its JSON, already written (`None` for
    /// an answer with media: its images go out as blocks of their own).
    Whole { body: Value, text: Option<String> },
    /// The first piece, and the whole answer for the pieces after it.
    Cut {
        piece: Value,
        next: Option<At>,
        whole: Value,
    },
}

/// `body` within `max` characters of JSON text.
pub fn fit(body: Value, max: usize) -> Fit {
    if body.get("media").is_some() {
        return Fit::Whole { body, text: None };
    }
    let text = json_text(&body);
    // A byte is at most one character: most answers end the check here.
    if text.len() <= max || text.chars().count() <= max {
        return Fit::Whole {
            body,
            text: Some(text),
        };
    }
    let Some(field) = cut_field(&body) else {
        // Nothing to cut (numbers and small fields only): as it is.
        return Fit::Whole {
            body,
            text: Some(text),
        };
    };
    let at = At { field, start: 0 };
    let (piece, next) = piece(&body, max, &at);
    Fit::Cut {
        piece,
        next,
        whole: body,
    }
}

/// The piece of `whole` that starts at `at`, within `max` characters, and
/// where the next one starts (`None`: this is the last).
pub fn piece(whole: &Value, max: usize, at: &At) -> (Value, Option<At>) {
    let mut out: Map<String, Value> = whole.as_object().cloned().unwrap_or_default();
    let cut = out.remove(&at.field).unwrap_or(Value::Null);
    let base = json_chars(&Value::Object(out.clone())) + at.field.len() + PIECE_OVERHEAD;
    let room = max.saturating_sub(base);
    let (part, end, total) = match &cut {
        Value::Array(items) => {
            let start = at.start.min(items.len());
            let mut used = 0;
            let mut end = start;
            for item in &items[start..] {
                let n = json_chars(item) + 1;
                // At least one item a piece, so that every piece moves on.
                if end > start && used + n > room {
                    break;
                }
                used += n;
                end += 1;
            }
            (Value::Array(items[start..end].to_vec()), end, items.len())
        }
        Value::String(s) => {
            let total = s.chars().count();
            let start = at.start.min(total);
            let mut used = 2;
            let mut taken = String::new();
            let mut end = start;
            for c in s.chars().skip(start) {
                let n = escaped_len(c);
                if end > start && used + n > room {
                    break;
                }
                used += n;
                taken.push(c);
                end += 1;
            }
            (Value::String(taken), end, total)
        }
        other => (other.clone(), 0, 0),
    };
    let next = (end < total).then(|| At {
        field: at.field.clone(),
        start: end,
    });
    out.insert(at.field.clone(), part);
    out.insert("truncated".into(), json!(next.is_some()));
    out.insert(
        "piece".into(),
        json!({"field": at.field, "start": at.start.min(total), "end": end, "total": total}),
    );
    (Value::Object(out), next)
}

/// The field a piece cuts: the longest top-level field that can be cut (a
/// list of two items or more, or a text).
fn cut_field(body: &Value) -> Option<String> {
    let o = body.as_object()?;
    o.iter()
        .filter(|(_, v)| v.is_string() || v.as_array().is_some_and(|a| a.len() > 1))
        .map(|(k, v)| (json_chars(v), k))
        .max()
        .filter(|(n, _)| *n > 2)
        .map(|(_, k)| k.clone())
}

/// The characters `v` takes as JSON text.
pub fn json_chars(v: &Value) -> usize {
    let t = json_text(v);
    if t.is_ascii() {
        t.len()
    } else {
        t.chars().count()
    }
}

/// `v` as JSON text, written into a byte buffer: 1.8× as fast as `Display`
/// (through `fmt::Formatter`) for a 10 KiB answer.
pub fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| v.to_string())
}

/// The characters `c` takes inside a JSON string.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

/// The properties a piece adds to a result (every tool's output schema).
pub fn piece_properties() -> Value {
    json!({
        "truncated": {"type": "boolean", "description": "The answer was longer than `max_chars`: this is one piece of it; `next_cursor` gives the next."},
        "next_cursor": {"type": "string", "description": "Call the same tool with only `cursor` set to this for the next piece (kept 10 minutes)."},
        "piece": {"type": "object", "description": "Which part of the answer this piece holds: the field cut (a list's items, or a text's characters) from `start` to `end` of `total`.", "properties": {
            "field": {"type": "string"}, "start": {"type": "integer"}, "end": {"type": "integer"}, "total": {"type": "integer"}}},
    })
}

/// The arguments the dispatcher takes for a [`Budget::Items`] tool.
pub fn argument_properties(default: usize) -> Value {
    json!({
        "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_CHARS,
            "description": format!("Most characters of answer (JSON text) to return, default {default}; a longer answer comes in pieces (`truncated`, `next_cursor`).")},
        "cursor": {"type": "string", "description": "The `next_cursor` of an earlier answer of this tool: its next piece (other arguments are not needed)."},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reviews(n: usize) -> Value {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"id": format!("R{i}"), "text": "ok \"quoted\" ".repeat(20)}))
            .collect();
        json!({"strategy": "shop", "reviews": items, "slot": 0, "tier": 2})
    }

    #[test]
    fn a_small_answer_is_whole_and_written_once() {
        let body = reviews(2);
        match fit(body.clone(), 20_000) {
            Fit::Whole { body: b, text } => {
                assert_eq!(b, body);
                assert_eq!(text, Some(body.to_string()));
            }
            Fit::Cut { .. } => panic!("cut a small answer"),
        }
    }

    #[test]
    fn pieces_of_a_list_hold_every_item_once_and_keep_to_the_budget() {
        let body = reviews(300);
        let max = 5_000;
        let Fit::Cut {
            piece: first,
            mut next,
            whole,
        } = fit(body, max)
        else {
            panic!("a long answer was not cut");
        };
        let mut seen: Vec<String> = Vec::new();
        let mut take = |p: &Value| {
            assert!(json_chars(p) <= max, "a piece of {} chars", json_chars(p));
            assert_eq!(p["strategy"], "shop");
            assert_eq!(p["piece"]["field"], "reviews");
            for r in p["reviews"].as_array().expect("reviews") {
                seen.push(r["id"].as_str().expect("id").to_string());
            }
        };
        take(&first);
        assert_eq!(first["truncated"], true);
        let mut pieces = 1;
        while let Some(at) = next {
            let (p, n) = piece(&whole, max, &at);
            take(&p);
            assert_eq!(p["truncated"], n.is_some());
            next = n;
            pieces += 1;
        }
        let want: Vec<String> = (0..300).map(|i| format!("R{i}")).collect();
        assert_eq!(seen, want);
        assert!(pieces > 5, "{pieces} pieces");
    }

    #[test]
    fn an_answer_without_a_list_is_cut_in_its_text() {
        let text: String = "line\n".repeat(3_000);
        let body = json!({"id": "x", "data": text});
        let Fit::Cut {
            piece: first,
            mut next,
            whole,
        } = fit(body, 2_000)
        else {
            panic!("not cut");
        };
        let mut joined = first["data"].as_str().expect("data").to_string();
        while let Some(at) = next {
            let (p, n) = piece(&whole, 2_000, &at);
            assert!(json_chars(&p) <= 2_000);
            joined.push_str(p["data"].as_str().expect("data"));
            next = n;
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn an_item_larger_than_the_budget_comes_alone() {
        let big = "x".repeat(3_000);
        let body = json!({"items": [{"t": big}, {"t": "small"}, {"t": "small"}]});
        let Fit::Cut { piece: p, next, .. } = fit(body, 1_000) else {
            panic!("not cut");
        };
        assert_eq!(p["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(next.map(|a| a.start), Some(1));
    }

    #[test]
    fn bad_budget_arguments_are_named() {
        let mut a = json!({"max_chars": 0});
        let e = take(&mut a, 100).expect_err("zero");
        assert!(e.to_string().contains("max_chars"), "{e}");
        let mut a = json!({"cursor": 5});
        assert!(take(&mut a, 100).is_err());
        let mut a = json!({"max_chars": 300, "cursor": "c", "item": "B0"});
        let ask = take(&mut a, 100).expect("ok");
        assert_eq!(ask.max_chars, 300);
        assert_eq!(ask.cursor.as_deref(), Some("c"));
        assert_eq!(a, json!({"item": "B0"}));
    }
}
