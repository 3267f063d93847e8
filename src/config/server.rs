//! `[server]`: the listener, who may call it, and the bounds that keep one
//! client (or a crowd of silent ones) from starving the others.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::role::Role;

/// `[server]`: where the daemon listens and who may call it.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address of the MCP / control HTTP listener; loopback by default. A
    /// non-loopback address needs a keys file.
    pub listen: SocketAddr,
    /// The API keys file (`idpool keys add|list|revoke`). When it exists, every
    /// HTTP request needs a key; when it does not, only loopback is served and
    /// callers get `anonymous_role`.
    pub keys_file: PathBuf,
    /// Role of unauthenticated loopback callers when there is no keys file.
    pub anonymous_role: Role,
    /// The audit log (one JSON line per call); default `<data_dir>/audit.log`.
    pub audit_log: Option<PathBuf>,
    /// Browser origins allowed to call `/mcp` and `/sse` besides loopback ones
    /// (`http://localhost:*`, `http://127.0.0.1:*`, `http://[::1]:*`), e.g.
    /// `"https://app.example.com:443"`. Other origins get 403.
    pub allowed_origins: Vec<String>,
    /// Host names (with or without port) accepted in the `Host` header besides
    /// loopback ones (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Legacy SSE: a `:` comment ping this often.
    pub sse_ping_secs: u64,
    /// Legacy SSE: a session with no open stream and no traffic this long is dropped.
    pub sse_idle_secs: u64,
    /// On SIGTERM, in-flight calls get this long to finish.
    pub shutdown_grace_secs: u64,
    /// A connection must deliver a request's headers within this many seconds
    /// of opening, and of its previous response (so this is also the
    /// keep-alive idle timeout). Silent and half-sent requests are closed.
    pub header_timeout_secs: u64,
    /// A request's body must arrive whole within this many seconds of its
    /// headers (control API; MCP bodies are bounded by rmcp and `/mcp`).
    /// Checked after the key, so only a keyed caller is waited for at all.
    pub body_timeout_secs: u64,
    /// Open connections at most (further ones wait in the kernel's backlog
    /// until one closes). 0: a quarter of the daemon's file limit, at most
    /// 4096, so the listener can never use up the descriptors that browsers,
    /// jars and the audit log need.
    pub max_connections: usize,
    /// Streamable HTTP plus legacy SSE sessions open at once; past it the least
    /// recently used session is ended (its client gets 404 and initializes
    /// again, as the MCP spec provides).
    pub max_sessions: usize,
    /// The same bound per API key (or per anonymous caller), so one key that
    /// never deletes its sessions cannot crowd out the others.
    pub max_sessions_per_key: usize,
    /// A tool's answer longer than this many characters (of JSON text)
    /// comes in pieces, unless the call sets its own `max_chars`: the
    /// budget agents' context windows need.
    pub max_answer_chars: usize,
}

/// `max_answer_chars` when the config sets none.
pub const DEFAULT_MAX_ANSWER_CHARS: usize = 20_000;
/// The largest budget a config or a call may set.
pub const MAX_ANSWER_CHARS: usize = 2_000_000;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8790)),
            keys_file: PathBuf::from("./keys.toml"),
            anonymous_role: Role::Viewer,
            audit_log: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: 1 << 20,
            sse_ping_secs: 15,
            sse_idle_secs: 90,
            shutdown_grace_secs: 30,
            header_timeout_secs: 10,
            body_timeout_secs: 10,
            max_connections: 0,
            max_sessions: 1024,
            max_sessions_per_key: 256,
            max_answer_chars: DEFAULT_MAX_ANSWER_CHARS,
        }
    }
}

impl ServerConfig {
    /// `max_connections`, or (0) the bound derived from the file limit.
    pub fn connection_cap(&self, file_limit: u64) -> usize {
        if self.max_connections > 0 {
            return self.max_connections;
        }
        usize::try_from(file_limit / 4)
            .unwrap_or(4096)
            .clamp(64, 4096)
    }

    /// The audit log path, defaulting into `data_dir`.
    pub fn audit_path(&self, data_dir: &Path) -> PathBuf {
        self.audit_log
            .clone()
            .unwrap_or_else(|| data_dir.join("audit.log"))
    }
}
