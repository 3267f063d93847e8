//! Strategies against their fixtures and the testbed: amazon and its marketplaces, fixture tests, a compiled strategy, extraction, drift, keyword rank, PII, scoring on saved pages.

#[path = "../common/mod.rs"]
mod common;

mod amazon;
mod compiled_strategy;
mod drift;
mod extract;
mod keyword_rank;
mod marketplaces;
mod pii;
mod score;
mod strategy_fixtures;
mod structured;
