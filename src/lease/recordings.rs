//! Where recordings of browser work are kept (`[recording]`): which work
//! is recorded (`when`), and the recordings on disk, each a folder
//! `<dir>/<id>/` of `meta.json` (what the list shows), `recording.json`
//! (the frames' times, the action log, the network summary) and
//! `frames/NNNNNN.jpg`, every file mode 0600 in folders mode 0700.
//!
//! A recording is written whole into `.tmp-<id>/`, synced, and renamed
//! into place: a daemon killed while it writes leaves a `.tmp-` folder,
//! never a half recording, and the next start removes it. After each
//! write the oldest recordings go until the rest fit `max_total_mb`,
//! and those older than `max_age_days` go too.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{RecordWhen, RecordingConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::identity::browser::tape::{Tape, TapeLimits};

tokio::task_local! {
    /// The recordings the current tool call made (the dispatcher collects
    /// them for the result and the audit line).
    static MADE: parking_lot::Mutex<Vec<String>>;
}

/// Run `f`, collecting the ids of the recordings it makes.
pub async fn collecting<F: std::future::Future>(f: F) -> (F::Output, Vec<String>) {
    MADE.scope(Default::default(), async move {
        let out = f.await;
        let ids = MADE
            .try_with(|m| std::mem::take(&mut *m.lock()))
            .unwrap_or_default();
        (out, ids)
    })
    .await
}

/// Note recording `id` for the call running now (if one collects); an id
/// noted again (a session's recording, by its open and its first step) is
/// kept once.
pub fn note(id: &str) {
    let _ = MADE.try_with(|m| {
        let mut made = m.lock();
        if !made.iter().any(|x| x == id) {
            made.push(id.to_string());
        }
    });
}

/// What a recording recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordingKind {
    /// One browser call's page (tier 3 of a tool, `scrape` in the browser).
    Call,
    /// An interactive `browser_*` session, from open to close.
    Session,
    /// A live-view session (a person signing an identity in).
    Live,
}

/// What a recording is of, known when it begins.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subject {
    pub kind: RecordingKind,
    pub slot: usize,
    /// The strategy (or `web:HOST`) the work was for.
    pub strategy: String,
    /// The API key's name that asked for it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A recording as the list shows it (`meta.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordingMeta {
    pub id: String,
    #[serde(flatten)]
    pub subject: Subject,
    /// RFC 3339 UTC, and the same in unix seconds.
    pub started: String,
    pub started_unix: u64,
    pub duration_ms: u64,
    pub frames: usize,
    /// Frames past `max_recording_mb`, not kept.
    pub frames_dropped: u64,
    pub actions: usize,
    pub requests: usize,
    /// The recording's size on disk.
    pub bytes: u64,
}

/// A recording begun: its tape and what it is of.
pub struct Recording {
    pub tape: Arc<Tape>,
    pub subject: Subject,
}

impl Recording {
    pub fn id(&self) -> &str {
        &self.tape.id
    }
}

/// The daemon's recordings.
pub struct Recordings {
    dir: PathBuf,
    cfg: RecordingConfig,
    /// One write or removal at a time.
    writing: parking_lot::Mutex<()>,
}

impl std::fmt::Debug for Recordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recordings")
            .field("dir", &self.dir)
            .finish()
    }
}

const META: &str = "meta.json";
const MANIFEST: &str = "recording.json";
const TMP: &str = ".tmp-";

impl Recordings {
    /// The recordings under `cfg.dir` (default `<data_dir>/recordings`):
    /// what an earlier daemon left half-written is removed, the limits
    /// applied.
    pub fn open(cfg: &RecordingConfig, data_dir: &Path) -> Result<Arc<Recordings>> {
        let dir = cfg
            .dir
            .clone()
            .unwrap_or_else(|| data_dir.join("recordings"));
        crate::fsutil::create_private_dir(&dir)?;
        let r = Recordings {
            dir,
            cfg: cfg.clone(),
            writing: Default::default(),
        };
        r.sweep_unfinished();
        r.prune(None);
        Ok(Arc::new(r))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &RecordingConfig {
        &self.cfg
    }

    /// Whether browser work is recorded on an identity signed in (or not)
    /// on the work's strategy.
    pub fn wants(&self, signed_in: bool) -> bool {
        match self.cfg.when {
            RecordWhen::Always => true,
            RecordWhen::SignedIn => signed_in,
            RecordWhen::Never => false,
        }
    }

    /// Begin a recording of `subject`.
    pub fn begin(&self, subject: Subject) -> Recording {
        let now = time::OffsetDateTime::now_utc();
        let id = format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}-s{}-{:08x}",
            now.year(),
            u8::from(now.month()),
            now.day(),
            now.hour(),
            now.minute(),
            now.second(),
            subject.slot,
            rand::random::<u32>()
        );
        let limits = TapeLimits {
            fps: self.cfg.fps,
            max_bytes: usize::try_from(self.cfg.max_recording_mb.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            frame_width: i64::from(self.cfg.frame_width),
        };
        Recording {
            tape: Arc::new(Tape::new(id, limits)),
            subject,
        }
    }

