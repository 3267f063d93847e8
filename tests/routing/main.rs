//! Routing: the router on paused time, breakers, backing off, sticky calls.

#[path = "../common/mod.rs"]
mod common;

mod backoff;
mod breaker;
mod router;
mod sticky;
