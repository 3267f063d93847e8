//! The daemon as a service: MCP, REST, misbehaving clients, the operator view, load, chaos, doctor.

#[path = "../common/mod.rs"]
mod common;

mod chaos_daemon;
mod daemon;
mod doctor;
mod edges;
mod load;
mod mcp;
mod operator;
mod rest;
