//! The audit log: one JSON line per call, allowed or denied. Arguments are
//! redacted (anything that looks like a secret) and truncated. The file is
//! opened for append and re-opened on request (SIGHUP, after logrotate moved it).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Map, Value};

// The redaction itself lives in `diag` (below `pool`, which shows
// `last_error` and events): the audit line and those share one rule.
use crate::diag::is_secret_name as is_secret;
pub use crate::diag::redact_text;

/// Longest string argument kept whole.
pub const MAX_STRING: usize = 256;
/// Longest serialized `args` kept whole.
pub const MAX_ARGS: usize = 2048;

/// One call as the audit log records it (DESIGN.md §7).
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    /// RFC 3339 UTC.
    pub ts: String,
    pub principal: String,
    pub role: String,
    pub transport: String,
    pub session: Option<String>,
    pub method: String,
    pub tool: Option<String>,
    pub args: Value,
    pub ok: bool,
    pub error: Option<String>,
    pub duration_ms: u64,
    /// The slot (identity) that served the call, the tier, and the tries
    /// it took (a tool's [`crate::tools::Provenance`]).
    pub slot: Option<usize>,
    pub tier: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<usize>,
    /// A call that crossed the fleet: `to <node>` where it was forwarded
    /// from, `from <node>` where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop: Option<String>,
}

/// The append-only audit file.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<File>>,
    /// Lines written since the last `fdatasync`.
    dirty: std::sync::atomic::AtomicBool,
}

/// How often written lines reach the disk ([`AuditLog::sync`], by the daemon).
pub const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl AuditLog {
    /// Open (create, 0600) `path` for append.
    pub fn open(path: &Path) -> crate::Result<AuditLog> {
        let file = open(path)?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(Some(file)),
            dirty: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record. A write failure is logged, never returned: a call is
    /// not failed because the audit disk is full, but the operator hears of it.
    pub fn record(&self, rec: &AuditRecord) {
        let mut line = match serde_json::to_string(rec) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("audit: cannot encode a record: {e}");
                return;
            }
        };
        line.push('\n');
        let mut guard = self.file.lock();
        if guard.is_none() {
            *guard = open(&self.path).ok();
        }
        match guard.as_mut() {
            Some(f) => {
                // One write per line: a crash leaves whole lines or none.
                if let Err(e) = f.write_all(line.as_bytes()) {
                    tracing::error!("audit: cannot write {}: {e}", self.path.display());
                }
                self.dirty.store(true, std::sync::atomic::Ordering::Release);
            }
            None => tracing::error!(
                "audit: {} is not open; record lost: {line}",
                self.path.display()
            ),
        }
    }

    /// Close and re-open the file (logrotate moved it away).
    pub fn reopen(&self) -> crate::Result<()> {
        let new = open(&self.path)?;
        let mut guard = self.file.lock();
        if let Some(old) = guard.as_mut() {
            let _ = old.sync_data();
        }
        *guard = Some(new);
        Ok(())
    }

    /// `fdatasync` the lines written since the last one (the daemon calls it
    /// every [`SYNC_EVERY`]: a power cut loses at most that much).
    pub fn sync(&self) {
        if !self.dirty.swap(false, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        // A second handle on the same file: writers are not held up while
        // the disk syncs.
        let handle = self.file.lock().as_ref().and_then(|f| f.try_clone().ok());
        if let Some(f) = handle
            && let Err(e) = f.sync_data()
        {
            tracing::error!("audit: cannot sync {}: {e}", self.path.display());
        }
    }

    /// Flush to disk (shutdown).
    pub fn flush(&self) {
        if let Some(f) = self.file.lock().as_mut() {
            let _ = f.flush();
            let _ = f.sync_data();
        }
    }
}

fn open(path: &Path) -> crate::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| crate::Error::io(format!("cannot open audit log {}", path.display()), e))
}

