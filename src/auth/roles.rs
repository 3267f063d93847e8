//! Roles `viewer` < `operator` < `admin`, the principal a call runs as, and the
//! single authorization gate every transport goes through.

use std::fmt;
use std::sync::Arc;

use crate::routing::grants::{Grant, Scope, unix_now};

pub use crate::config::Role;

/// Who a call runs as: the key's name (or `stdio` / `local`), its role, and
/// where the call came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// The key's grants (empty: every identity, as its role allows).
    pub grants: Arc<[Grant]>,
}

impl Principal {
    pub fn new(name: impl Into<String>, role: Role, transport: &'static str) -> Self {
        Principal {
            name: name.into(),
            role,
            transport,
            grants: Arc::from(Vec::new()),
        }
    }

    /// The same caller, limited to `grants`.
    pub fn with_grants(mut self, grants: Vec<Grant>) -> Self {
        self.grants = Arc::from(grants);
        self
    }
}

/// A refused call: JSON-RPC error -32001.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub role: Role,
    pub needed: Role,
    pub tool: String,
    /// Refused by the key's grants, not its role: what they do not cover.
    pub grant: Option<String>,
}

impl Denied {
    /// The JSON-RPC error code of a denied call.
    pub const CODE: i32 = -32001;
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(g) = &self.grant {
            return f.write_str(g);
        }
        write!(
            f,
            "role `{}` may not call `{}` (needs `{}`)",
            self.role, self.tool, self.needed
        )
    }
}

/// The one gate: may `who` call `tool`, which needs role `needed`?
pub fn authorize(who: &Principal, tool: &str, needed: Role) -> Result<(), Denied> {
    if who.role >= needed {
        Ok(())
    } else {
        Err(Denied {
            role: who.role,
            needed,
            tool: tool.to_string(),
            grant: None,
        })
    }
}

/// The key's grants for `tool` now (`None`: it has none, every identity
/// is its role's), or `Denied` when it has grants and none covers `tool`.
pub fn scope(who: &Principal, tool: &str, needed: Role) -> Result<Option<Scope>, Denied> {
    let Some(scope) = Scope::of(&who.name, &who.grants, tool, unix_now()) else {
        return Ok(None);
    };
    if scope.grants.is_empty() {
        return Err(Denied {
            role: who.role,
            needed,
            tool: tool.to_string(),
            grant: Some(format!(
                "key `{}` has no grant that holds now for `{tool}` (its grants name the tools and identities it may use; `idpool keys list`)",
                who.name
            )),
        });
    }
    Ok(Some(scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_the_gate_follows_the_order() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
        let viewer = Principal::new("v", Role::Viewer, "http");
        let admin = Principal::new("a", Role::Admin, "http");
        let e = authorize(&viewer, "scrape", Role::Operator).unwrap_err();
        assert_eq!(
            e.to_string(),
            "role `viewer` may not call `scrape` (needs `operator`)"
        );
        assert!(authorize(&viewer, "pool_status", Role::Viewer).is_ok());
        assert!(authorize(&admin, "reset_slot", Role::Admin).is_ok());
        assert_eq!("Admin".parse::<Role>(), Ok(Role::Admin));
        assert!("root".parse::<Role>().unwrap_err().contains("`root`"));
    }
}
