//! The lease: the one way out to a site, and the only module that combines
//! an identity's resources (`identity/`), the routing decisions
//! (`routing/`), the strategy's rules (`strategy/`) and the network
//! (`wire/`).
//!
//! [`Leases`] (`state.rs`) owns the slots and the router; [`Leases::next_slot`]
//! (`source.rs`) hands out a [`Lease`] (`handle.rs`): taken before the work,
//! moved into it, released on drop, so in-flight counts and half-open
//! trials can never leak. Every request of every tier goes through the
//! lease ([`Lease::http`], [`Lease::browse`], [`Lease::navigate_tab`],
//! [`Lease::robots`]): the SSRF guard, robots.txt, pacing (`pace.rs`), the
//! metrics (`rates.rs`), the classification under the strategy, the login
//! state (`login.rs`), the jar save and, at [`Lease::finish`], the breaker's
//! feedback and the retirement policy (`retire.rs`). A call of many
//! requests holds one identity through a [`Call`] (`call.rs`). Browser work
//! the `[recording]` policy picks is recorded (`recorded.rs`, kept by
//! `recordings.rs`).

mod act;
mod browse;
mod call;
pub mod cascade;
mod drift;
mod gate;
mod handle;
mod held;
pub mod identities;
mod observe;
mod open;
mod pace;
mod person;
mod rates;
mod recorded;
pub mod recordings;
mod retire;
mod robots;
mod sites;
mod source;
mod state;

pub use browse::BrowseOptions;
pub use call::Call;
pub use drift::Drift;
pub use handle::{Fetched, Lease, Via};
pub use identities::Identities;
pub use open::Slots;
pub use person::{Asked, HeldLease, Opened, PersonAsk, PersonDesk};
pub use rates::Rates;
pub use recordings::{Recording, RecordingKind, RecordingMeta, Recordings, Subject};
pub use retire::Retirement;
pub use sites::{SIGNED_OUT_WALL_MEMORY, Sites};
pub use state::{LeaseConfig, Leases};