/// Arguments as they may be written down: secrets replaced, long strings cut,
/// and the whole value cut when it is still too long.
pub fn redact(args: &Value) -> Value {
    let cleaned = clean(args, None);
    let text = cleaned.to_string();
    if text.len() > MAX_ARGS {
        let cut: String = text.chars().take(MAX_ARGS).collect();
        Value::String(format!("{cut}… [truncated, {} bytes]", text.len()))
    } else {
        cleaned
    }
}

fn clean(v: &Value, name: Option<&str>) -> Value {
    if name.is_some_and(is_secret) {
        return Value::String("[redacted]".into());
    }
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), clean(v, Some(k))))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| clean(v, None)).collect()),
        // Redact first, then cut: a long URL keeps no password either.
        Value::String(s) => {
            let s = redact_text(s);
            let n = s.chars().count();
            if n > MAX_STRING {
                let cut: String = s.chars().take(MAX_STRING).collect();
                Value::String(format!("{cut}… [{n} chars]"))
            } else {
                Value::String(s)
            }
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_and_long_values_cut() {
        let v = redact(&json!({
            "url": "http://user:pw@127.0.0.1:8080/x",
            "api_key": "idp_secret",
            "params": {"Cookie": "a=b", "item": "B1"},
            "body": "x".repeat(1000),
        }));
        let s = v.to_string();
        assert!(
            !s.contains("idp_secret") && !s.contains("pw@") && !s.contains("a=b"),
            "{s}"
        );
        assert!(s.contains("[redacted]@127.0.0.1"), "{s}");
        let long = redact(
            &json!({"url": format!("https://u:hunter2@h.test/{}?token=abc&q=1", "x".repeat(400))}),
        );
        let long = long.to_string();
        assert!(!long.contains("hunter2") && !long.contains("abc"), "{long}");
        assert!(long.contains("chars]"), "{long}");
        assert_eq!(
            redact_text("`http://a:b@h.test/x?api_key=k` is not valid"),
            "`http://[redacted]@h.test/x?api_key=[redacted]` is not valid"
        );
        assert!(s.contains("[1000 chars]"), "{s}");
        let typed = redact(&json!({"session": "abc", "ref": "e3", "text": "hunter2"}));
        assert_eq!(
            typed,
            json!({"session": "[redacted]", "ref": "e3", "text": "[redacted]"})
        );
        assert_eq!(v["params"]["item"], "B1");
        let big = redact(&json!({"list": vec!["y".repeat(200); 30]}));
        assert!(big.as_str().unwrap().contains("[truncated"), "{big}");
    }

    #[test]
    fn reopen_follows_a_rotated_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(&path).unwrap();
        let rec = AuditRecord {
            ts: crate::events::now_rfc3339(),
            principal: "p".into(),
            role: "viewer".into(),
            transport: "http".into(),
            session: None,
            method: "tools/call".into(),
            tool: Some("scrape".into()),
            args: json!({}),
            ok: false,
            error: Some("denied".into()),
            duration_ms: 0,
            slot: None,
            tier: None,
            attempts: None,
            hop: None,
        };
        log.record(&rec);
        // Written lines wait for the next sync (the daemon's, every 100 ms).
        assert!(log.dirty.load(std::sync::atomic::Ordering::Acquire));
        log.sync();
        assert!(!log.dirty.load(std::sync::atomic::Ordering::Acquire));
        std::fs::rename(&path, dir.path().join("audit.log.1")).unwrap();
        log.record(&rec); // still goes to the moved file
        log.reopen().unwrap();
        log.record(&rec);
        let rotated = std::fs::read_to_string(dir.path().join("audit.log.1")).unwrap();
        let fresh = std::fs::read_to_string(&path).unwrap();
        assert_eq!(rotated.lines().count(), 2);
        assert_eq!(fresh.lines().count(), 1);
        let line: Value = serde_json::from_str(fresh.trim()).unwrap();
        assert_eq!(line["ok"], false);
        assert_eq!(line["tool"], "scrape");
    }
}
