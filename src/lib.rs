//! idpool: a pool of browser identities for web data collection.
//!
//! # Layout
//!
//! Each folder imports only what its allow-list in `tests/offline/layers.rs`
//! names, and the parts of a folder form no import cycle. Lowest first:
//!
//! ```text
//! error.rs      the library's typed errors
//! diag.rs       `file:line: what is wrong` diagnostics
//! fsutil.rs     files the daemon owns: atomic writes, private folders
//! dom/          hostile HTML within bounds: depth-capped parse, checked selectors, the off-runtime pool
//! request/      what a caller asks for, as plain values every layer may name: an
//!               HTTP request, a browser's actions, captures and waits, a session
//!               file's format
//! config/       idpool.toml: resolution order, every key
//! events.rs     the pool's event hub (status page, `idpool slots --follow`, the fleet)
//! wire/         the network, knowing no slot:
//! wire/fingerprint/  what a client looks like on the wire: the TLS ClientHello
//!               (JA4 and its parts), HTTP/2 frames (Akamai fingerprint,
//!               HEADERS priority) and header order; calibration profiles and
//!               the residual between two captures
//! wire/http/    the HTTP tier: a wreq client impersonating the slot's browser,
//!               certificates (trusted roots, SPKI pins), and the SSRF guard
//! wire/netns.rs the browsers' network namespace (loopback only) and the
//!               runtime thread inside it
//! wire/egress/  the browser's one way out: a guarded forward proxy per slot
//!               (CONNECT and plain HTTP), resolving and checking every
//!               address, chaining to the slot's upstream proxy
//! identity/     what one identity is made of:
//! identity/profile/  profiles/*.toml: emulation, user agent, language, proxy, seed cookies
//! identity/jar/ a slot's cookie jar (shared by its HTTP client and its browser)
//! identity/session/  sessions in and out: Netscape cookies.txt, Cookie-Editor JSON,
//!               Playwright storageState (cookies and localStorage)
//! identity/browser/  each slot's lazily launched, supervised Chromium
//!               (launcher, processes, supervisor, page operations)
//! identity/persona/  the device each slot is: screen, window, pixel ratio, theme, fonts,
//!               drawn once from people's machines, kept with the identity
//! identity/bundle   an identity bundle's sealed container (Argon2id, XChaCha20-Poly1305)
//! identity/calibrate/  a slot's HTTP tier calibrated against its own Chromium
//!               through a loopback listener inside the daemon
//! identity/slot/  one slot: profile, jar, client, browser and egress put
//!               together, its record (generation, session), its wear
//! strategy/     strategies/*.toml: hosts, warm-up, block/challenge/empty markers,
//!               politeness, operations (typed params, tier templates, extraction
//!               rules); the `Strategy` trait (TOML and compiled plugins); the
//!               registry; classifying a response into an Outcome
//! web/          the open web page by page: robots.txt rules, sitemaps, a
//!               page as markdown (main content), HTML, text, links, fields
//! cluster/      the fleet's shared store on Redis/Valkey: leases, identity
//!               records and jars, site states, atomic budgets, events
//! routing/      routing decisions, pure: the per-(slot, strategy) breaker and
//!               site state, the adaptive request budget, login records, and
//!               the router that picks a slot on them
//! lease/        the one road to a site: the lease source (slots, router
//!               state, guard, robots, metrics) and the lease, which alone
//!               combines an identity, the routing state, the strategy and
//!               the network, its checks written once (`gate.rs`); the
//!               identities by number and their reports (`identities.rs`), the
//!               site state (`sites.rs`); a call that holds one identity; retirement;
//!               the cascade (`lease/cascade/`: tier 1 -> 2 -> 3 and across slots);
//!               the recordings of browser work it keeps
//! services/     what holds a lease source and owns its own state: interactive
//!               browsing, login sessions (live view), session files, crawl
//!               jobs, the fleet's heartbeat, upkeep, PII masking, serving
//! pool/         the facade: open, reload, reports, shutdown; tools get their
//!               handles from it
//! tools/        transport-agnostic tools, one file (one spec) per tool, each
//!               handed the one handle its `Run` names
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
//! ```
//!
//! The testbed shop the tests, the demo and the benchmarks run against is a
//! crate of its own (`crates/testbed`, `idpool-testbed`): the daemon's build
//! compiles none of it.
//!
//! The library returns typed [`Error`]s; `anyhow` lives only on the
//! binary's side (`src/main.rs` and its `src/cli/`).

pub mod auth;
pub mod cluster;
pub mod config;
pub mod daemon;
pub mod diag;
pub mod dom;
pub mod error;
pub mod events;
pub mod fsutil;
pub mod identity;
pub mod lease;
pub mod mcp;
pub mod pool;
pub mod request;
pub mod routing;
pub mod services;
pub mod strategy;
pub mod tools;
pub mod web;
pub mod wire;

pub use error::{Error, ErrorKind, Result};
