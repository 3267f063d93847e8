//! The testbed itself.

#[path = "../common/mod.rs"]
mod common;

mod testbed;
