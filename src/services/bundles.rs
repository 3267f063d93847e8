//! Identity bundles: a slot's whole identity as one encrypted file, and
//! back into a slot of this or another daemon.
//!
//! What a bundle holds: the identity (its proxy session: the same sticky
//! IP wherever the proxy template renders it), the profile's name and the
//! calibration record, the proxy it went through (redacted, or whole with
//! `with_secrets`), its session (the jar's cookies and the browser's
//! `localStorage`, as Playwright storageState), and per strategy its site
//! state: breaker, `Retry-After` hold, tiers blocked, login state.
//!
//! An import opens and reads the whole bundle before it touches the slot:
//! a wrong passphrase, a changed or cut file, another format version or
//! contents that do not parse leave the slot as it was. Then the slot's
//! identity is retired (kept under `retired/<generation>/`, nothing lost)
//! and the bundle's is seated: its proxy session, its cookies, its
//! storage, its site states, and its calibration when the slot runs the
//! same browser (else it recalibrates at its next launch).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::Instant;

use super::fleet::state::SiteSnap;
use super::session_files::SessionFiles;
use crate::error::{Error, ErrorKind, Result};
use crate::identity::bundle;
use crate::identity::persona::Persona;
use crate::identity::slot::SlotIdentity;
use crate::lease::Leases;
use crate::request::SessionFormat as Format;

/// The format of what is inside a bundle.
const CONTENTS: u32 = 1;

/// A bundle's contents.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Contents {
    contents: u32,
    /// Unix seconds.
    exported_at: u64,
    from_slot: usize,
    profile: String,
    user_agent: String,
    /// Read as plain values and checked field by field ([`Contents::check`])
    /// before anything becomes a [`SlotIdentity`].
    identity: BundledIdentity,
    /// The proxy it went through: whole with `with_secrets`, else with its
    /// credentials redacted.
    proxy: Option<String>,
    proxy_secrets: bool,
    /// The calibration record (`calibration.json`), as JSON.
    calibration: Option<serde_json::Value>,
    /// Cookies and `localStorage`, as Playwright storageState.
    session: String,
    /// Per strategy: breaker, holds, tiers blocked, login state.
    sites: BTreeMap<String, SiteSnap>,
}

/// A bundle's identity as written: nothing of it is trusted until
/// [`Contents::check`] has held it against the formats the pool makes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundledIdentity {
    session: String,
    generation: u64,
    born: u64,
    /// The device it is (bundles from before personas have none: the
    /// slot draws a new one).
    #[serde(default)]
    persona: Option<Persona>,
}

/// A name a bundle may carry (a profile, a strategy, a marketplace, a
/// `web:HOST` site): letters, digits and `._-@:`, at most 128.
fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-@:".contains(c))
}

impl Contents {
    /// `Err` naming the first field that is not what the pool itself
    /// writes. A bundle is someone else's file: its values are data that
    /// end up in a proxy URL, file names and reports, so they are held to
    /// their formats before anything is seated.
    fn check(&self) -> std::result::Result<(), String> {
        crate::identity::slot::check_session(&self.identity.session)
            .map_err(|e| format!("identity.session: {e}"))?;
        if let Some(why) = self.identity.persona.as_ref().and_then(Persona::problem) {
            return Err(format!("identity.persona: {why}"));
        }
        if !plain_name(&self.profile) {
            return Err(
                "profile: not a profile name (letters, digits and `._-@:`, at most 128)".into(),
            );
        }
        if self.user_agent.len() > 1024 || self.user_agent.chars().any(char::is_control) {
            return Err("user_agent: longer than 1024 bytes or has control characters".into());
        }
        if let Some(bad) = self.sites.keys().find(|k| !plain_name(k)) {
            let shown: String = bad.chars().take(40).collect();
            return Err(format!(
                "sites: `{}` is not a strategy or site name",
                shown.escape_debug()
            ));
        }
        Ok(())
    }
}

/// What an export made.
#[derive(Debug, Serialize)]
pub struct Exported {
    pub slot: usize,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    pub size: usize,
    pub cookies: usize,
    pub origins: usize,
    pub strategies: Vec<String>,
    pub proxy_secrets: bool,
}

