//! The audit log: one JSON line per call, allowed or denied. Arguments are
//! redacted (anything that looks like a secret) and truncated. The file is
//! opened for append and re-opened on request (SIGHUP, after logrotate moved it).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    /// The recordings of browser work the call made (`[recording]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recordings: Vec<String>,
}

/// The append-only audit file.
///
/// Group commit: a call's line joins a queue; the first caller to reach
/// the file writes everything queued in one `write`, and the callers whose
/// lines that write carried return without a syscall of their own. Every
/// line is in the file (the kernel's page cache) before its call is
/// answered, so a killed daemon loses no answered call's line; under load
/// one `write` carries many calls. The daemon `fdatasync`s every
/// [`SYNC_EVERY`]: a machine crash loses at most that window.
pub struct AuditLog {
    path: PathBuf,
    /// Lines waiting for a write, and how many lines were ever queued.
    queue: Mutex<Queue>,
    /// The file; holding it is the right to write the queue.
    file: Mutex<Option<File>>,
    /// Lines written to the file so far (by queue number).
    written: AtomicU64,
    /// Lines written since the last `fdatasync`.
    dirty: AtomicBool,
    /// `write` calls made (`/metrics` counts the same as
    /// `idpool_audit_writes_total`).
    writes: AtomicU64,
}

#[derive(Default)]
struct Queue {
    buf: Vec<u8>,
    queued: u64,
    /// The buffer the last write emptied, kept for its capacity.
    spare: Vec<u8>,
}

