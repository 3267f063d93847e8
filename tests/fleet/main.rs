//! A fleet on a real redis-server.

#[path = "../common/mod.rs"]
mod common;

mod beats;
mod budget;
mod fleet;
mod orphans;
mod scale;
mod unhosted;
