//! The pool's services: each owns its own state and holds the lease source
//! (`crate::lease::Leases`) for the requests it makes; none reaches a site
//! but through a lease.
//!
//! - `browsing.rs`: interactive browser sessions (the `browser_*` tools);
//!   `snapshot_view.rs`: what their answers show of a page's snapshot;
//! - `live.rs`: live sessions a person drives (signing an identity in,
//!   clearing what a site asks of a person);
//! - `handoff.rs`: the person desk: a call that meets a captcha or a
//!   sign-in wall on a `[handoff]` strategy waits for a person there;
//! - `session_files.rs`: session files into and out of a slot;
//! - `bundles.rs`: a slot's whole identity as one encrypted file, and back;
//! - `jobs.rs`: crawls that run past their call;
//! - `fleet/`: the heartbeat, adoption and the fleet's view (`[cluster]`);
//! - `upkeep.rs`: browser facts as events, proxy probes, idle browsers;
//! - `standby.rs`: browsers launched ahead of the calls that need them;
//! - `pii.rs`: who sees personal data in clear;
//! - `serving.rs`: the connections and MCP sessions the daemon holds open.

pub mod browsing;
pub mod bundles;
pub mod fleet;
pub mod handoff;
pub mod jobs;
pub mod live;
pub mod pii;
pub mod serving;
pub mod session_files;
pub mod snapshot_view;
pub mod standby;
pub mod upkeep;

use std::sync::Arc;

pub use browsing::Browsing;
pub use bundles::Bundles;
pub use fleet::FleetSync;
pub use handoff::Desk;
pub use jobs::Jobs;
pub use live::{Frame, LiveSession, LiveStatus, LoginLimits, Logins};
pub use pii::Pii;
pub use serving::Serving;
pub use session_files::{Imported, SessionFiles};

/// Every service of one pool, each its own owner.
pub struct Services {
    pub browsing: Arc<Browsing>,
    pub logins: Arc<Logins>,
    pub session_files: SessionFiles,
    /// Identity bundles out of and into slots.
    pub bundles: Bundles,
    pub jobs: Arc<Jobs>,
    pub pii: Pii,
    pub serving: Serving,
    /// `None` without `[cluster]`.
    pub fleet: Option<Arc<FleetSync>>,
}
