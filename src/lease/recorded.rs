//! A lease's browser work on its recording (an extension of [`Lease`]):
//! begun when `[recording] when` picks the identity, written (a failed
//! navigation's too) and noted for the call's result and audit line.

use super::Lease;
use super::recordings::{self, Recording, RecordingKind, Subject};
use crate::error::Error;

impl Lease {
    /// A recording of this lease's browser work, when `[recording] when`
    /// picks it (`signed_in`: the identity is signed in on the strategy).
    pub(super) fn begin_recording(&self, kind: RecordingKind) -> Option<Recording> {
        let store = &self.leases.recordings;
        let signed_in = self.login() == crate::strategy::LoginState::LoggedIn;
        store.wants(signed_in).then(|| {
            store.begin(Subject {
                kind,
                slot: self.slot(),
                strategy: self.strategy().to_string(),
                key: None,
            })
        })
    }

    /// Write `rec` (a failed navigation's too: what a person wants to
    /// see most); its id, noted for the call's result and audit line.
    pub(super) async fn end_recording(
        &self,
        rec: Option<Recording>,
        failed: Option<&Error>,
    ) -> Option<String> {
        let rec = rec?;
        if let Some(e) = failed {
            rec.tape.action("failed", e.message());
        }
        let id = rec.id().to_string();
        match self.leases.recordings.finish(rec).await {
            Ok(_) => {
                recordings::note(&id);
                Some(id)
            }
            Err(e) => {
                tracing::warn!(slot = self.slot(), error = %e, "cannot write a recording");
                None
            }
        }
    }
}
