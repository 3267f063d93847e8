//! idpool: a pool of browser identities for web data collection.
//!
//! # Layout
//!
//! ```text
//! config.rs     idpool.toml: resolution order, every key, `check-config`
//! diag.rs       `file:line: what is wrong` diagnostics
//! profile.rs    profiles/*.toml: emulation, user agent, language, proxy, seed cookies
//! strategy/     strategies/*.toml: hosts, warm-up, block/challenge/empty markers,
//!               politeness, operations (typed params, tier templates, extraction
//!               rules); the `Strategy` trait (TOML and compiled plugins); the
//!               registry; classifying a response into an Outcome
//! http/         the HTTP tier: a wreq client impersonating the slot's browser,
//!               trusted roots, and the SSRF guard
//! browser/      the browser tier: each slot's lazily launched, supervised
//!               Chromium (launcher, supervisor, page operations, cookie sync)
//! pool/         slots (identity + jar + client), the per-(slot, strategy) circuit
//!               breaker, politeness, and the router that leases slots
//! tiers/        the cascade: an operation through tier 1 -> 2 -> 3 and across
//!               slots, with tier memory, retry budget and attempt records
//! tools/        transport-agnostic tools: scrape, get_reviews, extract,
//!               list_strategies, pool_status, refresh_cookies, reset_slot
//! auth/         API keys (hashed), roles and the one authorization gate, the
//!               audit log
//! mcp/          the MCP server: the dispatcher (gate, audit, tool runs), the
//!               rmcp handler, Streamable HTTP, legacy SSE, stdio (embedded or
//!               bridged to the daemon), and the daemon client
//! daemon/       `idpool serve`: systemd notify/watchdog, signals (drain,
//!               reload), control API, metrics, events, status page
//! fingerprint/  what a client looks like on the wire: the TLS ClientHello
//!               (JA4 and its parts), HTTP/2 frames (Akamai fingerprint,
//!               HEADERS priority) and header order; calibration profiles and
//!               the residual between two captures
//! calibrate/    each slot's HTTP tier calibrated against its own Chromium
//!               through a loopback listener inside the daemon
//! testbed/      idpool-testbed: the local imitation of a protected shop that tests,
//!               the demo and benchmarks run against (JA4 gate, JS challenge,
//!               rate limit, review data, faults on demand)
//! cli/          the `idpool` subcommands (thin: parse, call the library, print)
//! ```
//!
//! The library returns typed [`Error`]s; `anyhow` lives only in the binaries.

pub mod auth;
pub mod browser;
pub mod calibrate;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod diag;
pub mod error;
pub mod fingerprint;
pub mod http;
pub mod mcp;
pub mod pool;
pub mod profile;
pub mod strategy;
pub mod testbed;
pub mod tiers;
pub mod tools;

pub use error::{Error, ErrorKind, Result};
