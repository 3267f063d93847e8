//! The task that lives as long as one Chromium: it polls chromiumoxide's CDP
//! handler (nothing happens on the connection otherwise), notices when Chromium
//! exits, reaps it, and on a stop request ends the whole process group.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chromiumoxide::Handler;
use futures_util::StreamExt;
use parking_lot::Mutex;
use tokio::process::Child;
use tokio::sync::oneshot;

use super::facts::BrowserFacts;
use super::process;

/// Flags shared between a running browser and its supervisor.
#[derive(Debug, Default)]
pub struct Flags {
    /// Chromium is gone (exited, crashed or stopped) and has been reaped.
    pub dead: AtomicBool,
    /// We are closing it on purpose: an exit now is not a crash.
    pub closing: AtomicBool,
    /// Why the daemon ended it on its own (the DevTools relay's cap): the
    /// failed operation reports this rather than a broken connection.
    pub ended_because: parking_lot::Mutex<Option<String>>,
    /// Its end was counted as a crash: once per process, whoever saw it
    /// first (the supervisor an exit, the hang check a browser that stopped
    /// answering, which may have died on its own a moment before).
    crash_counted: AtomicBool,
}

impl Flags {
    /// Count this browser's end as a crash, unless it was counted already.
    pub fn count_crash(&self, facts: &Mutex<BrowserFacts>, why: &str) {
        if !self.crash_counted.swap(true, Ordering::AcqRel) {
            let mut f = facts.lock();
            f.crashes += 1;
            f.last_error = Some(crate::diag::error_line(&why));
        }
    }
}

/// The Chromium a supervisor watches over.
pub struct Watched {
    pub slot: usize,
    pub child: Child,
    pub pid_file: std::path::PathBuf,
    /// Its crashpad handlers (outside its process group).
    pub outside_group: Vec<u32>,
    /// Its virtual display: ended after it; its exit ends Chromium.
    pub display: Option<super::display::Xvfb>,
}

/// Run until Chromium exits or `stop` fires; always reaps the child.
pub async fn supervise(
    watched: Watched,
    mut handler: Handler,
    mut stop: oneshot::Receiver<()>,
    flags: Arc<Flags>,
    facts: Arc<Mutex<BrowserFacts>>,
) {
    let Watched {
        slot,
        mut child,
        pid_file,
        outside_group,
        mut display,
    } = watched;
    let pid = child.id().unwrap_or(0);
    let mut handler_open = true;
    let exit = loop {
        tokio::select! {
            ev = handler.next(), if handler_open => match ev {
                Some(Ok(())) => {}
                Some(Err(e)) => tracing::debug!(slot, error = %e, "CDP handler error"),
                None => handler_open = false,
            },
            status = child.wait() => break Some(status),
            _ = &mut stop => break None,
            gone = display_exit(&mut display) => {
                let why = format!("the slot's virtual display (Xvfb) exited ({gone}); Chromium was ended with it");
                tracing::warn!(slot, "{why}");
                *flags.ended_because.lock() = Some(why);
                process::kill_and_reap(&mut child).await;
                break Some(child.wait().await);
            }
        }
    };
    match exit {
        None => process::kill_and_reap(&mut child).await,
        Some(status) => {
            // The main process is gone; make sure no helper of its group lingers.
            process::end_group(pid).await;
            let ended_because = flags.ended_because.lock().clone();
            if let Some(why) = ended_because {
                flags.count_crash(&facts, &why);
            } else if !flags.closing.load(Ordering::Acquire) {
                let why = match status {
                    Ok(s) => format!("Chromium (pid {pid}) exited unexpectedly: {s}"),
                    Err(e) => format!("Chromium (pid {pid}) could not be waited for: {e}"),
                };
                tracing::warn!(slot, "{why}");
                flags.count_crash(&facts, &why);
            }
        }
    }
    process::end_outside(&outside_group).await;
    if let Some(d) = display {
        d.end().await;
    }
    // A pid file that names a reaped process would only confuse the next start.
    if std::fs::read_to_string(&pid_file).is_ok_and(|p| p.trim() == pid.to_string()) {
        let _ = std::fs::remove_file(&pid_file);
    }
    flags.dead.store(true, Ordering::Release);
    let mut f = facts.lock();
    if f.pid == Some(pid) {
        f.pid = None;
        f.running = false;
    }
}

/// When the display exits, how; never without one.
async fn display_exit(display: &mut Option<super::display::Xvfb>) -> String {
    match display {
        Some(d) => match d.exited().await {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        },
        None => std::future::pending().await,
    }
}
