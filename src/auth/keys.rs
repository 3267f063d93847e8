//! The keys file: `[[key]] name, role, sha256, created`. A key is shown once,
//! when it is made; only its SHA-256 is stored. Written atomically, mode 0600.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::roles::Role;
use crate::diag::{self, Diagnostic};
use crate::routing::grants::Grant;

/// One stored key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    pub name: String,
    pub role: Role,
    /// Lower-case hex SHA-256 of the key.
    pub sha256: String,
    /// Unix seconds when the key was made.
    #[serde(default)]
    pub created: u64,
    /// What the key may act as (`[[key.grant]]`); none: every identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grant: Vec<Grant>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysDoc {
    #[serde(default)]
    key: Vec<KeyEntry>,
}

/// The keys file in memory.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    path: PathBuf,
    entries: Vec<KeyEntry>,
}

impl Keys {
    /// Read `path`; a missing file is an empty set (so `keys add` can create it).
    pub fn load(path: &Path) -> Result<Keys, Diagnostic> {
        if !path.exists() {
            return Ok(Keys {
                path: path.to_path_buf(),
                entries: Vec::new(),
            });
        }
        trusted_file(path)?;
        let (mut doc, text): (KeysDoc, String) = diag::read_toml(path)?;
        for k in &mut doc.key {
            k.sha256 = k.sha256.to_ascii_lowercase();
        }
        let mut seen = std::collections::HashSet::new();
        for k in &doc.key {
            let pos = text.find(&format!("\"{}\"", k.name)).map(|p| p..p);
            if !seen.insert(k.name.as_str()) {
                return Err(Diagnostic::at(
                    path,
                    &text,
                    pos,
                    format!("key name `{}` appears twice", k.name),
                ));
            }
            if k.sha256.len() != 64 || !k.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Diagnostic::at(
                    path,
                    &text,
                    pos,
                    format!("key `{}`: sha256 must be 64 hex digits", k.name),
                ));
            }
        }
        Ok(Keys {
            path: path.to_path_buf(),
            entries: doc.key,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[KeyEntry] {
        &self.entries
    }

    /// The entry a presented key belongs to.
    pub fn verify(&self, presented: &str) -> Option<&KeyEntry> {
        let digest = hash(presented.trim());
        self.entries
            .iter()
            .find(|e| constant_time_eq(e.sha256.as_bytes(), digest.as_bytes()))
    }

    /// Make a new key called `name`; returns the key itself (shown once).
    pub fn add(&mut self, name: &str, role: Role) -> Result<String, String> {
        self.add_granted(name, role, Vec::new())
    }

    /// [`Keys::add`] with grants.
    pub fn add_granted(
        &mut self,
        name: &str,
        role: Role,
        grant: Vec<Grant>,
    ) -> Result<String, String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        {
            return Err(format!(
                "key name `{name}` must be letters, digits, `-`, `_`, `.` or `@`"
            ));
        }
        if self.entries.iter().any(|e| e.name == name) {
            return Err(format!("a key named `{name}` exists; revoke it first"));
        }
        let secret = format!("idp_{}", hex::encode(rand::random::<[u8; 24]>()));
        self.entries.push(KeyEntry {
            name: name.to_string(),
            role,
            sha256: hash(&secret),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            grant,
        });
        Ok(secret)
    }

    /// Add `grant` to the key called `name`.
    pub fn grant(&mut self, name: &str, grant: Grant) -> Result<(), String> {
        let e = self.entry_mut(name)?;
        if e.grant.contains(&grant) {
            return Err(format!("key `{name}` already has the grant `{grant}`"));
        }
        e.grant.push(grant);
        Ok(())
    }

    /// Remove the key's grant number `index` (from 1, as `keys list`
    /// shows them); returns it.
    pub fn revoke_grant(&mut self, name: &str, index: usize) -> Result<Grant, String> {
        let e = self.entry_mut(name)?;
        let n = e.grant.len();
        if index == 0 || index > n {
            return Err(format!(
                "key `{name}` has {n} grant(s); give a number from 1 to {n}"
            ));
        }
        if n == 1 {
            // Without grants a key may use every identity: taking the last
            // one would widen it, not narrow it.
            return Err(format!(
                "grant 1 is the last grant of `{name}`; without grants the key could use every identity: add another grant first, or revoke the key"
            ));
        }
        Ok(e.grant.remove(index - 1))
    }

    fn entry_mut(&mut self, name: &str) -> Result<&mut KeyEntry, String> {
        self.entries
            .iter_mut()
            .find(|e| e.name == name)
            .ok_or_else(|| format!("no key named `{name}`"))
    }

    /// Remove the key called `name`; false when there is none.
    pub fn revoke(&mut self, name: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.name != name);
        self.entries.len() != before
    }

    /// Write the file (temp + fsync + rename, 0600).
    pub fn save(&self) -> crate::Result<()> {
        let doc = KeysDoc {
            key: self.entries.clone(),
        };
        let body = toml::to_string_pretty(&doc).map_err(|e| {
            crate::Error::new(
                crate::ErrorKind::Internal,
                format!("cannot encode keys: {e}"),
            )
        })?;
        let text = format!(
            "# idpool API keys. Only the SHA-256 of each key is stored; manage with\n\
             # `idpool keys add|list|revoke`.\n\n{body}"
        );
        // Keep the owner, group and (at most 0640) mode an installer gave the
        // file, so a daemon running as another user can still read it.
        let before = std::fs::metadata(&self.path).ok();
        crate::fsutil::write_atomically(&self.path, text.as_bytes())?;
        if let Some(m) = before {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let _ = std::os::unix::fs::chown(&self.path, Some(m.uid()), Some(m.gid()));
            let _ = std::fs::set_permissions(
                &self.path,
                std::fs::Permissions::from_mode(m.mode() & 0o640),
            );
        }
        Ok(())
    }
}