/// What an import did.
#[derive(Debug, Serialize)]
pub struct Imported {
    pub slot: usize,
    pub from_slot: usize,
    pub exported_at: u64,
    /// The proxy session the slot now renders its proxy with.
    pub proxy_session: String,
    /// The identity the slot had before, kept here.
    pub previous_kept_in: String,
    pub cookies: usize,
    pub local_storage: BTreeMap<String, usize>,
    pub strategies: Vec<String>,
    /// The calibration came along (same browser); else the slot
    /// recalibrates at its next launch.
    pub calibration_applied: bool,
    /// The login state per strategy after the import (asked of the site
    /// where the strategy has a probe page).
    pub login: BTreeMap<String, crate::strategy::LoginState>,
    /// Said when the bundle's proxy differs from what the slot renders.
    pub proxy_note: Option<String>,
}

/// Identity bundles in and out of the pool's slots.
#[derive(Clone)]
pub struct Bundles {
    leases: Arc<Leases>,
    files: SessionFiles,
    /// Turns for the key derivation (`security.bundle_key_derivations`).
    kdf: KeyTurns,
}

/// How long a bundle waits for its key derivation's turn.
const KDF_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Turns for the costly part of a bundle, its key derivation (Argon2id at
/// a bundle's cost may hold up to 1 GiB for seconds): at most `turns` at
/// once, the others waiting up to [`KDF_WAIT`].
#[derive(Clone)]
struct KeyTurns {
    sem: Arc<tokio::sync::Semaphore>,
    turns: usize,
    /// How long one waits for its turn ([`KDF_WAIT`]).
    wait: std::time::Duration,
}

impl KeyTurns {
    fn new(turns: usize) -> Self {
        let turns = turns.clamp(1, 16);
        KeyTurns {
            sem: Arc::new(tokio::sync::Semaphore::new(turns)),
            turns,
            wait: KDF_WAIT,
        }
    }

    /// Run `work` (a seal or an open) in its turn, off the runtime threads;
    /// refused with `retry_after` when no turn comes within [`KDF_WAIT`].
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let permit = tokio::time::timeout(self.wait, self.sem.clone().acquire_owned())
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Busy,
                    format!(
                        "other identity bundles are deriving their keys (security.bundle_key_derivations = {}); retry after {} s",
                        self.turns,
                        self.wait.as_secs()
                    ),
                )
                .with_retry_after(self.wait)
            })?
            .map_err(|_| Error::new(ErrorKind::Unavailable, "the pool is shutting down"))?;
        tokio::task::spawn_blocking(move || {
            let _turn = permit;
            work()
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Internal, format!("identity bundle: {e}")))?
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Bundles {
    pub fn new(leases: Arc<Leases>, key_derivations: usize) -> Self {
        Bundles {
            files: SessionFiles::new(leases.clone()),
            leases,
            kdf: KeyTurns::new(key_derivations),
        }
    }

    /// The slot `slot`'s identity, sealed with `passphrase`.
    pub async fn export(
        &self,
        slot: usize,
        passphrase: &str,
        with_secrets: bool,
    ) -> Result<Exported> {
        let identities = self.leases.identities();
        let (profile, me) = (identities.profile_of(slot)?, identities.record(slot)?);
        let session = self
            .files
            .export_session(slot, Format::StorageState, None)
            .await?;
        let parsed = crate::identity::session::parse(&session, Format::StorageState)?;
        let now = Instant::now();
        let sites: BTreeMap<String, SiteSnap> = {
            let mut router = self.leases.router();
            router
                .sites
                .iter_mut()
                .filter_map(|(strategy, sites)| {
                    Some((strategy.clone(), SiteSnap::of(sites.get_mut(&slot)?, now)))
                })
                .collect()
        };
        let calibration = identities.calibration_record(slot)?;
        let contents = Contents {
            contents: CONTENTS,
            exported_at: unix_now(),
            from_slot: slot,
            profile: profile.name.clone(),
            user_agent: profile.user_agent.clone(),
            identity: BundledIdentity {
                session: me.session,
                generation: me.generation,
                born: me.born,
                persona: me.persona,
            },
            proxy: identities.upstream(slot)?.map(|p| {
                if with_secrets {
                    p.expose().to_string()
                } else {
                    p.redacted()
                }
            }),
            proxy_secrets: with_secrets,
            calibration,
            session,
            sites,
        };
        let plain = zeroize::Zeroizing::new(
            serde_json::to_vec(&contents)
                .map_err(|e| Error::new(ErrorKind::Internal, format!("identity bundle: {e}")))?,
        );
        let pass = zeroize::Zeroizing::new(passphrase.to_string());
        let bytes = self.kdf.run(move || bundle::seal(&plain, &pass)).await?;
        let out = Exported {
            slot,
            size: bytes.len(),
            bytes,
            cookies: parsed.cookies.len(),
            origins: parsed.origins.len(),
            strategies: contents.sites.keys().cloned().collect(),
            proxy_secrets: with_secrets,
        };
        self.leases.events().emit(
            "identity_exported",
            Some(slot),
            None,
            json!({"cookies": out.cookies, "origins": out.origins,
                   "strategies": out.strategies, "proxy_secrets": with_secrets}),
        );
        Ok(out)
    }

    /// Open `bytes` with `passphrase` and seat the identity in slot `slot`.
    pub async fn import(&self, slot: usize, bytes: Vec<u8>, passphrase: &str) -> Result<Imported> {
        let identities = self.leases.identities();
        identities.check(slot)?;
        let pass = zeroize::Zeroizing::new(passphrase.to_string());
        let plain = self.kdf.run(move || bundle::open(&bytes, &pass)).await?;
        let plain = zeroize::Zeroizing::new(plain);
        let c: Contents = serde_json::from_slice(&plain).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("the identity bundle opened but its contents are not readable: {e}"),
            )
        })?;
        if c.contents != CONTENTS {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the identity bundle's contents are version {}; this idpool reads {CONTENTS}",
                    c.contents
                ),
            ));
        }
        c.check().map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("the identity bundle's {e}; slot {slot} is unchanged"),
            )
            .retryable(false)
        })?;
        // Everything is read before the slot is touched.
        let parsed = crate::identity::session::parse(&c.session, Format::StorageState)?;
        let retired = self.leases.retire(slot, "identity import").await?;
        let identity = SlotIdentity {
            session: c.identity.session.clone(),
            generation: identities.record(slot)?.generation,
            born: c.identity.born,
            persona: Some(c.identity.persona.clone().unwrap_or_else(Persona::fresh)),
        };
        identities.take_identity(slot, &identity)?;
        let calibration_applied = match c.calibration.clone() {
            Some(r) => identities.adopt_calibration(slot, r)?,
            None => false,
        };
        let imported = self
            .files
            .import_session(slot, &c.session, Format::StorageState)
            .await?;
        let now = Instant::now();
        {
            let cfg = self.leases.config().breaker;
            let mut router = self.leases.router();
            for (strategy, snap) in &c.sites {
                let mut site = snap.restore(cfg, now);
                // The login states the import just asked the site for win
                // over the bundle's.
                if let Some(m) = router.sites.get(strategy)
                    && let Some(l) = m.get(&slot).and_then(|x| x.login.clone())
                {
                    site.login = Some(l);
                }
                router.site(slot, strategy, cfg);
                if let Some(m) = router.sites.get_mut(strategy) {
                    m.insert(slot, site);
                }
            }
        }
        self.leases.wake();
        let rendered = identities.upstream(slot)?.map(|p| p.redacted());
        let bundled = c.proxy.as_deref().map(|p| {
            crate::config::ProxyUrl::parse(p)
                .map_or_else(|_| "[unreadable]".to_string(), |u| u.redacted())
        });
        let proxy_note = match (&bundled, &rendered) {
            (Some(b), Some(r)) if b != r => Some(format!(
                "the bundle went through {b}; this slot renders {r} with the same proxy session"
            )),
            (Some(b), None) => Some(format!(
                "the bundle went through {b}, and this slot has no proxy: give it one (`[[pool.slot]] proxy`) for the same IP"
            )),
            _ => None,
        };
        let out = Imported {
            slot,
            from_slot: c.from_slot,
            exported_at: c.exported_at,
            proxy_session: identity.session.clone(),
            previous_kept_in: retired.retired_to.clone(),
            cookies: imported.cookies,
            local_storage: imported.local_storage,
            strategies: c.sites.keys().cloned().collect(),
            calibration_applied,
            login: (self.leases.registry().all())
                .filter(|st| st.login().is_some())
                .map(|st| {
                    (
                        st.name().to_string(),
                        self.leases.sites().login(slot, st.name()).state,
                    )
                })
                .collect(),
            proxy_note,
        };
        let _ = parsed;
        self.leases.events().emit(
            "identity_imported",
            Some(slot),
            None,
            json!({"from_slot": out.from_slot, "cookies": out.cookies,
                   "strategies": out.strategies, "calibration_applied": calibration_applied}),
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents() -> Contents {
        Contents {
            contents: CONTENTS,
            exported_at: 1,
            from_slot: 0,
            profile: "default".into(),
            user_agent: "Mozilla/5.0 (X11; Linux x86_64)".into(),
            identity: BundledIdentity {
                session: "0a1b2c3d4e5f".into(),
                generation: 0,
                born: 1,
                persona: Some(Persona::draw(3)),
            },
            proxy: None,
            proxy_secrets: false,
            calibration: None,
            session: "{}".into(),
            sites: BTreeMap::new(),
        }
    }

    #[test]
    fn each_value_a_bundle_carries_is_held_to_its_format_and_named() {
        assert_eq!(contents().check(), Ok(()));
        let now = Instant::now();
        let cfg = crate::config::BreakerConfig::default();
        let site = || {
            SiteSnap::of(
                &mut crate::routing::Site::new(crate::routing::Breaker::new(cfg)),
                now,
            )
        };
        let mut ok = contents();
        for name in ["testshop", "amazon@amazon.de", "web:shop.example.test"] {
            ok.sites.insert(name.into(), site());
        }
        assert_eq!(ok.check(), Ok(()));
        type Spoil = fn(&mut Contents);
        let bad: [(&str, Spoil); 7] = [
            // A persona is its seed's draw: a planted font list is refused.
            ("identity.persona", |c| {
                if let Some(p) = c.identity.persona.as_mut() {
                    p.fonts.push("../../etc".into());
                }
            }),
            ("identity.session", |c| {
                c.identity.session = "x@127.0.0.2:18999/#".into()
            }),
            ("identity.session", |c| c.identity.session = "a".repeat(65)),
            ("profile", |c| c.profile = "../etc".into()),
            ("profile", |c| c.profile = String::new()),
            ("user_agent", |c| {
                c.user_agent = "Mozilla\r\nX-Evil: 1".into()
            }),
            ("sites", |c| {
                let s = c.sites.values().next().cloned();
                if let Some(s) = s {
                    c.sites.insert("web:evil/../x".into(), s);
                }
            }),
        ];
        for (field, spoil) in bad {
            let mut c = contents();
            c.sites.insert("testshop".into(), site());
            spoil(&mut c);
            let e = c.check().expect_err(field);
            assert!(e.starts_with(field), "{field}: {e}");
        }
    }

    /// A key derivation held until the test says: (its release, its end).
    fn held(
        turns: &KeyTurns,
    ) -> (
        std::sync::mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<u8>>,
    ) {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let turns = turns.clone();
        let job = tokio::spawn(async move {
            turns
                .run(move || {
                    let _ = wait.recv();
                    Ok(1)
                })
                .await
        });
        (go, job)
    }

    // Real time: a key derivation runs on a blocking thread, and tokio's
    // paused clock does not move while one does.
    #[tokio::test]
    async fn one_key_derivation_at_a_time_and_the_others_wait_then_are_refused() {
        let wait = std::time::Duration::from_millis(300);
        let turns = KeyTurns {
            wait,
            ..KeyTurns::new(1)
        };
        let (release, first) = held(&turns);
        while turns.sem.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        // A second one waits its turn; past the wait it is refused with
        // retry_after, and nothing of it ran.
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = {
            let ran = ran.clone();
            turns.run(move || {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(2u8)
            })
        };
        let e = r.await.expect_err("no turn within the wait");
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        assert_eq!(e.retry_after(), Some(wait));
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
        // Once the first is done, the next one runs.
        release.send(()).expect("release");
        assert_eq!(first.await.expect("join").expect("first"), 1);
        assert_eq!(turns.run(|| Ok(3u8)).await.expect("its turn"), 3);
        // Two turns: two at once.
        let two = KeyTurns::new(2);
        let (r1, a) = held(&two);
        let (r2, b) = held(&two);
        while two.sem.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        r1.send(()).expect("release");
        r2.send(()).expect("release");
        assert_eq!(
            a.await.expect("join").expect("a") + b.await.expect("join").expect("b"),
            2
        );
    }
}
