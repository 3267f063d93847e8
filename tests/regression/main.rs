//! One regression test per finding of issue 32 (hostile pages and hostile
//! callers), each named after what was found. Every test here failed on
//! 973ef88 and passes now.

#[path = "../common/mod.rs"]
mod common;

mod closed_under_calibration;
mod cluster_key;
mod content_first;
mod crawl_owner;
mod egress_open_proxy;
mod every_hop;
mod grants_cover;
mod hostile_pages;
mod jar_public_suffix;
mod live_view_revoked;
mod private_addresses;
mod redaction;
mod shutdown_calibrating;
mod slow_bodies;
