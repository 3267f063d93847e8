//! The cascade and the tools on it: three tiers, `scrape`, the open web.

#[path = "../common/mod.rs"]
mod common;

mod any_shop;
mod cascade;
mod scrape;
mod search;
mod web;
