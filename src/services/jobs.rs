//! Background jobs (a crawl running past its call): each has a random id,
//! the key that started it (its owner: only it and admins see the job), a
//! status, the records it produced so far, and a cancel token that is a
//! child of the pool's shutdown. At most [`MAX_RUNNING`] run at once; the
//! [`MAX_KEPT`] newest are kept, finished ones written to
//! `<data_dir>/jobs/<id>.json` and read back at start for [`KEEP`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};

/// Jobs running at once.
pub const MAX_RUNNING: usize = 4;
/// Jobs kept (running or finished).
pub const MAX_KEPT: usize = 64;
/// How long a finished job is kept.
pub const KEEP: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Completed,
    Cancelled,
    Failed,
}

/// What a job has done so far.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub kind: String,
    /// The key (its name) that started it; `None` for a job started
    /// without one (and for records written before jobs had owners:
    /// admins alone see those).
    #[serde(default)]
    pub owner: Option<String>,
    pub status: Status,
    /// What it was asked (its arguments, as the tool took them).
    pub request: Value,
    /// Its results, in order (a crawl's pages).
    pub items: Vec<Value>,
    /// What it passed over and why (a crawl's robots refusals).
    pub skipped: Vec<Value>,
    pub error: Option<String>,
    #[serde(with = "unix_secs")]
    pub started: SystemTime,
    #[serde(with = "unix_secs_opt")]
    pub finished: Option<SystemTime>,
}

/// One job: its record and its cancel token.
pub struct Job {
    record: parking_lot::Mutex<Record>,
    cancel: CancellationToken,
    done: tokio::sync::Notify,
}

impl Job {
    pub fn id(&self) -> String {
        self.record.lock().id.clone()
    }
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }
    /// A copy of the record now.
    pub fn record(&self) -> Record {
        self.record.lock().clone()
    }
    pub fn push(&self, item: Value) {
        self.record.lock().items.push(item);
    }
    pub fn skip(&self, why: Value) {
        self.record.lock().skipped.push(why);
    }
    pub fn is_running(&self) -> bool {
        self.record.lock().status == Status::Running
    }
    /// Wait until the job is no longer running.
    pub async fn finished(&self) {
        loop {
            let wake = self.done.notified();
            if !self.is_running() {
                return;
            }
            wake.await;
        }
    }
}

/// Every job of this pool.
pub struct Jobs {
    dir: PathBuf,
    jobs: parking_lot::Mutex<HashMap<String, Arc<Job>>>,
    stop: CancellationToken,
}

