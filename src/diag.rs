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

/// Logs go to stderr (stdout is reserved for MCP in stdio mode); `RUST_LOG` filters.
pub fn init_tracing(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,chromiumoxide=error"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

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
