//! The HTTP tier: a wreq client per slot that impersonates the slot's browser
//! (TLS ClientHello, HTTP/2 settings, header order), with the slot's cookie jar,
//! proxy and timeouts, and the SSRF guard on every request and redirect;
//! `cert` reads the extra trusted roots (a root store, SPKI pins).

pub mod cert;
mod client;
mod guard;
mod headers;
pub mod hints;
mod persona;
mod request;
mod tls_match;

pub use cert::RootStore;
pub use client::{FetchResponse, HttpClient, utf8_text};
pub use guard::{Guard, host_matches, is_private};
pub use persona::Persona;
