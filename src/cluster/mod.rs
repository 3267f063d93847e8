//! The fleet's shared store: Redis or Valkey through the `redis` crate's
//! tokio connection manager (it reconnects on its own; the client is the
//! ecosystem's kept one, and Valkey speaks the same protocol).
//!
//! Every command has a deadline (`cluster.command_timeout_ms`). A command
//! that fails or times out marks the fleet **degraded**: the pool keeps
//! serving its own identities from local state, and says so in `/readyz`,
//! `pool_status` and `idpool_cluster_up`. The first command that succeeds
//! again marks it up and counts a reconnect, which the pool's heartbeat
//! answers by reconciling ([`Cluster::reconnects`]).
//!
//! Keys, all under `cluster.key_prefix`:
//! - `lease:<fleet id>`: the node that owns an identity, valid while that
//!   node's `node:<name>` lives (one TTL, renewed by its heartbeat);
//! - `identities`: hash fleet id → the identity's record (profile, session);
//! - `jar:<fleet id>`: its cookies; `sites:<fleet id>`: hash strategy → its
//!   breaker, `Retry-After` hold, tier memory and login state;
//! - `node:<name>`: a live daemon's address (TTL); `nodes`: the set of names;
//!   `beats`: each name's last beat; `holdings`: what each holds (so the
//!   fleet knows what a daemon that dies leaves);
//! - `unhosted`: the identities whose daemon is gone and that no daemon took
//!   yet (sorted by when they lost their host);
//! - `budget:<strategy>`: the fleet-wide request budget: paced starts, the
//!   fleet's measured rate and the adaptive rate in force (the in-flight
//!   bound is shared out among the live daemons: `Fleet::share`);
//! - `events`: the pub/sub channel of every daemon's events.
//!
//! A node's address read back from Redis is not trusted: see [`peer`] for
//! where the cluster key may go and what it may call.

mod address;
mod budget;
mod events;
mod fleet;
mod hosting;
mod link;
mod peer;
mod scripts;
mod store;

pub use address::refused_address;
pub use budget::{CUT_FACTOR, CUT_SPACING, Cut, CutAsk, PaceAsk, Paced};
pub use events::relay_events;
pub(crate) use fleet::Pushed;
pub use fleet::{Fleet, WithoutHost};
pub use hosting::{Beat, Unhosted};
pub use link::{Cluster, ClusterReport};
pub use peer::{FORWARDED_TOOLS, Reach, is_forwarded};
pub use store::NodeInfo;
