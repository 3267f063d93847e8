//! `file:line: what is wrong` diagnostics for config, profile and strategy files.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// One problem found in one file, pointing at a line when we know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl Diagnostic {
    /// A problem with the file as a whole (missing, unreadable).
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.to_path_buf(),
            line: None,
            message: message.into(),
        }
    }

    /// A problem at byte `span` of `text`.
    pub fn at(
        file: &Path,
        text: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            file: file.to_path_buf(),
            line: span.map(|s| line_of(text, s.start)),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file.display(), line, self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for Diagnostic {}

impl From<Diagnostic> for crate::Error {
    fn from(d: Diagnostic) -> Self {
        crate::Error::config(d.to_string())
    }
}

/// 1-based line number of byte offset `pos`.
pub fn line_of(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()[..pos]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Read `path` and deserialize it as TOML, turning every failure into a diagnostic.
pub fn read_toml<T: DeserializeOwned>(path: &Path) -> Result<(T, String), Diagnostic> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Diagnostic::file(path, "file not found"),
        _ => Diagnostic::file(path, format!("cannot read: {e}")),
    })?;
    let value = parse_toml(path, &text)?;
    Ok((value, text))
}

/// Deserialize `text` (the contents of `path`) as TOML.
pub fn parse_toml<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, Diagnostic> {
    toml::from_str(text).map_err(|e| {
        // toml's message repeats the source excerpt; keep only the first line.
        let message = e
            .message()
            .lines()
            .next()
            .unwrap_or("invalid TOML")
            .trim()
            .to_string();
        Diagnostic::at(path, text, e.span(), message)
    })
}

/// A library's error as clients, audit lines and `last_error` show it: one
/// line (newlines and runs of spaces collapsed), URLs' credentials and
/// secret query values redacted ([`redact_text`]: viewers read
/// `last_error`, operators' URLs may carry passwords), at most `max`
/// characters (a CDP exception's dump can run to kilobytes). Redacted
/// before it is cut, so a cut URL keeps no password either.
pub fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = redact_text(&flat);
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// How long an error message a client, an audit line or `last_error` gets.
pub const ERROR_CHARS: usize = 500;

/// An error as `last_error` keeps it: [`one_line`], [`ERROR_CHARS`] long.
pub fn error_line(e: &dyn fmt::Display) -> String {
    one_line(&e.to_string(), ERROR_CHARS)
}

/// Whether a name (an argument, a query parameter) looks like it carries a
/// secret.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "authorization",
        "proxy",
        "credential",
        "session",
        "passphrase",
        // An identity bundle (encrypted, but a sealed identity all the same).
        "bundle",
    ]
    .iter()
    .any(|s| n.contains(s))
        // What is typed into a page (`browser_type`) may be a password.
        || n == "text"
}

/// Every URL in `text` with its credentials and secret-looking query values
/// replaced (`scheme://[redacted]@host`, `?token=[redacted]`): what audit
/// lines, `last_error`, proxy errors and events show of a URL.
pub fn redact_text(text: &str) -> String {
    static URL: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let Some(re) = URL
        .get_or_init(|| regex::Regex::new(r#"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s`'"<>]+"#).ok())
        .as_ref()
    else {
        return text.to_string();
    };
    re.replace_all(text, |c: &regex::Captures<'_>| redact_url(&c[0]))
        .into_owned()
}

fn redact_url(s: &str) -> String {
    let Ok(mut url) = url::Url::parse(s) else {
        return redact_unparsed_url(s);
    };
    let mut changed = false;
    if !url.username().is_empty() || url.password().is_some() {
        // A URL that carried credentials (a proxy's, a site's) is shown as
        // its scheme, host and port only: whatever follows may be where a
        // template or a confused parser put the password.
        let host = url.host_str().unwrap_or_default();
        return match url.port_or_known_default() {
            Some(port) => format!("{}://[redacted]@{host}:{port}", url.scheme()),
            None => format!("{}://[redacted]@{host}", url.scheme()),
        };
    }
    if url.query_pairs().any(|(k, _)| is_secret_name(&k)) {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_secret_name(&k) {
                    "[redacted]".to_string()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
        changed = true;
    }
    if changed {
        url.to_string().replace("%5Bredacted%5D", "[redacted]")
    } else {
        s.to_string()
    }
}

/// [`redact_url`] for what no URL parser takes (a bad port, a cut URL):
/// the same two rules by hand.
fn redact_unparsed_url(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else {
        return s.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if let Some((_, host)) = authority.rsplit_once('@') {
        return format!("{scheme}://[redacted]@{host}");
    }
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, Some(f)),
                None => (query, None),
            };
            let query = (query.split('&'))
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if is_secret_name(k) => format!("{k}=[redacted]"),
                    _ => pair.to_string(),
                })
                .collect::<Vec<_>>()
                .join("&");
            match fragment {
                Some(f) => format!("{path}?{query}#{f}"),
                None => format!("{path}?{query}"),
            }
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// [`redact_text`] on every string in `v` (an event's detail).
pub fn redact_json(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(redact_text(s)),
        Value::Array(a) => Value::Array(a.iter().map(redact_json).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), redact_json(v))).collect())
        }
        other => other.clone(),
    }
}

