//! The daemon as a service: MCP, REST, misbehaving clients, the operator view, load, chaos, doctor.

#[path = "../common/mod.rs"]
mod common;

mod any_shop;
mod bundles;
mod chaos_daemon;
mod daemon;
mod doctor;
mod edges;
mod grants;
mod handoff;
mod load;
mod mcp;
mod operator;
mod recordings;
mod rest;
