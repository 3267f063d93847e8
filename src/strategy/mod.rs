//! Strategies: per-site plugins (`strategies/*.toml`) saying which hosts they cover,
//! how to warm an identity up, how to tell a block, a challenge and a genuinely
//! empty page apart, and their operations (the named extractions, in up to three
//! tiers). [`web`] is the built-in generic one, for hosts no strategy covers.

mod ad_hoc;
mod api;
pub mod body;
mod coerce;
pub mod derive;
pub mod expect;
pub mod extract;
mod field;
mod file;
pub mod fixture;
mod handoff;
mod host;
mod lazy_json;
pub mod locale;
mod login;
mod markers;
pub mod market;
pub mod operation;
pub mod outcome;
mod params;
pub mod pii;
mod pointer;
mod politeness;
mod redirect;
mod registry;
pub mod score;
pub mod structured;
pub mod template;
mod text;
mod toml_strategy;
pub mod web;

pub use api::Strategy;
pub use body::{Body, BodyKind};
pub use extract::Extractor;
pub use handoff::Handoff;
pub use login::{LoginRules, LoginState};
pub use markers::{MarkerSet, Markers, RATE_LIMIT_STATUS, classify};
pub use outcome::Outcome;
pub use politeness::Politeness;
pub use registry::{Registry, with_variants};
pub use toml_strategy::TomlStrategy;