/// `selector` as a problem, when it does not parse as CSS.
pub fn css_problem(selector: &str) -> Option<String> {
    crate::dom::selector::parse(selector)
        .err()
        .map(|why| format!("`{}` {why}", crate::dom::selector::shown(selector)))
}

/// Libraries that log what must not reach a log at debug level (rmcp: raw
/// tool arguments; chromiumoxide and the WebSocket stacks: CDP frames with
/// cookie values; cookie_store: every `Set-Cookie` it stores, values
/// included; redis: commands with the fleet's keys; the HTTP stacks:
/// headers; the HTML parsers: every token of a signed-in page, hidden form
/// tokens included), held at these levels whatever `RUST_LOG` says, unless
/// [`UNSAFE_LOG_SECRETS`] is set to `1`.
const PINNED: &[&str] = &[
    "rmcp=info",
    "chromiumoxide=error",
    "cookie_store=info",
    "cookie=info",
    "tungstenite=info",
    "tokio_tungstenite=info",
    "async_tungstenite=info",
    "redis=info",
    "wreq=info",
    "hyper=info",
    "hyper_util=info",
    "h2=info",
    "reqwest=info",
    "tower_http=info",
    "html5ever=info",
    "markup5ever=info",
    "selectors=info",
];

/// The environment variable that lifts [`PINNED`] (`1`: `RUST_LOG` is
/// taken as written, cookie values and keys included; for debugging on a
/// machine whose logs nobody else reads).
pub const UNSAFE_LOG_SECRETS: &str = "IDPOOL_UNSAFE_LOG_SECRETS";

/// `RUST_LOG` (or `info`), with [`PINNED`] on top.
pub fn log_filter(spec: Option<&str>) -> tracing_subscriber::EnvFilter {
    log_filter_with(spec, true).0
}

/// `RUST_LOG` (or `info`), with [`PINNED`] on top when `pin`, and the
/// directives dropped because they would open a pinned library: one naming
/// a pinned crate's module (more specific than the pin, it would win) and
/// any span filter (`[span]=trace` enables every event inside the span,
/// whatever its target).
pub fn log_filter_with(
    spec: Option<&str>,
    pin: bool,
) -> (tracing_subscriber::EnvFilter, Vec<String>) {
    use tracing_subscriber::EnvFilter;
    let mut dropped = Vec::new();
    let spec = spec.map(|s| {
        if !pin {
            return s.to_string();
        }
        s.split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .filter(|d| {
                let target = d.split(['[', '=']).next().unwrap_or("");
                let opens = d.contains('[')
                    || PINNED.iter().any(|p| {
                        let pinned = p.split('=').next().unwrap_or(p);
                        target.starts_with(pinned)
                    });
                if opens {
                    dropped.push(d.to_string());
                }
                !opens
            })
            .collect::<Vec<_>>()
            .join(",")
    });
    let mut filter = spec
        .as_deref()
        .filter(|s| !s.is_empty())
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    if pin {
        for p in PINNED {
            if let Ok(d) = p.parse() {
                filter = filter.add_directive(d);
            }
        }
    }
    (filter, dropped)
}