/// How often written lines reach the disk ([`AuditLog::sync`], by the daemon).
pub const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl AuditLog {
    /// Open (create, 0600) `path` for append. A last line a crash tore (no
    /// newline at the end of the file) is cut off first, with a warning:
    /// the log holds whole lines only.
    pub fn open(path: &Path) -> crate::Result<AuditLog> {
        let file = open(path)?;
        mend_tail(&file, path);
        Ok(AuditLog {
            path: path.to_path_buf(),
            queue: Mutex::new(Queue::default()),
            file: Mutex::new(Some(file)),
            written: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            writes: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `write` calls made since the log was opened.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Append one record; it is in the file when this returns. A write
    /// failure is logged, never returned: a call is not failed because the
    /// audit disk is full, but the operator hears of it.
    pub fn record(&self, rec: &AuditRecord) {
        let mine = {
            let mut q = self.queue.lock();
            let start = q.buf.len();
            if let Err(e) = serde_json::to_writer(&mut q.buf, rec) {
                q.buf.truncate(start);
                drop(q);
                tracing::error!("audit: cannot encode a record: {e}");
                return;
            }
            q.buf.push(b'\n');
            q.queued += 1;
            q.queued
        };
        let mut guard = self.file.lock();
        if self.written.load(Ordering::Acquire) >= mine {
            // Another caller's write carried this line.
            return;
        }
        let (mut batch, upto) = {
            let mut q = self.queue.lock();
            let spare = std::mem::take(&mut q.spare);
            (std::mem::replace(&mut q.buf, spare), q.queued)
        };
        if guard.is_none() {
            *guard = open(&self.path).ok();
        }
        match guard.as_mut() {
            Some(f) => {
                // One write per batch of whole lines.
                if let Err(e) = f.write_all(&batch) {
                    tracing::error!("audit: cannot write {}: {e}", self.path.display());
                }
                self.writes.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("idpool_audit_writes_total").increment(1);
                self.dirty.store(true, Ordering::Release);
            }
            None => tracing::error!(
                "audit: {} is not open; {} records lost: {}",
                self.path.display(),
                batch.iter().filter(|b| **b == b'\n').count(),
                String::from_utf8_lossy(&batch)
            ),
        }
        self.written.store(upto, Ordering::Release);
        drop(guard);
        batch.clear();
        // Kept for the next write, unless a burst made it large.
        if batch.capacity() <= 256 * 1024 {
            let mut q = self.queue.lock();
            if q.spare.capacity() < batch.capacity() {
                q.spare = batch;
            }
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
        if !self.dirty.swap(false, Ordering::AcqRel) {
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

/// Cut a torn last line (a crash mid-`write`) off the end of the log.
fn mend_tail(file: &File, path: &Path) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return;
    };
    if len == 0 {
        return;
    }
    // The log's own handle is append-only: read through another.
    let Ok(mut f) = File::open(path) else {
        return;
    };
    let from = len.saturating_sub(64 * 1024);
    let mut tail = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err()
        || (&mut f).take(len - from).read_to_end(&mut tail).is_err()
    {
        return;
    }
    if tail.last() == Some(&b'\n') {
        return;
    }
    let keep = match tail.iter().rposition(|b| *b == b'\n') {
        Some(i) => from + i as u64 + 1,
        None if from == 0 => 0,
        // A "line" longer than 64 KiB is not one the daemon wrote: leave it.
        None => return,
    };
    match file.set_len(keep) {
        Ok(()) => tracing::warn!(
            "audit: {} ended in a torn line ({} bytes, a crash mid-write); cut off",
            path.display(),
            len - keep
        ),
        Err(e) => tracing::error!("audit: cannot cut the torn end of {}: {e}", path.display()),
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
    let text = serde_json::to_string(&cleaned).unwrap_or_default();
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
            &json!({"url": format!("https://h.test/{}?token=abc&q=1#hunter2", "x".repeat(400))}),
        );
        let long = long.to_string();
        assert!(!long.contains("hunter2") && !long.contains("abc"), "{long}");
        assert!(long.contains("chars]"), "{long}");
        assert_eq!(
            redact_text("`http://a:b@h.test/x?api_key=k` is not valid"),
            "`http://[redacted]@h.test:80` is not valid"
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

    fn record_of(n: usize) -> AuditRecord {
        AuditRecord {
            ts: crate::events::now_rfc3339(),
            principal: format!("p{n}"),
            role: "viewer".into(),
            transport: "http".into(),
            session: None,
            method: "tools/call".into(),
            tool: Some("scrape".into()),
            args: json!({"n": n}),
            ok: true,
            error: None,
            duration_ms: 0,
            slot: None,
            tier: None,
            attempts: None,
            hop: None,
            recordings: Vec::new(),
        }
    }

    #[test]
    fn a_line_is_in_the_file_when_record_returns_and_waiting_lines_share_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = std::sync::Arc::new(AuditLog::open(&path).unwrap());
        log.record(&record_of(0));
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        assert_eq!(log.writes(), 1);

        // Eight callers queue while a write is under way (the file held
        // here): the first to get the file writes all eight in one go.
        let held = log.file.lock();
        let callers: Vec<_> = (1..=8)
            .map(|n| {
                let log = log.clone();
                std::thread::spawn(move || log.record(&record_of(n)))
            })
            .collect();
        while log.queue.lock().queued < 9 {
            std::thread::yield_now();
        }
        drop(held);
        for c in callers {
            c.join().unwrap();
        }
        assert_eq!(log.writes(), 2, "eight waiting lines took one write");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut seen: Vec<String> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["principal"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        seen.sort();
        let want: Vec<String> = (0..=8).map(|n| format!("p{n}")).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_torn_last_line_is_cut_off_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, "{\"a\":1}\n{\"b\":2}\n{\"c\":").unwrap();
        let log = AuditLog::open(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        log.record(&record_of(1));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok()),
            "{text}"
        );
        // A whole file is left as it is; so is a file of one torn line.
        drop(log);
        AuditLog::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::write(&path, "{\"torn").unwrap();
        AuditLog::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
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
            recordings: Vec::new(),
        };
        log.record(&rec);
        // Written lines wait for the next sync (the daemon's, every 100 ms).
        assert!(log.dirty.load(Ordering::Acquire));
        log.sync();
        assert!(!log.dirty.load(Ordering::Acquire));
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