impl Jobs {
    /// Jobs under `<data_dir>/jobs`, those finished within [`KEEP`] read
    /// back (a file that does not parse is left alone and logged).
    pub fn open(data_dir: &std::path::Path, stop: CancellationToken) -> Jobs {
        let dir = data_dir.join("jobs");
        let mut jobs = HashMap::new();
        let now = SystemTime::now();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let parsed = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Record>(&b).ok());
            match parsed {
                Some(r)
                    if r.finished
                        .is_some_and(|f| now.duration_since(f).unwrap_or_default() < KEEP) =>
                {
                    let job = finished_job(r);
                    jobs.insert(job.id(), Arc::new(job));
                }
                Some(_) => {
                    let _ = std::fs::remove_file(&path);
                }
                None => {
                    tracing::warn!(file = %path.display(), "a job file that does not parse (left alone)")
                }
            }
        }
        Jobs {
            dir,
            jobs: parking_lot::Mutex::new(jobs),
            stop,
        }
    }

    /// A new running job of `kind` for `request`, owned by `owner`, or a
    /// refusal when [`MAX_RUNNING`] already run.
    pub fn start(&self, kind: &str, request: Value, owner: Option<&str>) -> Result<Arc<Job>> {
        let mut jobs = self.jobs.lock();
        let running = jobs.values().filter(|j| j.is_running()).count();
        if running >= MAX_RUNNING {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "{running} jobs are running (at most {MAX_RUNNING}); wait for one or cancel it"
                ),
            )
            .retryable(true));
        }
        self.forget_oldest(&mut jobs);
        let id = uuid::Uuid::new_v4().simple().to_string();
        let job = Arc::new(Job {
            record: parking_lot::Mutex::new(Record {
                id: id.clone(),
                kind: kind.to_string(),
                owner: owner.map(str::to_string),
                status: Status::Running,
                request,
                items: Vec::new(),
                skipped: Vec::new(),
                error: None,
                started: SystemTime::now(),
                finished: None,
            }),
            cancel: self.stop.child_token(),
            done: tokio::sync::Notify::new(),
        });
        jobs.insert(id, job.clone());
        Ok(job)
    }

    /// Past [`MAX_KEPT`], the oldest finished jobs go (and their files).
    fn forget_oldest(&self, jobs: &mut HashMap<String, Arc<Job>>) {
        while jobs.len() >= MAX_KEPT {
            let oldest = (jobs.iter())
                .filter(|(_, j)| !j.is_running())
                .min_by_key(|(_, j)| j.record.lock().started)
                .map(|(id, _)| id.clone());
            let Some(id) = oldest else { break };
            jobs.remove(&id);
            let _ = std::fs::remove_file(self.dir.join(format!("{id}.json")));
        }
    }

    /// The job `id`, whoever started it.
    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.jobs.lock().get(id).cloned()
    }

    /// The job `id` as `caller` may see it: its own jobs, or any with
    /// `admin`. Another key's job is `None`, exactly like an unknown id (an
    /// id is no secret: the audit log shows it).
    pub fn get_for(&self, id: &str, caller: Option<&str>, admin: bool) -> Option<Arc<Job>> {
        self.get(id)
            .filter(|j| admin || j.record.lock().owner.as_deref() == caller)
    }

    /// End `job` with `status` (and `error`), and write it down.
    pub fn finish(&self, job: &Job, status: Status, error: Option<String>) {
        let record = {
            let mut r = job.record.lock();
            if r.status != Status::Running {
                return;
            }
            r.status = status;
            r.error = error;
            r.finished = Some(SystemTime::now());
            r.clone()
        };
        job.done.notify_waiters();
        let written = crate::fsutil::create_private_dir(&self.dir).and_then(|()| {
            let bytes = serde_json::to_vec(&record).map_err(|e| {
                Error::new(ErrorKind::Internal, "cannot encode a job").with_source(e)
            })?;
            crate::fsutil::write_atomically(&self.dir.join(format!("{}.json", record.id)), &bytes)
        });
        if let Err(e) = written {
            tracing::warn!(job = %record.id, error = %e, "cannot write the job's record");
        }
    }
}

fn finished_job(r: Record) -> Job {
    Job {
        record: parking_lot::Mutex::new(r),
        cancel: CancellationToken::new(),
        done: tokio::sync::Notify::new(),
    }
}

mod unix_secs {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        Ok(UNIX_EPOCH + Duration::from_secs(u64::deserialize(d)?))
    }
}

mod unix_secs_opt {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => {
                s.serialize_some(&t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs())
            }
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(|s| UNIX_EPOCH + Duration::from_secs(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_seen_by_its_owner_and_admins_only() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = Jobs::open(dir.path(), CancellationToken::new());
        let job = jobs.start("crawl", Value::Null, Some("alice")).unwrap();
        let id = job.id();
        assert!(jobs.get_for(&id, Some("alice"), false).is_some());
        assert!(jobs.get_for(&id, Some("bob"), false).is_none());
        assert!(jobs.get_for(&id, None, false).is_none());
        assert!(jobs.get_for(&id, Some("root"), true).is_some());
        assert!(jobs.get_for("nope", Some("alice"), false).is_none());
        // The owner is written down and read back with the record.
        jobs.finish(&job, Status::Completed, None);
        let again = Jobs::open(dir.path(), CancellationToken::new());
        assert!(again.get_for(&id, Some("alice"), false).is_some());
        assert!(again.get_for(&id, Some("bob"), false).is_none());
        // A record from before owners: admins only.
        let mut old = job.record();
        old.id = "0ld".into();
        let mut text = serde_json::to_value(&old).unwrap();
        text.as_object_mut().unwrap().remove("owner");
        std::fs::write(dir.path().join("jobs/0ld.json"), text.to_string()).unwrap();
        let again = Jobs::open(dir.path(), CancellationToken::new());
        assert!(again.get_for("0ld", Some("alice"), false).is_none());
        assert!(again.get_for("0ld", Some("root"), true).is_some());
    }
}
