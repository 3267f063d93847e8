//! The HTTP tier: a wreq client per slot that impersonates the slot's browser
//! (TLS ClientHello, HTTP/2 settings, header order), with the slot's cookie jar,
//! proxy and timeouts, and the SSRF guard on every request and redirect.

mod client;
mod guard;
mod tls_match;

pub use client::{FetchRequest, FetchResponse, HttpClient, RequestKind, RootStore, utf8_text};
pub use guard::{Guard, is_private};
