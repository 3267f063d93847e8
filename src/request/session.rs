//! The format of a session file a caller gives or asks for (cookies.txt,
//! Cookie-Editor JSON, Playwright storageState). `crate::identity::session`
//! reads and writes them.

/// A session file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SessionFormat {
    /// Tell by the content: `{` a storageState, `[` a cookie array, else
    /// cookies.txt.
    #[default]
    Auto,
    /// Netscape `cookies.txt`: seven tab-separated fields a line.
    Netscape,
    /// The JSON array of Cookie-Editor / EditThisCookie.
    Json,
    /// Playwright `storageState`: `{cookies, origins}`.
    StorageState,
}

impl SessionFormat {
    /// Parse a name as the CLI and tools spell it.
    pub fn from_name(name: &str) -> Option<SessionFormat> {
        match name {
            "auto" => Some(SessionFormat::Auto),
            "netscape" | "cookies.txt" => Some(SessionFormat::Netscape),
            "json" | "cookie-editor" => Some(SessionFormat::Json),
            "storage-state" | "storage_state" | "storagestate" => Some(SessionFormat::StorageState),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SessionFormat::Auto => "auto",
            SessionFormat::Netscape => "netscape",
            SessionFormat::Json => "json",
            SessionFormat::StorageState => "storage-state",
        }
    }
}
