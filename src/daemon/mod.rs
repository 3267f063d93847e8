//! `idpool serve`: the long-running daemon. `serve.rs` wires the pool, the
//! MCP dispatcher, the HTTP listener and the signals together.

mod admit;
pub mod control;
mod fleet;
pub mod listener;
mod live;
pub mod metrics;
mod recordings;
mod rest;
pub mod serve;
pub mod systemd;

pub use serve::{Daemon, build_core, load_keys};
