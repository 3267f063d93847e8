//! Personal data out of a cascade's items for callers below
//! `security.pii_role`: the fields the operation that ran (or its fallback)
//! marks `pii = true` (or its strategy names), masked before any tool sees them.

use super::CascadeResult;
use super::RunOptions;
use crate::strategy::Strategy;
use crate::strategy::operation::Operation;

pub(super) fn apply(
    strategy: &dyn Strategy,
    op: &Operation,
    mut r: CascadeResult,
    opts: &RunOptions,
) -> CascadeResult {
    let Some(mask) = &opts.mask_pii else {
        return r;
    };
    let ran = r
        .fallback
        .as_ref()
        .and_then(|f| strategy.operations().get(&f.operation));
    let fields = strategy.pii_fields(ran.unwrap_or(op));
    if !fields.is_empty() {
        r.masked = mask.mask_items(&mut r.extracted.items, &fields);
    }
    r
}
