//! How a call ended ([`CallEnd`]), why it failed ([`Failure`]), and the
//! same on the wire between a fleet's daemons ([`FleetEnd`]).

use serde_json::Value;

use crate::auth::Denied;
use crate::error::ErrorKind;
use crate::tools::{Output, Provenance};

/// How a call ended, before it is turned into MCP.
#[derive(Debug)]
pub enum CallEnd {
    /// The tool's result and who served it.
    Ok(Output),
    /// An execution failure: a result with `isError: true`.
    Failed(Failure),
    /// An unknown tool: JSON-RPC -32602.
    InvalidParams(String),
    /// A bad argument: a tool error (`isError: true`) naming it, as MCP
    /// 2025-11-25 asks, so the model can correct its call.
    Invalid(Failure),
    /// The gate refused: JSON-RPC -32001.
    Denied(Denied),
    /// The client cancelled; nobody waits for an answer.
    Cancelled,
}

/// Why a call failed: the message, its kind, and when trying again can help.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    pub message: String,
    pub kind: ErrorKind,
    /// Seconds until trying again can help (every identity resting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<f64>,
    /// Recordings of the browser work the call made before it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recordings: Vec<String>,
}

impl Failure {
    pub(super) fn of(e: &crate::error::Error) -> Self {
        Failure {
            message: crate::diag::one_line(&e.to_string(), crate::diag::ERROR_CHARS),
            kind: e.kind(),
            retry_after: e
                .retry_after()
                .map(|d| (d.as_secs_f64() * 10.0).ceil() / 10.0),
            recordings: Vec::new(),
        }
    }

    pub(super) fn internal(message: String) -> Self {
        Failure {
            message,
            kind: ErrorKind::Unavailable,
            retry_after: None,
            recordings: Vec::new(),
        }
    }

    /// `{"kind", "message", "retry_after"?}`: a failed call's facts.
    pub fn to_json(&self) -> Value {
        let mut e = serde_json::json!({"kind": self.kind, "message": self.message});
        if let Some(r) = self.retry_after {
            e["retry_after"] = serde_json::json!(r);
        }
        if !self.recordings.is_empty() {
            e["recordings"] = serde_json::json!(self.recordings);
        }
        e
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A forwarded call's end on the wire between daemons (the answer of
/// `POST /api/v1/fleet/call/{tool}`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum FleetEnd {
    Ok {
        result: Value,
        /// Who served it, on the daemon that ran it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provenance: Option<Provenance>,
    },
    Failed(Failure),
    Invalid(Failure),
    InvalidParams {
        message: String,
    },
}

impl CallEnd {
    /// How the fleet endpoint answers a forwarded call.
    pub fn to_fleet(&self) -> FleetEnd {
        let failed = |kind, message: String| {
            FleetEnd::Failed(Failure {
                message,
                kind,
                retry_after: None,
                recordings: Vec::new(),
            })
        };
        match self {
            CallEnd::Ok(o) => FleetEnd::Ok {
                result: o.body.clone(),
                provenance: o.provenance,
            },
            CallEnd::Failed(f) => FleetEnd::Failed(f.clone()),
            CallEnd::Invalid(f) => FleetEnd::Invalid(f.clone()),
            CallEnd::InvalidParams(m) => FleetEnd::InvalidParams { message: m.clone() },
            CallEnd::Denied(d) => failed(ErrorKind::Refused, d.to_string()),
            CallEnd::Cancelled => failed(ErrorKind::Unavailable, "cancelled".into()),
        }
    }
}

impl From<FleetEnd> for CallEnd {
    fn from(end: FleetEnd) -> CallEnd {
        match end {
            FleetEnd::Ok { result, provenance } => CallEnd::Ok(Output {
                body: result,
                provenance,
                text: None,
            }),
            FleetEnd::Failed(f) => CallEnd::Failed(f),
            FleetEnd::Invalid(f) => CallEnd::Invalid(f),
            FleetEnd::InvalidParams { message } => CallEnd::InvalidParams(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_end_crosses_the_wire_typed() {
        let busy = CallEnd::Failed(Failure {
            message: "no slot became free".into(),
            kind: ErrorKind::Busy,
            retry_after: Some(1.5),
            recordings: Vec::new(),
        });
        let wire = serde_json::to_value(busy.to_fleet()).expect("serialize");
        assert_eq!(
            wire,
            serde_json::json!({"end": "failed", "message": "no slot became free", "kind": "busy", "retry_after": 1.5})
        );
        let back: FleetEnd = serde_json::from_value(wire).expect("deserialize");
        let CallEnd::Failed(f) = CallEnd::from(back) else {
            panic!("not a failure");
        };
        assert_eq!(f.kind, ErrorKind::Busy, "{f:?}");
        // A kind this daemon does not know (a newer peer's) is `unavailable`.
        let newer: FleetEnd = serde_json::from_value(
            serde_json::json!({"end": "invalid", "message": "m", "kind": "from_the_future"}),
        )
        .expect("deserialize");
        let CallEnd::Invalid(f) = CallEnd::from(newer) else {
            panic!("not invalid");
        };
        assert_eq!(f.kind, ErrorKind::Unavailable);
        let ok: FleetEnd =
            serde_json::from_value(serde_json::json!({"end": "ok", "result": {"n": 1}}))
                .expect("ok");
        assert!(
            matches!(CallEnd::from(ok), CallEnd::Ok(o) if o.body["n"] == 1 && o.provenance.is_none())
        );
        // Who served a forwarded call crosses with it, typed.
        let by = Provenance {
            slot: 3,
            tier: 2,
            attempts: 2,
        };
        let served = CallEnd::Ok(Output::served(serde_json::json!({"n": 2}), by));
        let wire = serde_json::to_value(served.to_fleet()).expect("serialize");
        assert_eq!(
            wire["provenance"],
            serde_json::json!({"slot": 3, "tier": 2, "attempts": 2})
        );
        let back: FleetEnd = serde_json::from_value(wire).expect("deserialize");
        assert!(matches!(CallEnd::from(back), CallEnd::Ok(o) if o.provenance == Some(by)));
        assert!(
            serde_json::from_value::<FleetEnd>(serde_json::json!({"end": "maybe"})).is_err(),
            "an unknown end is refused"
        );
    }
}
