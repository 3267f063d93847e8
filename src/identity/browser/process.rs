//! Processes on this machine as `/proc` shows them, and ending them: the
//! kill-and-reap of a child, process groups, the subreaper role, liveness
//! and a process tree's memory. Only PIDs the daemon started are signalled.

use std::time::Duration;

use tokio::process::Child;

/// Every pid in `/proc`.
pub fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// The arguments `pid` was started with.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// The parent of `pid`.
pub fn parent(pid: u32) -> Option<u32> {
    stat_field(pid, 1)
}

/// Field `n` of `/proc/<pid>/stat` counted after the command name
/// (0: state, 1: parent pid, 2: process group).
fn stat_field(pid: u32, n: usize) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(n)?.parse().ok()
}

/// Whether `pid` is a zombie whose parent is this process.
fn our_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut f = rest.split_whitespace();
    f.next() == Some("Z")
        && f.next().and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id())
}

/// Reap zombies handed to this process (PID 1 in a container, or the
/// subreaper under systemd) that no one waits for: Chromium's orphaned
/// helpers, grandchildren of crashed ones. One is reaped once it was a
/// zombie on two sweeps in a row (a command someone waits for never is for
/// that long), never one of `keep` (the Chromium main processes, which their
/// owners reap). `seen` carries the zombies of the last sweep. Answers how
/// many were reaped.
pub fn sweep_zombies(seen: &mut std::collections::HashSet<u32>, keep: &[u32]) -> usize {
    let now: std::collections::HashSet<u32> = all_pids()
        .into_iter()
        .filter(|p| !keep.contains(p) && our_zombie(*p))
        .collect();
    let mut reaped = 0;
    for &p in now.intersection(seen) {
        let mut status = 0;
        // SAFETY: waitpid on a specific zombie child with WNOHANG never blocks.
        if unsafe { libc::waitpid(p as i32, &mut status, libc::WNOHANG) } > 0 {
            reaped += 1;
        }
    }
    *seen = now;
    reaped
}

/// SIGKILL Chromium's whole process group, then reap the main process and the
/// helpers that were re-parented to us.
pub async fn kill_and_reap(child: &mut Child) {
    let pid = child.id();
    let helpers = pid.map(group_members).unwrap_or_default();
    if let Some(pid) = pid {
        signal_group(pid, libc::SIGKILL);
    }
    let _ = child.kill().await;
    let _ = child.wait().await;
    reap(&helpers).await;
}

/// Make this process the reaper of its orphaned descendants. Chromium's helpers
/// (zygote, renderers) outlive a killed browser process for a moment; without this
/// they would be re-parented to PID 1, which in containers often reaps nothing.
pub fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            tracing::debug!(
                "PR_SET_CHILD_SUBREAPER failed; orphaned Chromium helpers are left to init"
            );
        }
    });
}

/// Processes of the group led by `pid`, other than `pid` itself.
pub fn group_members(pid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| p != pid && stat_field(p, 2) == Some(pid))
        .collect()
}

/// End the rest of a group whose leader `pid` has exited, and reap its members.
pub async fn end_group(pid: u32) {
    let helpers = group_members(pid);
    signal_group(pid, libc::SIGKILL);
    reap(&helpers).await;
}

/// End and reap processes that left Chromium's group (its crashpad handlers).
pub async fn end_outside(pids: &[u32]) {
    for &p in pids {
        if let Ok(p) = i32::try_from(p)
            && p > 1
        {
            // SAFETY: a signal to a crashpad handler our Chromium started.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    reap(pids).await;
}

/// Reap `pids` once they are our children (subreaper) and dead; give up after ~3 s
/// for any that are not ours to wait for.
pub(crate) async fn reap(pids: &[u32]) {
    let mut left: Vec<i32> = pids.iter().filter_map(|p| i32::try_from(*p).ok()).collect();
    for _ in 0..60 {
        left.retain(|&p| {
            let mut status = 0;
            // SAFETY: waitpid on a specific pid with WNOHANG never blocks.
            let r = unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) };
            r == 0 // still running (or not yet re-parented to us): try again
        });
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Send `sig` to the process group led by `pid` (our Chromium) and to `pid`.
pub fn signal_group(pid: u32, sig: i32) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    // SAFETY: plain syscalls on a pid we spawned as a group leader.
    unsafe {
        libc::kill(-pid, sig);
        libc::kill(pid, sig);
    }
}

/// Whether `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Memory of `pid` and all its descendants, in MiB: (RSS, PSS). RSS sums
/// count the pages Chromium's processes share once per process (about 2–3×
/// the real footprint); PSS (`smaps_rollup`) splits shared pages between
/// their sharers and adds up to what the tree really holds.
pub fn tree_memory_mb(pid: u32) -> (u64, u64) {
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, stat_field(p, 1)?)))
        .collect();
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let cur = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == cur).map(|(p, _)| *p));
        i += 1;
    }
    let kb = |file: &str, field: &str| -> u64 {
        (tree.iter())
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/{file}")).ok())
            .filter_map(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .sum()
    };
    (
        kb("status", "VmRSS:") / 1024,
        kb("smaps_rollup", "Pss:") / 1024,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn orphaned_zombies_are_swept_on_their_second_sighting() {
        super::become_subreaper();
        // `sh` leaves a child behind and exits: the child is re-parented to
        // us (the subreaper), dies, and no one waits for it.
        let out = std::process::Command::new("sh")
            .args(["-c", "sleep 0.2 & echo $!"])
            .output()
            .expect("sh runs");
        let orphan: u32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the orphan's pid");
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert!(
            super::our_zombie(orphan),
            "the orphan did not become our zombie"
        );
        // Other tests' children are left alone.
        let others: Vec<u32> = super::all_pids()
            .into_iter()
            .filter(|p| *p != orphan)
            .collect();
        let mut seen = Default::default();
        assert_eq!(
            super::sweep_zombies(&mut seen, &others),
            0,
            "swept on first sight"
        );
        assert_eq!(super::sweep_zombies(&mut seen, &others), 1);
        assert!(!super::our_zombie(orphan));
        assert!(!std::path::Path::new(&format!("/proc/{orphan}")).exists());
    }

    #[test]
    fn pss_of_a_process_is_at_most_its_rss() {
        let (rss, pss) = super::tree_memory_mb(std::process::id());
        assert!(rss > 0, "rss {rss}");
        assert!(pss > 0 && pss <= rss, "pss {pss}, rss {rss}");
    }
}