/// Logs go to stderr (stdout is reserved for MCP in stdio mode); `RUST_LOG`
/// filters, within [`PINNED`].
pub fn init_tracing(json: bool) {
    let unsafe_secrets = std::env::var(UNSAFE_LOG_SECRETS).is_ok_and(|v| v.trim() == "1");
    let (filter, dropped) =
        log_filter_with(std::env::var("RUST_LOG").ok().as_deref(), !unsafe_secrets);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    if unsafe_secrets {
        tracing::warn!(
            "{UNSAFE_LOG_SECRETS}=1: RUST_LOG is not held back, this log may carry cookie values and keys"
        );
    }
    if !dropped.is_empty() {
        tracing::warn!(
            ignored = %dropped.join(","),
            "RUST_LOG directives that would log secrets are ignored (set {UNSAFE_LOG_SECRETS}=1 to keep them)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `f` logs under `filter`, as text.
    fn logged(filter: tracing_subscriber::EnvFilter, f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let writer = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(sub, f);
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn rust_log_cannot_open_the_chatty_libraries() {
        let out = logged(
            log_filter(Some("trace,rmcp=trace,chromiumoxide=trace")),
            || {
                tracing::debug!(target: "rmcp::service", "args token=SECRET1");
                tracing::trace!(target: "chromiumoxide::conn", "cookie SECRET2");
                tracing::debug!(target: "wreq::connect", "cookie SECRET3");
                tracing::info!(target: "rmcp::service", "kept");
                tracing::debug!(target: "idpool::pool", "ours");
            },
        );
        assert!(!out.contains("SECRET"), "{out}");
        assert!(out.contains("kept") && out.contains("ours"), "{out}");
    }

    #[test]
    fn rust_log_cannot_open_the_cookie_and_socket_libraries_by_their_modules_or_spans() {
        let run = |spec: &str, pin: bool| {
            let (filter, dropped) = log_filter_with(Some(spec), pin);
            let out = logged(filter, || {
                let span = tracing::info_span!(target: "idpool::pool", "fetch");
                let _in = span.enter();
                tracing::debug!(target: "cookie_store::cookie_store", "Set-Cookie SECRET1");
                tracing::debug!(target: "async_tungstenite", "frame SECRET2");
                tracing::trace!(target: "redis::cmd", "AUTH SECRET3");
                tracing::debug!(target: "idpool::pool", "ours");
            });
            (out, dropped)
        };
        let spec = "debug,cookie_store::cookie_store=trace,redis=trace,idpool[fetch]=trace";
        let (out, dropped) = run(spec, true);
        assert!(!out.contains("SECRET"), "{out}");
        assert!(out.contains("ours"), "{out}");
        assert_eq!(
            dropped,
            [
                "cookie_store::cookie_store=trace",
                "redis=trace",
                "idpool[fetch]=trace"
            ]
        );
        // The explicit escape hatch takes RUST_LOG as written.
        let (out, dropped) = run(spec, false);
        assert!(out.contains("SECRET1") && out.contains("SECRET3"), "{out}");
        assert!(dropped.is_empty());
    }

    #[test]
    fn library_errors_become_one_capped_line() {
        let dump = format!(
            "Error {{\n    exception: Some(\n        {}\n    )\n}}",
            "x".repeat(3000)
        );
        let line = super::one_line(&dump, super::ERROR_CHARS);
        assert!(!line.contains('\n'));
        assert_eq!(line.chars().count(), super::ERROR_CHARS);
        assert!(line.starts_with("Error { exception: Some( xxx") && line.ends_with('…'));
        assert_eq!(super::one_line("short  and\nsweet", 100), "short and sweet");
    }

    #[test]
    fn urls_in_error_lines_lose_credentials_and_secret_query_values() {
        let e = "http://alice:S3cretPw@127.0.0.1:9/x?api_key=TOPSECRET&q=1: connection refused";
        let line = one_line(e, ERROR_CHARS);
        assert!(
            !line.contains("S3cretPw") && !line.contains("alice"),
            "{line}"
        );
        assert!(!line.contains("TOPSECRET"), "{line}");
        // A URL that carried credentials keeps its scheme, host and port only.
        assert!(
            line.starts_with("http://[redacted]@127.0.0.1:9 connection refused"),
            "{line}"
        );
        // Without credentials, secret query values are redacted in place.
        assert_eq!(
            one_line("http://127.0.0.1:9/x?api_key=TOPSECRET&q=1 failed", 100),
            "http://127.0.0.1:9/x?api_key=[redacted]&q=1 failed"
        );
        // A password hidden past the host (the fragment trick of a pasted
        // proxy session) goes with the rest.
        assert_eq!(
            redact_text("http://***@127.0.0.2:18999/#:PASSWORD@127.0.0.1:18996 down"),
            "http://[redacted]@127.0.0.2:18999 down"
        );
        // Cut after redaction: the password is gone even where the URL is cut.
        let cut = one_line(e, 30);
        assert!(
            !cut.contains("S3cretPw") && !cut.contains("TOPSECRET"),
            "{cut}"
        );
        // What no URL parser takes is redacted by hand.
        let bad = redact_text("proxy http://u:hunter2@h.test:99999/?token=t0k&a=b failed");
        assert_eq!(bad, "proxy http://[redacted]@h.test:99999 failed");
        assert_eq!(
            redact_text("see http://h.test:99999/?token=t0k&a=b"),
            "see http://h.test:99999/?token=[redacted]&a=b"
        );
        assert_eq!(
            one_line("http://h.test/?q=1 ok", 100),
            "http://h.test/?q=1 ok"
        );
        let ev = redact_json(&serde_json::json!({"error": e, "n": 1, "l": ["ws://a:b@h/"]}));
        let ev = ev.to_string();
        assert!(!ev.contains("S3cretPw") && !ev.contains("TOPSECRET") && !ev.contains("a:b@"));
    }

    #[test]
    fn css_errors_are_one_short_line() {
        let p = css_problem("p[[").unwrap();
        assert!(!p.contains('\n') && !p.contains("report this"), "{p}");
        assert!(
            p.starts_with("`p[[` is not a valid CSS selector (") && p.len() < 120,
            "{p}"
        );
        assert!(css_problem("div.a > p").is_none());
    }

    #[test]
    fn lines_are_one_based() {
        let text = "a = 1\nb = 2\nc = 3\n";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 6), 2);
        assert_eq!(line_of(text, 13), 3);
        assert_eq!(line_of(text, 999), 4);
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct T {
        a: u32,
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let d = parse_toml::<T>(Path::new("x.toml"), "a = 1\n\nbogus = 2\n").unwrap_err();
        assert_eq!(d.line, Some(3));
        assert!(
            d.to_string().starts_with("x.toml:3: unknown field `bogus`"),
            "{d}"
        );
    }
}
