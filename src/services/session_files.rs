//! Sessions in and out of a slot: its jar's cookies and its browser's
//! `localStorage`, from and to the files of `crate::identity::session`.
//!
//! An import parses the whole file first (a bad one changes nothing),
//! merges the cookies into the jar and saves it atomically, sets them in
//! the running browser too, and writes each origin's `localStorage` into
//! the slot's Chromium profile. `<slot>/session.json` (0600) remembers which
//! origins hold storage (for exports) and when each declared file
//! (`[[pool.slot]] session`) was last imported. Cookie values never reach
//! logs or events: only names of domains and counts do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{Error, ErrorKind, Result};
use crate::identity::jar::Jar;
use crate::identity::session::{self, Session};
use crate::lease::Leases;
use crate::request::SessionFormat as Format;

/// What an import did.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    pub slot: usize,
    /// The format read (after `auto`).
    pub format: &'static str,
    /// Cookies the jar took.
    pub cookies: usize,
    /// Cookies per domain.
    pub domains: BTreeMap<String, usize>,
    /// Cookies the jar would not take (a domain it refuses, say).
    pub rejected: usize,
    /// Each cookie the jar refused: its position among the file's cookies,
    /// name, domain and reason (never its value).
    pub refused: Vec<crate::identity::jar::Refusal>,
    /// `localStorage` items per origin, written into the slot's Chromium.
    pub local_storage: BTreeMap<String, usize>,
    /// The cookies went into the running browser as well.
    pub browser: bool,
    /// The login state, per strategy with a `probe_url` whose cookie domain
    /// the file covers, asked right after the import.
    pub login: BTreeMap<String, crate::strategy::LoginState>,
}

/// `<slot>/session.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Origins whose `localStorage` an import wrote (what an export reads).
    #[serde(default)]
    origins: Vec<String>,
    /// Declared session files: path → the modification time (unix
    /// seconds) of the copy last imported.
    #[serde(default)]
    imported: BTreeMap<PathBuf, u64>,
}

impl Record {
    fn path(dir: &Path) -> PathBuf {
        dir.join("session.json")
    }

    fn load(dir: &Path) -> Record {
        std::fs::read(Self::path(dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("session record: {e}")))?;
        crate::fsutil::write_atomically(&Self::path(dir), &bytes)
    }
}

/// Session files in and out of the pool's slots.
#[derive(Clone)]
pub struct SessionFiles {
    leases: std::sync::Arc<Leases>,
}

impl SessionFiles {
    pub fn new(leases: std::sync::Arc<Leases>) -> Self {
        SessionFiles { leases }
    }

    /// Merge a session file's cookies (and `localStorage`) into slot `slot`.
    pub async fn import_session(
        &self,
        slot: usize,
        text: &str,
        format: Format,
    ) -> Result<Imported> {
        let identities = self.leases.identities();
        let (browser, dir) = (identities.browser(slot)?, identities.dir(slot)?);
        let read = resolve(text, format);
        let parsed = session::parse(text, format)?;
        // From here on only what the jar took: a refused cookie goes
        // neither into the browser nor into the login probes.
        let (mut imported, parsed) = merge_cookies(identities.jar(slot)?, slot, &parsed, read)?;
        if !parsed.cookies.is_empty() && browser.facts().running {
            let mut turn = browser.turn().await?;
            turn.set_cookies(&parsed.cookies).await?;
            imported.browser = true;
        }
        if !parsed.origins.is_empty() {
            browser
                .turn()
                .await?
                .write_local_storage(&parsed.origins)
                .await
                .map_err(|e| e.context(format!("slot {slot}: localStorage")))?;
            let mut record = Record::load(dir);
            for o in &parsed.origins {
                imported
                    .local_storage
                    .insert(o.origin.clone(), o.local_storage.len());
                if !record.origins.contains(&o.origin) {
                    record.origins.push(o.origin.clone());
                }
            }
            record.save(dir)?;
        }
        imported.login = self.probe_logins(slot, &parsed).await;
        self.leases.events().emit(
            "session_imported",
            Some(slot),
            None,
            json!({"format": imported.format, "cookies": imported.cookies,
                   "refused": imported.refused.len(),
                   "domains": imported.domains.keys().collect::<Vec<_>>(),
                   "origins": imported.local_storage.len()}),
        );
        Ok(imported)
    }

