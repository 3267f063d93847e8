//! Routing decisions, pure state machines on tokio's clock (tested on
//! paused time): the per-(slot, strategy) breaker (`breaker.rs`) and site
//! state (`site.rs`: politeness bookkeeping, tier memory, login), the
//! adaptive request budget per strategy (`budget.rs`), login records
//! (`login.rs`) and the router that picks a slot on them (`router.rs`).
//! Nothing here sends a request or holds a slot: the pool asks, the lease acts.

pub mod breaker;
pub mod budget;
pub mod grants;
pub mod login;
pub mod router;
pub mod site;

pub use breaker::{Admission, Breaker, BreakerState, Cause, Verdict};
pub use budget::{Budget, BudgetReport, Change};
pub use grants::{Grant, Identity, Place, Scope};
pub use login::LoginRecord;
pub use router::{Ask, BreakerReport, Pick, Resting, Router, SlotNow, WEB, is_web_key, web_key};
pub use site::Site;
