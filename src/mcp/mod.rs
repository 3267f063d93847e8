//! The MCP server: one dispatcher (`dispatch.rs`: auth gate, audit, tool runs)
//! behind the rmcp handler (`server.rs`), served on stdio (`stdio.rs`),
//! Streamable HTTP and legacy SSE (`http.rs`, `sse.rs`) behind one gate
//! (`gate.rs`: Host, Origin, API key; `bounds.rs`: how many sessions).
//! `grants.rs` checks the identities a call names against its key's grants;
//! `catalog.rs` describes the tools; `thin.rs` answers a single tool call,
//! tool list or ping over Streamable HTTP without rmcp's session task.

mod bounds;
pub mod catalog;
pub mod client;
mod cursors;
pub mod dispatch;
pub mod end;
pub mod forward;
pub mod gate;
pub mod grants;
pub mod http;
mod reply;
pub mod server;
pub mod sse;
pub mod stdio;
mod thin;

pub use dispatch::{CallContext, Core};
pub use end::{CallEnd, Failure, FleetEnd};
pub use server::McpServer;
