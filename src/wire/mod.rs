//! The network, knowing no slot: what a client looks like on the wire
//! (`fingerprint/`), the impersonating HTTP client and the SSRF guard
//! (`http/`), the browsers' network namespace (`netns.rs`) and their guarded
//! egress (`egress/`).

pub mod egress;
pub mod fingerprint;
pub mod http;
pub mod netns;
