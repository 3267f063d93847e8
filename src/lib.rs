//! idpool: a pool of browser identities for web data collection.
//!
//! # Layout
//!
//! Layers, lowest first: a module imports only from its own layer and the
//! ones above it in this list (`tests/offline/layers.rs` checks it, and that the
//! files of one module form no import cycle).
//!
//! ```text
//! error.rs      the library's typed errors
//! diag.rs       `file:line: what is wrong` diagnostics
//! dom/          hostile HTML within bounds: depth-capped parse, checked selectors, the off-runtime pool
//! fsutil.rs     files the daemon owns: atomic writes, private folders
//! config.rs     idpool.toml: resolution order, every key
//! profile.rs    profiles/*.toml: emulation, user agent, language, proxy, seed cookies
//! jar.rs        a slot's cookie jar (shared by its HTTP client and its browser)
//! session/      sessions in and out: Netscape cookies.txt, Cookie-Editor JSON,
//!               Playwright storageState (cookies and localStorage)
//! fingerprint/  what a client looks like on the wire: the TLS ClientHello
//!               (JA4 and its parts), HTTP/2 frames (Akamai fingerprint,
//!               HEADERS priority) and header order; calibration profiles and
//!               the residual between two captures
//! http/         the HTTP tier: a wreq client impersonating the slot's browser,
//!               certificates (trusted roots, SPKI pins), and the SSRF guard
//! netns.rs      the browsers' network namespace (loopback only) and the
//!               runtime thread inside it
//! egress/       the browser's one way out: a guarded forward proxy per slot
//!               (CONNECT and plain HTTP), resolving and checking every
//!               address, chaining to the slot's upstream proxy
//! browser/      the browser tier: each slot's lazily launched, supervised
//!               Chromium (launcher, processes, supervisor, page operations)
//! strategy/     strategies/*.toml: hosts, warm-up, block/challenge/empty markers,
//!               politeness, operations (typed params, tier templates, extraction
//!               rules); the `Strategy` trait (TOML and compiled plugins); the
//!               registry; classifying a response into an Outcome
//! web/          the open web page by page: robots.txt rules, sitemaps, a
//!               page as markdown (main content), HTML, text, links, fields
//! calibrate/    a slot's HTTP tier calibrated against its own Chromium
//!               through a loopback listener inside the daemon
//! cluster/      the fleet's shared store on Redis/Valkey: leases, identity
//!               records and jars, site states, atomic budgets, events
//! pool/         slots (identity + jar + client + browser), the router that
//!               leases them, the per-(slot, strategy) circuit breaker and
//!               politeness; the lease is the one way to use a slot
//! tiers/        the cascade: an operation through tier 1 -> 2 -> 3 and across
//!               slots, with tier memory, retry budget and attempt records
//! tools/        transport-agnostic tools, one file (one spec) per tool
//! auth/         API keys (hashed), roles and the one authorization gate, the
//!               audit log
//! mcp/          the MCP server: the dispatcher (gate, audit, tool runs), the
//!               rmcp handler, the HTTP gate (Host, Origin, key), Streamable
//!               HTTP, legacy SSE, stdio (embedded or bridged to the daemon),
//!               and the daemon client
//! daemon/       `idpool serve`: systemd notify/watchdog, signals (drain,
//!               reload), control API, metrics, events, status page
//! cli/          the `idpool` subcommands, on the binary's side (`src/main.rs`):
//!               parse, call the library, print
//! testbed/      idpool-testbed (feature `testbed`): the local imitation of a
//!               protected shop that tests, the demo and benchmarks run against
//!               (JA4 gate, JS challenge, rate limit, review data, faults on demand)
//! ```
//!
//! The library returns typed [`Error`]s; `anyhow` lives only on the
//! binaries' side (`src/main.rs` and its `src/cli/`, `src/bin/`).

pub mod auth;
pub mod browser;
pub mod calibrate;
pub mod cluster;
pub mod config;
pub mod daemon;
pub mod diag;
pub mod dom;
pub mod egress;
pub mod error;
pub mod fingerprint;
pub mod fsutil;
pub mod http;
pub mod jar;
pub mod mcp;
pub mod netns;
pub mod pool;
pub mod profile;
pub mod session;
pub mod strategy;
#[cfg(feature = "testbed")]
pub mod testbed;
pub mod tiers;
pub mod tools;
pub mod web;

pub use error::{Error, ErrorKind, Result};
