//! `calibrate`: run a slot's calibration now (its browser launches if
//! needed) and return both sides: what the browser sent, what the calibrated
//! HTTP tier sent, and the residual.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::pool::Pool;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Only this slot; default every slot.
    #[serde(default)]
    slot: Option<usize>,
}

pub async fn run(pool: &Pool, args: Value) -> Result<Value> {
    let bad = |m: String| Error::new(ErrorKind::InvalidArgument, m).retryable(false);
    let a: Args = serde_json::from_value(args)
        .map_err(|e| bad(format!("invalid calibrate arguments: {e}")))?;
    let ids: Vec<usize> = match a.slot {
        Some(n) if pool.slot(n).is_none() => {
            return Err(bad(format!(
                "slot {n} does not exist (the pool has {} slots)",
                pool.slots().len()
            )));
        }
        Some(n) => vec![n],
        None => (0..pool.slots().len()).collect(),
    };
    let mut out = Vec::new();
    for id in ids {
        let Some(slot) = pool.slot(id) else { continue };
        out.push(match slot.calibrate_now().await {
            Ok(r) => json!({"slot": id, "ok": true, "record": r, "error": null}),
            Err(e) => json!({"slot": id, "ok": false, "record": null, "error": e.to_string()}),
        });
    }
    Ok(json!({ "slots": out }))
}
