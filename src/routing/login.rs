//! Login state per (slot, strategy): `logged_in`, `logged_out` or
//! `unknown`, with when it last changed and the marker that showed it.

use serde::Serialize;

use crate::strategy::LoginState;

/// One (slot, strategy)'s login state.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LoginRecord {
    pub state: LoginState,
    /// Unix seconds of the last change (`None`: never seen).
    pub since: Option<u64>,
    /// The marker that showed it (`[session.logged_in] selector … matched`).
    pub evidence: Option<String>,
}

impl LoginRecord {
    pub fn unknown() -> LoginRecord {
        LoginRecord {
            state: LoginState::Unknown,
            since: None,
            evidence: None,
        }
    }
}