    /// The slot `slot`'s session as `format`, only `domain`'s when given. The
    /// `localStorage` of the origins imports wrote (and of `https://<domain>`)
    /// is read from its Chromium when the slot has one.
    pub async fn export_session(
        &self,
        slot: usize,
        format: Format,
        domain: Option<&str>,
    ) -> Result<String> {
        let identities = self.leases.identities();
        let (browser, dir) = (identities.browser(slot)?, identities.dir(slot)?);
        let mut out = Session {
            cookies: identities.jar(slot)?.export_all(),
            origins: Vec::new(),
        };
        if matches!(format, Format::StorageState | Format::Auto) {
            let mut origins = Record::load(dir).origins;
            if let Some(d) = domain {
                let own = format!("https://{}", d.trim_start_matches('.'));
                if !origins.contains(&own) {
                    origins.push(own);
                }
            }
            let has_profile = browser.spec().user_data_dir.exists();
            if !origins.is_empty() && (has_profile || browser.facts().running) {
                out.origins = browser.turn().await?.read_local_storage(&origins).await?;
            }
        }
        if let Some(d) = domain {
            out = out.only_domain(d);
        }
        self.leases.events().emit(
            "session_exported",
            Some(slot),
            None,
            json!({"format": format.as_str(), "cookies": out.cookies.len(), "origins": out.origins.len()}),
        );
        Ok(session::render(&out, format))
    }

    /// Ask each strategy whose cookies the session carries (and that has a
    /// `probe_url`) whether slot `slot` is signed in now.
    async fn probe_logins(
        &self,
        slot: usize,
        parsed: &Session,
    ) -> BTreeMap<String, crate::strategy::LoginState> {
        let mut out = BTreeMap::new();
        let registry = self.leases.registry();
        for s in registry.all() {
            let Some(url) = s.login().and_then(|l| l.probe_url.clone()) else {
                continue;
            };
            let domain = s
                .cookie_domain()
                .trim_start_matches('.')
                .to_ascii_lowercase();
            let covered = parsed
                .cookies
                .iter()
                .any(|c| crate::identity::jar::domains_related(&c.domain, &domain));
            if !covered {
                continue;
            }
            let Ok(lease) = self.leases.next_slot(s.name(), Some(slot), None).await else {
                continue;
            };
            let req = crate::request::FetchRequest::get(url);
            let outcome = match lease.http(req, |f, _| f.outcome).await {
                Ok((_, o)) => o,
                Err(_) => crate::strategy::Outcome::Failed,
            };
            lease.finish(outcome);
            out.insert(
                s.name().to_string(),
                self.leases.sites().login(slot, s.name()).state,
            );
        }
        out
    }

    /// Import each `[[pool.slot]] session` file that changed since its last
    /// import (at start). A bad file is reported and changes nothing.
    pub fn import_declared_sessions(&self, declared: &[(usize, PathBuf)]) {
        for (slot, path) in declared {
            if let Err(e) = self.import_declared(*slot, path) {
                tracing::error!(slot, file = %path.display(), error = %e, "session file not imported; the slot keeps its jar");
                self.leases.events().emit(
                    "session_import_failed",
                    Some(*slot),
                    None,
                    json!({"file": path.display().to_string(), "error": e.to_string()}),
                );
            }
        }
    }

    fn import_declared(&self, slot: usize, path: &Path) -> Result<()> {
        let identities = self.leases.identities();
        let dir = identities.dir(slot)?;
        let mtime = modified(path)?;
        let mut record = Record::load(dir);
        if record.imported.get(path).is_some_and(|t| *t >= mtime) {
            return Ok(());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        let parsed = session::parse(&text, Format::Auto)?;
        let jar = identities.jar(slot)?;
        let (imported, _) = merge_cookies(jar, slot, &parsed, resolve(&text, Format::Auto))?;
        tracing::info!(slot, file = %path.display(), cookies = imported.cookies, "session file imported");
        record.imported.insert(path.to_path_buf(), mtime);
        record.save(dir)?;
        if !parsed.origins.is_empty() {
            // localStorage needs the browser: written in the background.
            let (files, text) = (self.clone(), text.clone());
            tokio::spawn(async move {
                if let Err(e) = files.import_session(slot, &text, Format::Auto).await {
                    tracing::warn!(slot, error = %e, "session file: localStorage not written");
                }
            });
        }
        Ok(())
    }
}

/// Merge `parsed`'s cookies into slot `slot`'s `jar` and save it; what it
/// did, and the session less the cookies the jar refused.
fn merge_cookies(
    jar: &Jar,
    slot: usize,
    parsed: &Session,
    format: &'static str,
) -> Result<(Imported, Session)> {
    let (report, accepted) = session::merge(jar, parsed);
    jar.save()?;
    let imported = Imported {
        slot,
        format,
        cookies: report.taken,
        domains: accepted.counts(),
        rejected: report.refused.len(),
        refused: report.refused,
        local_storage: BTreeMap::new(),
        browser: false,
        login: BTreeMap::new(),
    };
    Ok((imported, accepted))
}

/// The format `auto` settles on for `text`.
fn resolve(text: &str, format: Format) -> &'static str {
    match format {
        Format::Auto => session::detect(text).as_str(),
        f => f.as_str(),
    }
}

fn modified(path: &Path) -> Result<u64> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
    Ok(meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0))
}
