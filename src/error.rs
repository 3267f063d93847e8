//! The library's error type: what went wrong, whether retrying elsewhere can help,
//! and the source kept for logs.

use std::fmt;

/// What kind of failure this is; callers branch on this, never on message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A config, profile or strategy file is wrong.
    Config,
    /// A caller's argument is missing, of the wrong type or out of range.
    InvalidArgument,
    /// The URL or host is not allowed (SSRF guard, unknown strategy host).
    Refused,
    /// Connection, TLS, protocol or body error talking to a site.
    Network,
    /// A network wait passed its deadline.
    Timeout,
    /// Every identity that may serve the call stayed busy (politeness
    /// limits, in-flight bounds) past the queue limit: try again later, or
    /// (in a fleet) on another daemon.
    Busy,
    /// Local I/O (data dir, jar files).
    Io,
    /// A caller asked for something that does not exist (slot, strategy).
    NotFound,
    /// The site pushed back and every identity for it is resting: try again
    /// after [`Error::retry_after`].
    Unavailable,
    /// The caller's key has no grant for any identity that could serve the
    /// call (`not_granted`): it is not moved to one it may not use.
    NotGranted,
    /// The site wants a person (a captcha, a sign-in wall) on a strategy
    /// with `[handoff]`, and none cleared it in time (`needs_person`): try
    /// again after [`Error::retry_after`], or have a person sign in.
    NeedsPerson,
    /// Anything else that is our bug rather than the input's fault.
    Internal,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::Config,
        ErrorKind::InvalidArgument,
        ErrorKind::Refused,
        ErrorKind::Network,
        ErrorKind::Timeout,
        ErrorKind::Busy,
        ErrorKind::Io,
        ErrorKind::NotFound,
        ErrorKind::Unavailable,
        ErrorKind::NotGranted,
        ErrorKind::NeedsPerson,
        ErrorKind::Internal,
    ];

    /// Stable lower-case name used in JSON and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Config => "config",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Refused => "refused",
            ErrorKind::Network => "network",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Busy => "busy",
            ErrorKind::Io => "io",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::NotGranted => "not_granted",
            ErrorKind::NeedsPerson => "needs_person",
            ErrorKind::Internal => "internal",
        }
    }

    /// The kind named `name`; an unknown name (a newer peer's) is
    /// `unavailable`, the kind a caller treats as "try again later".
    pub fn named(name: &str) -> ErrorKind {
        ErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or(ErrorKind::Unavailable)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(ErrorKind::named(&name))
    }
}

/// What a browser's network stack said failed: Chromium's `net::ERR_*`
/// code, which CDP's `Page.navigate` answers as its `errorText`, read once
/// where the browser reports it so that callers branch on this, never on
/// the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetError {
    /// `ERR_TUNNEL_CONNECTION_FAILED`: the proxy would not open the tunnel
    /// (the slot's egress refused the address, or its upstream failed).
    TunnelFailed,
    /// `ERR_NAME_NOT_RESOLVED`, `ERR_NAME_RESOLUTION_FAILED`.
    NameNotResolved,
    /// `ERR_CONNECTION_*` (refused, reset, closed, failed), `ERR_EMPTY_RESPONSE`.
    Connection,
    /// `ERR_TIMED_OUT`, `ERR_CONNECTION_TIMED_OUT`.
    TimedOut,
    /// `ERR_CERT_*`, `ERR_SSL_*`: the site's TLS was refused.
    Tls,
    /// `ERR_ABORTED`: the navigation was replaced or stopped.
    Aborted,
    /// Any other code.
    Other,
}

impl NetError {
    /// The error Chromium names `code` (`net::ERR_TUNNEL_CONNECTION_FAILED`,
    /// with or without the `net::` prefix).
    pub fn from_code(code: &str) -> NetError {
        let code = code.trim();
        let code = code.strip_prefix("net::").unwrap_or(code);
        match code {
            "ERR_TUNNEL_CONNECTION_FAILED" => NetError::TunnelFailed,
            "ERR_NAME_NOT_RESOLVED" | "ERR_NAME_RESOLUTION_FAILED" => NetError::NameNotResolved,
            "ERR_TIMED_OUT" | "ERR_CONNECTION_TIMED_OUT" => NetError::TimedOut,
            "ERR_ABORTED" => NetError::Aborted,
            "ERR_EMPTY_RESPONSE" => NetError::Connection,
            c if c.starts_with("ERR_CONNECTION_") => NetError::Connection,
            c if c.starts_with("ERR_CERT_") || c.starts_with("ERR_SSL_") => NetError::Tls,
            _ => NetError::Other,
        }
    }
}

/// A library error: a short message safe to show to a client, the kind, whether a
/// retry on another identity makes sense, and the underlying cause for logs.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    retryable: bool,
    message: String,
    /// When trying again can help (all identities resting).
    retry_after: Option<std::time::Duration>,
    /// What the browser's network stack named, for a browser's failure.
    net: Option<NetError>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Result alias for the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind`; network and timeout errors are retryable by default.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            retryable: matches!(
                kind,
                ErrorKind::Network | ErrorKind::Timeout | ErrorKind::Busy
            ),
            message: message.into(),
            retry_after: None,
            net: None,
            source: None,
        }
    }

    /// Attach the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Prefix the message with what was being done.
    pub fn context(mut self, what: impl std::fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// Override whether a retry elsewhere can help.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Say what the browser's network stack named (a network error of a
    /// browser's navigation).
    pub fn with_net(mut self, net: NetError) -> Self {
        self.net = Some(net);
        self
    }

    /// What the browser's network stack named, when this is a browser's
    /// network failure.
    pub fn net(&self) -> Option<NetError> {
        self.net
    }

    /// Say when trying again can help.
    pub fn with_retry_after(mut self, after: std::time::Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn io(message: impl Into<String>, source: std::io::Error) -> Self {
        Self::new(ErrorKind::Io, message).with_source(source)
    }

    /// The message and its cause, for operators (logs, `pool_status`):
    /// "cannot write …: No space left on device (os error 28)".
    pub fn with_cause(&self) -> String {
        match &self.source {
            Some(s) => format!("{}: {s}", self.message),
            None => self.message.clone(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
    /// How long until trying again can help, when the error knows.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.retry_after
    }
    /// The short message, without the source chain.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The message alone: what a client may see. The cause is reached through
/// [`std::error::Error::source`] (anyhow's `{:#}` prints it once, at the CLI).
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::NetError;

    #[test]
    fn chromium_net_codes_are_read_once_into_kinds() {
        let cases = [
            ("net::ERR_TUNNEL_CONNECTION_FAILED", NetError::TunnelFailed),
            ("ERR_TUNNEL_CONNECTION_FAILED", NetError::TunnelFailed),
            ("net::ERR_NAME_NOT_RESOLVED", NetError::NameNotResolved),
            ("net::ERR_CONNECTION_REFUSED", NetError::Connection),
            ("net::ERR_CONNECTION_TIMED_OUT", NetError::TimedOut),
            ("net::ERR_CERT_AUTHORITY_INVALID", NetError::Tls),
            ("net::ERR_ABORTED", NetError::Aborted),
            ("net::ERR_BLOCKED_BY_CLIENT", NetError::Other),
            ("tunnel failed", NetError::Other),
        ];
        for (code, kind) in cases {
            assert_eq!(NetError::from_code(code), kind, "{code}");
        }
    }
}
