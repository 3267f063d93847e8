//! The strategy registry: strategies by name and by host. A strategy with
//! marketplaces brings one strategy per marketplace (`amazon@amazon.de`):
//! found by name and host like the others, listed under their family.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{Strategy, TomlStrategy};
use crate::diag::Diagnostic;
use crate::identity::profile::toml_files;

/// All loaded strategies.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    by_name: BTreeMap<String, Arc<dyn Strategy>>,
    /// Marketplaces' strategies other than the default, by name.
    variants: BTreeMap<String, Arc<dyn Strategy>>,
}

impl Registry {
    /// Load every `*.toml` of `dir`. A broken file is reported and skipped; the rest load.
    pub fn load_dir(dir: &Path) -> (Self, Vec<Diagnostic>) {
        let mut reg = Registry::default();
        let mut problems = Vec::new();
        for path in toml_files(dir) {
            match TomlStrategy::load(&path) {
                Ok(s) => {
                    if let Err(d) = reg.add(Arc::new(s)) {
                        problems.push(d);
                    }
                }
                Err(d) => problems.push(d),
            }
        }
        (reg, problems)
    }

    /// Add a strategy; its name and hosts must not clash with one already here.
    pub fn add(&mut self, s: Arc<dyn Strategy>) -> Result<(), Diagnostic> {
        let variants = s.variants().to_vec();
        self.add_one(s.clone(), false)?;
        for v in variants {
            self.add_one(v, true)?;
        }
        Ok(())
    }

    fn add_one(&mut self, s: Arc<dyn Strategy>, variant: bool) -> Result<(), Diagnostic> {
        let path = s
            .source()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| format!("<compiled strategy {}>", s.name()).into());
        if let Some(prev) = self.get(s.name()) {
            return Err(Diagnostic::file(
                &path,
                format!(
                    "duplicate strategy name `{}` (already defined in {})",
                    s.name(),
                    prev.source().unwrap_or(Path::new("<compiled>")).display()
                ),
            ));
        }
        for other in self.all() {
            if let Some(h) = s.hosts().iter().find(|h| other.hosts().contains(h)) {
                return Err(Diagnostic::file(
                    &path,
                    format!(
                        "host `{h}` is already covered by strategy `{}`",
                        other.name()
                    ),
                ));
            }
        }
        let map = if variant {
            &mut self.variants
        } else {
            &mut self.by_name
        };
        map.insert(s.name().to_string(), s);
        Ok(())
    }

    /// A strategy by name, a marketplace's (`amazon@amazon.de`) too.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Strategy>> {
        self.by_name.get(name).or_else(|| self.variants.get(name))
    }

    /// The strategy covering `host`; an exact host wins over a wildcard.
    pub fn for_host(&self, host: &str) -> Option<&Arc<dyn Strategy>> {
        let host = host.to_ascii_lowercase();
        self.all()
            .find(|s| s.hosts().contains(&host))
            .or_else(|| self.all().find(|s| s.covers(&host)))
    }

    /// The strategy a call means: `name` (a family or a marketplace's), on
    /// the `marketplace` it names, or on the one `url`'s host implies.
    pub fn pick(
        &self,
        name: &str,
        marketplace: Option<&str>,
        url: Option<&str>,
    ) -> Result<Arc<dyn Strategy>, String> {
        let named = self
            .get(name)
            .ok_or_else(|| format!("unknown strategy `{name}`"))?;
        let family = self.get(named.family()).unwrap_or(named);
        let by_url = url
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(str::to_string))
            .and_then(|h| with_variants(family).find(|s| s.covers(&h)).cloned());
        let Some(m) = marketplace else {
            return Ok(by_url.unwrap_or_else(|| named.clone()));
        };
        let chosen = with_variants(family)
            .find(|s| s.marketplace() == Some(m))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "strategy `{}` has no marketplace `{m}` (it has: {})",
                    family.name(),
                    family.marketplaces().join(", ")
                )
            })?;
        match by_url {
            Some(u) if u.name() != chosen.name() => Err(format!(
                "the item URL is on marketplace `{}`, but `marketplace` says `{m}`",
                u.marketplace().unwrap_or(u.name())
            )),
            _ => Ok(chosen),
        }
    }

    /// The strategies, one per file (a marketplace's are under their family).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Strategy>> {
        self.by_name.values()
    }

    /// Every strategy, the marketplaces' too (for what is kept per site:
    /// the guard's hosts, login probes, drift).
    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn Strategy>> {
        self.by_name.values().chain(self.variants.values())
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// A family and its marketplaces' strategies, the default first.
pub fn with_variants(family: &Arc<dyn Strategy>) -> impl Iterator<Item = &Arc<dyn Strategy>> {
    std::iter::once(family).chain(family.variants().iter())
}
