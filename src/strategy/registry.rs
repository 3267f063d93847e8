//! The strategy registry: strategies by name and by host.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{Strategy, TomlStrategy};
use crate::diag::Diagnostic;
use crate::profile::toml_files;

/// All loaded strategies.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    by_name: BTreeMap<String, Arc<dyn Strategy>>,
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
        let path = s
            .source()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| format!("<compiled strategy {}>", s.name()).into());
        if let Some(prev) = self.by_name.get(s.name()) {
            return Err(Diagnostic::file(
                &path,
                format!(
                    "duplicate strategy name `{}` (already defined in {})",
                    s.name(),
                    prev.source().unwrap_or(Path::new("<compiled>")).display()
                ),
            ));
        }
        for other in self.by_name.values() {
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
        self.by_name.insert(s.name().to_string(), s);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Strategy>> {
        self.by_name.get(name)
    }

    /// The strategy covering `host`; an exact host wins over a wildcard.
    pub fn for_host(&self, host: &str) -> Option<&Arc<dyn Strategy>> {
        let host = host.to_ascii_lowercase();
        self.by_name
            .values()
            .find(|s| s.hosts().contains(&host))
            .or_else(|| self.by_name.values().find(|s| s.covers(&host)))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Strategy>> {
        self.by_name.values()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