    /// Write `rec` to disk (whole, or not at all) and apply the limits.
    pub async fn finish(self: &Arc<Self>, rec: Recording) -> Result<RecordingMeta> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let _w = me.writing.lock();
            let meta = me.write(&rec).inspect_err(|_| {
                // A failed write (a full disk) leaves nothing half-made.
                let _ = std::fs::remove_dir_all(me.dir.join(format!("{TMP}{}", rec.id())));
            })?;
            me.prune(Some(&meta.id));
            Ok(meta)
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Internal, format!("recording writer: {e}")))?
    }

    fn write(&self, rec: &Recording) -> Result<RecordingMeta> {
        let id = rec.id().to_string();
        let got = rec.tape.take();
        let tmp = self.dir.join(format!("{TMP}{id}"));
        let io = |what: String| move |e| Error::io(what, e);
        let _ = std::fs::remove_dir_all(&tmp);
        crate::fsutil::create_private_dir(&tmp.join("frames"))?;
        let mut frames = Vec::with_capacity(got.frames.len());
        let mut bytes = 0u64;
        for (n, f) in got.frames.iter().enumerate() {
            let name = format!("frames/{:06}.jpg", n + 1);
            write_private(&tmp.join(&name), &f.jpeg)?;
            bytes += f.jpeg.len() as u64;
            frames.push(serde_json::json!({"file": name, "at_ms": f.at_ms, "bytes": f.jpeg.len()}));
        }
        let started_unix = rec
            .tape
            .begun_at
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let started = time::OffsetDateTime::from(rec.tape.begun_at)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| started_unix.to_string());
        let manifest = serde_json::json!({
            "id": id,
            "frames": frames,
            "actions": got.actions,
            "network": got.network,
            "entries_dropped": got.entries_dropped,
        });
        let manifest = serde_json::to_vec(&manifest)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("recording {id}: {e}")))?;
        write_private(&tmp.join(MANIFEST), &manifest)?;
        bytes += manifest.len() as u64;
        let mut meta = RecordingMeta {
            id: id.clone(),
            subject: rec.subject.clone(),
            started,
            started_unix,
            duration_ms: got.duration_ms,
            frames: got.frames.len(),
            frames_dropped: got.frames_dropped,
            actions: got.actions.len(),
            requests: got.network.len(),
            bytes,
        };
        let text = serde_json::to_vec_pretty(&meta)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("recording {id}: {e}")))?;
        meta.bytes += text.len() as u64;
        write_private(&tmp.join(META), &text)?;
        sync_dir(&tmp.join("frames"));
        sync_dir(&tmp);
        let into = self.dir.join(&id);
        std::fs::rename(&tmp, &into)
            .map_err(io(format!("cannot move {} into place", tmp.display())))?;
        sync_dir(&self.dir);
        Ok(meta)
    }

    /// Remove `.tmp-` folders (a write a killed daemon did not finish).
    fn sweep_unfinished(&self) {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(TMP) {
                tracing::info!(path = %e.path().display(), "removing an unfinished recording");
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }

    /// Recordings past `max_age_days` go; then the oldest (by when they
    /// ended) until the rest fit `max_total_mb`; never `keep`, the one just
    /// written.
    fn prune(&self, keep: Option<&str>) {
        let mut all = self.scan();
        let max_age = Duration::from_secs(self.cfg.max_age_days.saturating_mul(86_400));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let cap = self.cfg.max_total_mb.saturating_mul(1 << 20);
        all.sort_by_key(|m| (m.started_unix + m.duration_ms / 1000, m.id.clone()));
        let mut total: u64 = all.iter().map(|m| m.bytes).sum();
        for m in all.iter().filter(|m| Some(m.id.as_str()) != keep) {
            let old = now.saturating_sub(m.started_unix) > max_age.as_secs();
            if old || total > cap {
                tracing::info!(id = %m.id, old, "removing a recording (recording limits)");
                if std::fs::remove_dir_all(self.dir.join(&m.id)).is_ok() {
                    total = total.saturating_sub(m.bytes);
                }
            }
        }
    }

    /// Every recording's meta, unsorted; folders without one are skipped.
    fn scan(&self) -> Vec<RecordingMeta> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        rd.flatten()
            .filter(|e| valid_id(&e.file_name().to_string_lossy()))
            .filter_map(|e| {
                let text = std::fs::read(e.path().join(META)).ok()?;
                serde_json::from_slice(&text).ok()
            })
            .collect()
    }

    /// The recordings, newest first.
    pub fn list(&self) -> Vec<RecordingMeta> {
        let mut all = self.scan();
        all.sort_by(|a, b| (b.started_unix, &b.id).cmp(&(a.started_unix, &a.id)));
        all
    }

    /// One recording: its meta and its manifest (frames' times, actions,
    /// network).
    pub fn get(&self, id: &str) -> Result<Value> {
        let dir = self.folder(id)?;
        let read = |name: &str| -> Result<Value> {
            let text = std::fs::read(dir.join(name))
                .map_err(|e| Error::io(format!("recording {id}: cannot read {name}"), e))?;
            serde_json::from_slice(&text).map_err(|e| {
                Error::new(ErrorKind::Internal, format!("recording {id}: {name}: {e}"))
            })
        };
        let mut manifest = read(MANIFEST)?;
        manifest["meta"] = read(META)?;
        Ok(manifest)
    }

    /// Recording `id`'s meta (what it is of: its slot and site).
    pub fn meta(&self, id: &str) -> Result<RecordingMeta> {
        let dir = self.folder(id)?;
        let text = std::fs::read(dir.join(META))
            .map_err(|e| Error::io(format!("recording {id}: cannot read {META}"), e))?;
        serde_json::from_slice(&text)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("recording {id}: {META}: {e}")))
    }

    /// Frame `n` (from 1) of recording `id`, as JPEG.
    pub fn frame(&self, id: &str, n: usize) -> Result<Vec<u8>> {
        let dir = self.folder(id)?;
        let path = dir.join(format!("frames/{n:06}.jpg"));
        std::fs::read(&path)
            .map_err(|_| Error::not_found(format!("recording {id} has no frame {n}")))
    }

    fn folder(&self, id: &str) -> Result<PathBuf> {
        if !valid_id(id) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a recording id is letters, digits and `-` (as GET /api/v1/recordings lists them)",
            )
            .retryable(false));
        }
        let dir = self.dir.join(id);
        if !dir.join(META).is_file() {
            return Err(Error::not_found(format!("no recording `{id}`")));
        }
        Ok(dir)
    }
}

