//! A response body as a strategy reads it: the text, and its HTML document,
//! parsed at most once and only when something asks for it (JSON is read
//! where the pointers lead: `lazy_json`).
//! Classification (markers) and extraction share one `Body`, so a page is
//! parsed once per response, not once per question asked of it.

use std::cell::OnceCell;

use scraper::Html;

/// What a response is, from its first character and its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Html,
    Json,
    /// Plain text, an image, nothing: no selector applies.
    Other,
}

impl BodyKind {
    /// JSON cannot start with `<` and markup cannot start with `{` or `[`, so
    /// the first character decides; the content type only where it cannot
    /// (a server that labels its JSON `text/html` is common, the reverse rare).
    pub fn sniff(text: &str, content_type: Option<&str>) -> BodyKind {
        match text.trim_start().as_bytes().first() {
            Some(b'<') => BodyKind::Html,
            Some(b'{' | b'[') => BodyKind::Json,
            _ => match content_type.map(str::to_ascii_lowercase) {
                Some(ct) if ct.contains("json") => BodyKind::Json,
                Some(ct) if ct.contains("html") || ct.contains("xml") => BodyKind::Html,
                _ => BodyKind::Other,
            },
        }
    }
}

/// One response body, parsed lazily and at most once per form.
pub struct Body<'a> {
    text: &'a str,
    kind: BodyKind,
    html: OnceCell<crate::dom::Parsed>,
}

impl<'a> Body<'a> {
    /// `content_type`: the response's header, when it has one.
    pub fn new(text: &'a str, content_type: Option<&str>) -> Self {
        Body {
            text,
            kind: BodyKind::sniff(text, content_type),
            html: OnceCell::new(),
        }
    }

    /// A page the browser rendered.
    pub fn html_page(text: &'a str) -> Self {
        Body {
            text,
            kind: BodyKind::Html,
            html: OnceCell::new(),
        }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    pub fn kind(&self) -> BodyKind {
        self.kind
    }

    /// Whether HTML selectors apply to this response (markers): only to markup.
    pub fn is_html(&self) -> bool {
        self.kind == BodyKind::Html
    }

    /// The body parsed as an HTML document (whatever it is: an `html` tier
    /// reads it as HTML).
    pub fn html(&self) -> &Html {
        &self.parsed().html
    }

    fn parsed(&self) -> &crate::dom::Parsed {
        self.html.get_or_init(|| crate::dom::document(self.text))
    }

    /// What the bounded parse cut of the page (nothing when it was never
    /// parsed as HTML).
    pub fn cut(&self) -> crate::dom::Cut {
        self.html.get().map(|p| p.cut).unwrap_or_default()
    }

    /// The body parsed as a whole JSON value, `Err` naming why it is not
    /// (for compiled strategies; TOML extraction reads only what its
    /// pointers lead to).
    pub fn take_json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_str(self.text).map_err(|e| format!("response is not JSON ({e})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(BodyKind::sniff("  <!doctype html>", None), BodyKind::Html);
        assert_eq!(
            BodyKind::sniff("{\"a\":1}", Some("text/html")),
            BodyKind::Json
        );
        assert_eq!(BodyKind::sniff("[1]", None), BodyKind::Json);
        assert_eq!(
            BodyKind::sniff("<p>x", Some("application/json")),
            BodyKind::Html
        );
        assert_eq!(
            BodyKind::sniff("hello", Some("text/plain")),
            BodyKind::Other
        );
        assert_eq!(BodyKind::sniff("hello", Some("Text/HTML")), BodyKind::Html);
        assert_eq!(BodyKind::sniff("", None), BodyKind::Other);
    }

    #[test]
    fn html_is_parsed_once() {
        let b = Body::new("<p class=x>hi</p>", None);
        let first: *const Html = b.html();
        let second: *const Html = b.html();
        assert_eq!(first, second);
        let bad = Body::new("{\"x\": ", None);
        assert!(bad.take_json().unwrap_err().contains("not JSON"));
    }
}
