//! CSS selectors from callers and strategy files, checked before they are
//! parsed: the selectors crate parses `:not(`, `:is(`, `:has(` and friends
//! recursively, so a selector nested a thousand levels deep would exhaust
//! the stack of whatever thread parses it.

use scraper::Selector;

/// The longest selector accepted, in bytes.
pub const MAX_BYTES: usize = 4096;

/// The deepest nesting of `(`, `[` accepted.
pub const MAX_NESTING: usize = 32;

/// Why `css` is refused before parsing, if it is.
pub fn check(css: &str) -> Result<(), String> {
    if css.len() > MAX_BYTES {
        return Err(format!(
            "is {} bytes long; a selector may have at most {MAX_BYTES}",
            css.len()
        ));
    }
    let nesting = nesting(css);
    if nesting > MAX_NESTING {
        return Err(format!(
            "nests {nesting} levels of brackets; a selector may nest at most {MAX_NESTING}"
        ));
    }
    Ok(())
}

/// The deepest bracket nesting outside quoted strings.
fn nesting(css: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut chars = css.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => {
                depth += 1;
                max = max.max(depth);
            }
            (None, ')' | ']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Check, then parse; the error says what is wrong with `css` (without
/// naming the argument: the caller knows it).
pub fn parse(css: &str) -> Result<Selector, String> {
    check(css)?;
    Selector::parse(css).map_err(|e| format!("is not a valid CSS selector ({})", css_error(&e)))
}

/// A selector error in one line (the selectors crate's text for some errors
/// is a multi-line `Debug` dump "to report to the developer").
pub fn css_error(e: &scraper::error::SelectorErrorKind<'_>) -> String {
    let text = e.to_string();
    let text = text
        .strip_prefix("Unexpected error occurred. Please report this to the developer")
        .unwrap_or(&text);
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one.replace("( ", "(")
        .replace(", )", ")")
        .replace(" )", ")")
}

/// `css` shortened for an error message (a refused selector may be huge).
pub fn shown(css: &str) -> String {
    const SHOWN: usize = 80;
    if css.len() <= SHOWN {
        return css.to_string();
    }
    let end = super::floor_char(css, SHOWN);
    format!("{}… ({} bytes)", &css[..end], css.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_and_long_selectors_are_refused_before_parsing() {
        let deep = format!("{}a{}", ":not(".repeat(1000), ")".repeat(1000));
        let e = parse(&deep).unwrap_err();
        assert!(e.contains("bytes long"), "{e}");
        let deep = format!("{}a{}", ":is(".repeat(100), ")".repeat(100));
        assert!(parse(&deep).unwrap_err().contains("nests 100 levels"));
        let ok = format!("{}a{}", ":not(".repeat(8), ")".repeat(8));
        assert!(parse(&ok).is_ok());
        assert!(parse("div[title=\"((((((((((((((((((((((((((((((((((((\"]").is_ok());
        assert!(
            parse("div >")
                .unwrap_err()
                .contains("not a valid CSS selector")
        );
    }

    #[test]
    fn shown_is_short() {
        let s = shown(&"é".repeat(5000));
        assert!(s.len() < 120 && s.ends_with("(10000 bytes)"), "{s}");
    }
}