/// Ids as [`Recordings::begin`] makes them: no path can hide in one.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !id.starts_with('-')
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |what: &str| {
        let what = format!("{what} {}", path.display());
        move |e| Error::io(what, e)
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io("cannot create"))?;
    f.write_all(bytes).map_err(io("cannot write"))?;
    f.sync_all().map_err(io("cannot fsync"))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_recording_noted_twice_is_listed_once() {
        let ((), made) = super::collecting(async {
            super::note("a1");
            super::note("b2");
            super::note("a1");
        })
        .await;
        assert_eq!(made, ["a1", "b2"]);
    }

    use super::*;

    fn store(dir: &Path, max_total_mb: u64) -> Arc<Recordings> {
        let cfg = RecordingConfig {
            when: RecordWhen::Always,
            dir: Some(dir.join("rec")),
            max_recording_mb: 1,
            max_total_mb,
            ..RecordingConfig::default()
        };
        Recordings::open(&cfg, dir).expect("open")
    }

    fn subject() -> Subject {
        Subject {
            kind: RecordingKind::Call,
            slot: 0,
            strategy: "s".into(),
            key: None,
        }
    }

    #[tokio::test]
    async fn a_recording_is_written_whole_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tmp");
        let r = store(tmp.path(), 4);
        let rec = r.begin(subject());
        rec.tape
            .frame(bytes::Bytes::from_static(b"\xff\xd8jpeg\xff\xd9"));
        rec.tape.action("navigate", "https://shop.test/");
        rec.tape.request("https://shop.test/", 200, 1234);
        let id = rec.id().to_string();
        let meta = r.finish(rec).await.expect("finish");
        assert_eq!((meta.frames, meta.actions, meta.requests), (1, 1, 1));
        let got = r.get(&id).expect("get");
        assert_eq!(got["actions"][0]["kind"], "navigate");
        assert_eq!(got["network"][0]["bytes"], 1234);
        assert_eq!(got["meta"]["slot"], 0);
        assert_eq!(r.frame(&id, 1).expect("frame"), b"\xff\xd8jpeg\xff\xd9");
        assert!(r.frame(&id, 2).is_err());
        for p in ["", "/meta.json", "/recording.json", "/frames/000001.jpg"] {
            let mode = std::fs::metadata(format!("{}/{id}{p}", r.dir().display()))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{p} is readable by others: {mode:o}");
        }
        assert_eq!(r.list().len(), 1);
        for bad in ["../x", "a/b", "", "-x", ".tmp-x"] {
            assert!(r.get(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn the_total_cap_removes_the_oldest_first_and_leftovers_go() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = store(tmp.path(), 1);
        let mut ids = Vec::new();
        for _ in 0..3 {
            let rec = r.begin(subject());
            // 400 KB of frames each: two fit in 1 MB, three do not.
            rec.tape.frame(bytes::Bytes::from(vec![7u8; 400 << 10]));
            ids.push(rec.id().to_string());
            r.finish(rec).await.expect("finish");
            // Distinct start seconds keep the order plain.
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let left: Vec<String> = r.list().into_iter().map(|m| m.id).collect();
        assert_eq!(left, vec![ids[2].clone(), ids[1].clone()]);
        // A write a killed daemon left behind is not listed, and goes.
        std::fs::create_dir_all(r.dir().join(".tmp-20260101T000000-s0-00000000/frames"))
            .expect("mkdir");
        assert_eq!(r.list().len(), 2);
        let again = store(tmp.path(), 1);
        assert!(
            !again
                .dir()
                .join(".tmp-20260101T000000-s0-00000000")
                .exists()
        );
        assert_eq!(again.list().len(), 2);
    }
}
