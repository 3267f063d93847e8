//! Who may call what: API keys (`keys.rs`), roles and the one authorization gate
//! (`roles.rs`), and the audit log of every call (`audit.rs`).

pub mod audit;
pub mod keys;
pub mod roles;

pub use audit::{AuditLog, AuditRecord};
pub use keys::{KeyEntry, Keys};
pub use roles::{Denied, Principal, Role, authorize, scope};
