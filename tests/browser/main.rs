//! The browser tier: real Chromium, interactive sessions, chaos, the guarded egress, proxies.

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod browsing;
mod chaos;
mod egress;
mod proxy;
