//! Transport-agnostic tools: typed arguments in, JSON results out. The MCP server
//! and `idpool call` only wrap these.

pub mod calibrate;
pub mod extract;
pub mod get_reviews;
pub mod list_strategies;
pub mod pool_status;
pub mod refresh_cookies;
pub mod reset_slot;
pub mod scrape;

use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};

/// Refuse a non-object argument value with a clear message.
pub(crate) fn object(args: Value) -> Result<Map<String, Value>> {
    match args {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("arguments must be a JSON object, got {other}"),
        )
        .retryable(false)),
    }
}

/// Take an optional argument of type `T`, naming the argument when it has the wrong type.
pub(crate) fn take<T: serde::de::DeserializeOwned>(
    args: &mut Map<String, Value>,
    name: &str,
) -> Result<Option<T>> {
    match args.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|_| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("argument `{name}` has the wrong type: {v}"),
            )
            .retryable(false)
        }),
    }
}
