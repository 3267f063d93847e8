//! Firecrawl's argument names, accepted as aliases of ours by `scrape`,
//! `map` and `crawl`, so that an agent prompted with Firecrawl's vocabulary
//! does not trip on every call. The schemas list our names only; a call
//! that gives both forms of one argument is refused, naming both.

use serde_json::{Map, Value};

use super::spec::invalid;
use crate::error::Result;

/// `(Firecrawl's name, ours)` for `scrape`. Firecrawl's `waitFor` is a
/// delay in milliseconds: a number becomes a `wait` action, a string is
/// our `wait_for` (a selector).
pub const SCRAPE: &[(&str, &str)] = &[
    ("formats", "format"),
    ("onlyMainContent", "only_main_content"),
    ("includeTags", "include_tags"),
    ("excludeTags", "exclude_tags"),
    ("waitFor", "wait_for"),
    ("fullPage", "full_page"),
    ("maxChars", "max_chars"),
];

/// `map`.
pub const MAP: &[(&str, &str)] = &[("includeSubdomains", "include_subdomains")];

/// `crawl`; Firecrawl's `scrapeOptions` (`formats`, `onlyMainContent`)
/// are read as ours too.
pub const CRAWL: &[(&str, &str)] = &[
    ("limit", "max_pages"),
    ("maxDepth", "max_depth"),
    ("maxDiscoveryDepth", "max_depth"),
    ("includePaths", "include"),
    ("excludePaths", "exclude"),
    ("formats", "format"),
    ("onlyMainContent", "only_main_content"),
];

/// `args` with `aliases` renamed to our names; refused when one argument
/// is given under both names (or two aliases of one).
pub fn apply(tool: &str, args: Value, aliases: &[(&str, &str)]) -> Result<Value> {
    let Value::Object(mut m) = args else {
        return Ok(args);
    };
    if tool == "crawl"
        && let Some(opts) = m.remove("scrapeOptions")
    {
        lift_scrape_options(&mut m, opts)?;
    }
    for (theirs, ours) in aliases {
        let Some(v) = m.remove(*theirs) else {
            continue;
        };
        if m.contains_key(*ours) {
            return Err(invalid(format!(
                "{tool}: `{theirs}` is Firecrawl's name for `{ours}`; give one of them, not both"
            )));
        }
        let v = match (*theirs, v) {
            // Firecrawl's waitFor: milliseconds to wait before reading.
            ("waitFor", Value::Number(ms)) => {
                let wait = serde_json::json!({"type": "wait", "milliseconds": ms});
                match m.get_mut("actions") {
                    Some(Value::Array(a)) => a.push(wait),
                    _ => {
                        m.insert("actions".into(), Value::Array(vec![wait]));
                    }
                }
                continue;
            }
            // crawl takes one format.
            ("formats", Value::Array(list)) if tool == "crawl" => {
                match <[Value; 1]>::try_from(list) {
                    Ok([one]) => one,
                    Err(list) => {
                        return Err(invalid(format!(
                            "crawl: `formats` names one format per crawl (markdown, html, raw_html, text or links), not {}",
                            list.len()
                        )));
                    }
                }
            }
            (_, v) => v,
        };
        m.insert((*ours).to_string(), v);
    }
    Ok(Value::Object(m))
}

/// Firecrawl's `scrapeOptions` of a crawl: its `formats` and
/// `onlyMainContent` as the crawl's own (which the aliases then read).
fn lift_scrape_options(m: &mut Map<String, Value>, opts: Value) -> Result<()> {
    let Value::Object(opts) = opts else {
        return Err(invalid("crawl: `scrapeOptions` must be an object"));
    };
    for (k, v) in opts {
        if !matches!(k.as_str(), "formats" | "onlyMainContent") {
            return Err(invalid(format!(
                "crawl: `scrapeOptions.{k}` is not taken (only `formats` and `onlyMainContent`)"
            )));
        }
        if m.contains_key(&k) {
            return Err(invalid(format!(
                "crawl: `{k}` is given both at the top and in `scrapeOptions`"
            )));
        }
        m.insert(k, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aliases_become_our_names_and_both_forms_are_refused() {
        let a = apply(
            "scrape",
            json!({"url": "u", "formats": ["markdown", "links"], "onlyMainContent": true, "waitFor": 500}),
            SCRAPE,
        )
        .expect("aliases");
        assert_eq!(
            a,
            json!({"url": "u", "format": ["markdown", "links"], "only_main_content": true,
                   "actions": [{"type": "wait", "milliseconds": 500}]})
        );
        let a = apply("scrape", json!({"waitFor": "#done"}), SCRAPE).expect("selector");
        assert_eq!(a, json!({"wait_for": "#done"}));
        let e = apply(
            "scrape",
            json!({"formats": ["html"], "format": "html"}),
            SCRAPE,
        )
        .expect_err("both");
        assert!(
            e.message()
                .contains("`formats` is Firecrawl's name for `format`"),
            "{e}"
        );
        let a = apply(
            "crawl",
            json!({"url": "u", "limit": 5, "maxDepth": 2, "includePaths": ["/a/*"],
                   "scrapeOptions": {"formats": ["html"], "onlyMainContent": false}}),
            CRAWL,
        )
        .expect("crawl");
        assert_eq!(
            a,
            json!({"url": "u", "max_pages": 5, "max_depth": 2, "include": ["/a/*"],
                   "format": "html", "only_main_content": false})
        );
        let e = apply("crawl", json!({"formats": ["html", "links"]}), CRAWL).expect_err("two");
        assert!(e.message().contains("one format per crawl"), "{e}");
        let e = apply("crawl", json!({"limit": 3, "max_pages": 3}), CRAWL).expect_err("both");
        assert!(e.message().contains("`limit`"), "{e}");
    }
}