/// Lower-case hex SHA-256 of `s`.
pub fn hash(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A keys file anyone but its owner could write would let them add an
/// admin key: refused when group or others may write it, or when it
/// belongs to a user other than this process's (or root).
fn trusted_file(path: &Path) -> Result<(), Diagnostic> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| Diagnostic::file(path, format!("cannot read the keys file: {e}")))?;
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(Diagnostic::file(
            path,
            format!("the keys file is writable by group or others (mode {mode:o}): `chmod 600` it"),
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(Diagnostic::file(
            path,
            format!(
                "the keys file belongs to uid {}, not to this user ({me}) or root: `chown` it",
                meta.uid()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_verify_revoke_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let mut keys = Keys::load(&path).unwrap();
        let k = keys.add("agent", Role::Operator).unwrap();
        assert!(k.starts_with("idp_") && k.len() == 52);
        assert!(
            keys.add("agent", Role::Admin)
                .unwrap_err()
                .contains("exists")
        );
        assert!(keys.add("bad name", Role::Admin).is_err());
        keys.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&k), "the key itself is never stored");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        let e = Keys::load(&path).unwrap_err().to_string();
        assert!(e.contains("writable by group or others (mode 664)"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut again = Keys::load(&path).unwrap();
        assert_eq!(again.verify(&k).map(|e| e.role), Some(Role::Operator));
        assert!(again.verify("idp_wrong").is_none());
        assert!(again.revoke("agent"));
        assert!(!again.revoke("agent"));
        assert!(again.verify(&k).is_none());
    }

    #[test]
    fn a_broken_keys_file_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(
            &path,
            "[[key]]\nname = \"a\"\nrole = \"root\"\nsha256 = \"00\"\n",
        )
        .unwrap();
        let e = Keys::load(&path).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn grants_round_trip_through_the_file_and_the_last_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let mut keys = Keys::load(&path).unwrap();
        let g1 = Grant::parse("slots=1;tools=get_reviews").unwrap();
        let g2 = Grant::parse("signed_in=testshop;until=2030-01-01").unwrap();
        keys.add_granted("agent", Role::Operator, vec![g1.clone()])
            .unwrap();
        keys.grant("agent", g2.clone()).unwrap();
        assert!(
            keys.grant("agent", g2.clone())
                .unwrap_err()
                .contains("already")
        );
        assert!(
            keys.grant("nobody", g2.clone())
                .unwrap_err()
                .contains("no key")
        );
        keys.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("[[key.grant]]"), "{text}");
        let mut again = Keys::load(&path).unwrap();
        assert_eq!(again.entries()[0].grant, vec![g1.clone(), g2.clone()]);
        assert!(
            again
                .revoke_grant("agent", 3)
                .unwrap_err()
                .contains("from 1 to 2")
        );
        assert_eq!(again.revoke_grant("agent", 1).unwrap(), g1);
        // Without grants the key could use every identity: not by accident.
        assert!(
            again
                .revoke_grant("agent", 1)
                .unwrap_err()
                .contains("last grant")
        );
        assert_eq!(again.entries()[0].grant, vec![g2]);
    }

    #[test]
    fn a_grant_with_an_unknown_part_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(
            &path,
            format!(
                "[[key]]\nname = \"a\"\nrole = \"operator\"\nsha256 = \"{}\"\n[[key.grant]]\nslots = [1]\nidentity = \"x\"\n",
                "0".repeat(64)
            ),
        )
        .unwrap();
        let e = Keys::load(&path).unwrap_err();
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.to_string().contains("identity"), "{e}");
    }
}
