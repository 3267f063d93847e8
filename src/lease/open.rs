//! The pool's slots as they open: one per entry of the config's plan
//! (spares after), each with its profile (the installed Chromium's
//! version unless the profile pins one) and a persona unlike the others'.
//! What opens them hands them straight to [`Leases::new`](super::Leases::new),
//! the one owner of every slot.

use std::sync::Arc;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::identity::profile;
use crate::identity::slot::{Slot, SlotEnv};

/// The slots opened, for the lease source to own.
pub struct Slots(pub(super) Vec<Arc<Slot>>);

impl Slots {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every slot of the config's plan, its user agent following `chromium`
    /// (the installed major) unless its profile pins one.
    pub fn open(
        cfg: &Config,
        (profiles, problems): (
            &std::collections::BTreeMap<String, profile::Profile>,
            &[crate::diag::Diagnostic],
        ),
        env: &SlotEnv<'_>,
        chromium: Option<u32>,
    ) -> Result<Slots> {
        let mut slots = Vec::new();
        let plans: Vec<_> = cfg
            .slot_plan()
            .into_iter()
            .chain(cfg.spare_plan())
            .collect();
        // The personas slots already have, so that a new one is unlike them all.
        for plan in &plans {
            let dir = cfg.pool.data_dir.join("slots").join(plan.id.to_string());
            if let Some(p) = crate::identity::slot::SlotIdentity::peek_persona(&dir) {
                env.personas.keep(plan.id, &p);
            }
        }
        for plan in plans {
            let mut profile = profiles.get(&plan.profile).cloned().ok_or_else(|| {
                // A slot's profile that did not load fails the open with why.
                let why = problems.iter().find(|d| {
                    d.file
                        .file_stem()
                        .is_some_and(|s| s == plan.profile.as_str())
                });
                match why {
                    Some(d) => Error::config(format!(
                        "slot {} uses profile `{}`: {d}",
                        plan.id, plan.profile
                    )),
                    None => Error::config(format!(
                        "slot {} uses profile `{}`, which is not in {}",
                        plan.id,
                        plan.profile,
                        cfg.pool.profiles_dir.display()
                    )),
                }
            })?;
            if let Some(major) = chromium {
                profile.follow_browser(major);
            }
            slots.push(Arc::new(Slot::open(
                plan.id,
                profile,
                plan.proxy.as_ref(),
                env,
            )?));
        }
        Ok(Slots(slots))
    }
}
