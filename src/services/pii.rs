//! The pool's personal-data policy: who sees `pii = true` fields in clear
//! (`security.pii_role` and above) and the key that hashes links for
//! everyone else, kept in `<data_dir>/pii.key` (0600) so hashes stay the same
//! across restarts and cannot be looked up without it.

use std::path::Path;

use crate::config::Role;
use crate::error::{Error, Result};
use crate::strategy::pii::PiiMask;

pub struct Pii {
    mask: PiiMask,
    role: Role,
}

impl Pii {
    /// Read the key from `data_dir`, or make one.
    pub fn open(data_dir: &Path, role: Role) -> Result<Pii> {
        let path = data_dir.join("pii.key");
        let key = match std::fs::read(&path) {
            Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
                Error::config(format!(
                    "{} is not a 32-byte key (delete it and a new one is made; masked \
                     links then hash differently)",
                    path.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                crate::fsutil::write_atomically(&path, &key)?;
                key
            }
            Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
        };
        Ok(Pii {
            mask: PiiMask::new(key),
            role,
        })
    }

    /// The mask a caller with `role` gets, or `None`: it sees personal data.
    pub fn mask_for(&self, role: Role) -> Option<&PiiMask> {
        (role < self.role).then_some(&self.mask)
    }
}
