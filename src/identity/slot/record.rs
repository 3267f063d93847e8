//! Who a slot is now: its session (the `{session}` of its proxy URL, which
//! providers use for a sticky IP) and generation, kept in
//! `<slot>/identity.json` (written atomically, mode 0600) so a restart keeps
//! the same IP, and its persona (the device it is, `identity/persona`), so
//! a restart keeps the same device. A retired identity gets a new session
//! and a new persona.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::identity::persona::Persona;

/// A slot's current identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotIdentity {
    /// Random, 12 hex digits (read back only as hex digits: see
    /// [`check_session`]).
    #[serde(deserialize_with = "session_field")]
    pub session: String,
    /// 0 for the first identity, +1 per retirement.
    pub generation: u64,
    /// Unix seconds the identity was made.
    pub born: u64,
    /// The device it is (`None` only in a file written before personas:
    /// one is drawn when the slot opens, and kept).
    #[serde(default, deserialize_with = "persona_field")]
    pub persona: Option<Persona>,
}

fn persona_field<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Persona>, D::Error> {
    let p = Option::<Persona>::deserialize(d)?;
    if let Some(why) = p.as_ref().and_then(Persona::problem) {
        return Err(serde::de::Error::custom(why));
    }
    Ok(p)
}

/// The longest proxy session read back (the pool makes 12 hex digits).
const SESSION_MAX: usize = 64;

/// `Err` naming what is wrong when `session` is not what the pool itself
/// makes: hex digits, at most 64. A session ends up in the slot's proxy
/// URL, so one read from a file, a bundle or the fleet is held to that.
pub fn check_session(session: &str) -> std::result::Result<(), String> {
    if session.is_empty() || session.len() > SESSION_MAX {
        return Err(format!(
            "the proxy session must be 1 to {SESSION_MAX} hex digits; this one has {} characters",
            session.chars().count()
        ));
    }
    if let Some(c) = session.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(format!(
            "the proxy session must be hex digits (0-9, a-f) only; it has {:?}",
            c
        ));
    }
    Ok(())
}

fn session_field<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    let s = String::deserialize(d)?;
    check_session(&s).map_err(serde::de::Error::custom)?;
    Ok(s)
}

impl SlotIdentity {
    fn path(slot_dir: &Path) -> PathBuf {
        slot_dir.join("identity.json")
    }

    /// The persona saved in `slot_dir`, if a readable identity holds one.
    pub fn peek_persona(slot_dir: &Path) -> Option<Persona> {
        let bytes = std::fs::read(Self::path(slot_dir)).ok()?;
        serde_json::from_slice::<SlotIdentity>(&bytes).ok()?.persona
    }

    /// The saved identity, or a new one (saved) when there is none or the
    /// file is unreadable (moved aside, with a warning); `draw` makes the
    /// persona of a new one (or of a file without one).
    pub fn load_or_create(slot_dir: &Path, draw: impl FnOnce() -> Persona) -> Result<SlotIdentity> {
        let path = Self::path(slot_dir);
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<SlotIdentity>(&bytes) {
                Ok(id) if id.persona.is_some() => return Ok(id),
                Ok(mut id) => {
                    id.persona = Some(draw());
                    id.save(slot_dir)?;
                    return Ok(id);
                }
                Err(e) => {
                    let aside = path.with_extension(format!("json.corrupt-{}", now()));
                    tracing::warn!(file = %path.display(), error = %e, aside = %aside.display(),
                        "unreadable slot identity moved aside; the slot gets a new session");
                    let _ = std::fs::rename(&path, &aside);
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(crate::error::Error::io(
                    format!("cannot read {}", path.display()),
                    e,
                ));
            }
        }
        let id = SlotIdentity::fresh(0, draw());
        id.save(slot_dir)?;
        Ok(id)
    }

    /// Its persona (drawn when it has none).
    pub fn persona(&self) -> Persona {
        self.persona.clone().unwrap_or_else(Persona::fresh)
    }

    /// A new identity of generation `generation`, as `persona`.
    pub fn fresh(generation: u64, persona: Persona) -> SlotIdentity {
        SlotIdentity {
            session: hex::encode(rand::random::<[u8; 6]>()),
            generation,
            born: now(),
            persona: Some(persona),
        }
    }

    pub fn save(&self, slot_dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| {
            crate::error::Error::new(crate::error::ErrorKind::Internal, e.to_string())
        })?;
        crate::fsutil::write_atomically(&Self::path(slot_dir), &json)
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_across_opens_and_renewed_when_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let a = SlotIdentity::load_or_create(dir.path(), Persona::fresh).unwrap();
        assert_eq!(a.session.len(), 12);
        assert_eq!(
            SlotIdentity::load_or_create(dir.path(), Persona::fresh).unwrap(),
            a
        );
        std::fs::write(dir.path().join("identity.json"), b"{not json").unwrap();
        let b = SlotIdentity::load_or_create(dir.path(), Persona::fresh).unwrap();
        assert_ne!(b.session, a.session);
        let aside = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
        assert!(aside, "the bad file is kept aside");
    }

    #[test]
    fn a_session_that_is_not_hex_is_refused_when_read() {
        for bad in [
            "x@127.0.0.2:18999/#",
            "",
            "abc def",
            &"a".repeat(65),
            "ab%40",
        ] {
            let json = serde_json::json!({"session": bad, "generation": 0, "born": 1});
            let e = serde_json::from_value::<SlotIdentity>(json).unwrap_err();
            assert!(e.to_string().contains("proxy session"), "{bad}: {e}");
        }
        let ok = serde_json::json!({"session": "0a1b2c3d4e5f", "generation": 2, "born": 1});
        assert_eq!(
            serde_json::from_value::<SlotIdentity>(ok)
                .unwrap()
                .generation,
            2
        );
        // A planted identity.json is moved aside like a corrupt one: the
        // slot gets a session of its own.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("identity.json"),
            br#"{"session":"x@127.0.0.2:18999/#","generation":0,"born":1}"#,
        )
        .unwrap();
        let id = SlotIdentity::load_or_create(dir.path(), Persona::fresh).unwrap();
        assert!(check_session(&id.session).is_ok(), "{}", id.session);
    }
}
