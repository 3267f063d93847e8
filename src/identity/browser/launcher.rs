//! Starting and ending one slot's Chromium.
//!
//! We spawn Chromium ourselves (not through chromiumoxide's launcher, which adds
//! `--enable-automation` and its own defaults, keeps arguments in a map, and panics
//! when clean-up fails) and then attach chromiumoxide to its DevTools socket. When
//! a step after the spawn fails, the child (and any crashpad handler outside its
//! group) is killed and reaped before the error is returned. Chromium is made a
//! process-group leader so its helpers (zygote, renderers, GPU/network
//! services) end with it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::process::{
    all_pids, cmdline, end_outside, group_members, kill_and_reap, pid_alive, reap, signal_group,
};
use crate::error::{Error, ErrorKind, Result};

/// Everything needed to start one slot's Chromium.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub slot: usize,
    pub executable: PathBuf,
    pub port: u16,
    pub user_data_dir: PathBuf,
    pub pid_file: PathBuf,
    pub headless: bool,
    /// Headful on a virtual display of the slot's own (`browser.display =
    /// "xvfb"`, [`super::display`]); `headless` is then off.
    pub xvfb: bool,
    pub user_agent: String,
    /// The profile's languages in order, without q-values (`de-DE,de,en`):
    /// `--accept-lang`, so that Chromium itself makes Accept-Language (in its
    /// own place among the headers) and `navigator.languages`; the first is
    /// `--lang`.
    pub languages: String,
    /// The device it is launched as: window, screen, pixel ratio, theme,
    /// time zone, processors, fonts (launch flags and the environment, so
    /// that workers and iframes agree with the page).
    pub device: super::Device,
    pub pointer: crate::identity::profile::Pointer,
    /// `http://127.0.0.1:<port>` of the slot's egress (`None` only in tests
    /// that launch a bare Chromium to compare with).
    pub proxy_server: Option<String>,
    /// base64 SHA-256 SPKI hashes of `security.extra_root_certs`.
    pub spki: Vec<String>,
    /// The same roots, DER, for the slot's own NSS database (a server that
    /// sends only its leaf is verified against them).
    pub trust_roots: Vec<Vec<u8>>,
    pub launch_timeout: Duration,
    /// The browsers' namespace (`None`: the daemon's own network).
    pub netns: Option<std::sync::Arc<crate::wire::netns::Netns>>,
    /// Chromium's own sandbox (`browser.sandbox`); never as root.
    pub sandbox: bool,
    /// The slot's egress's admission: told each new Chromium's pid, so that
    /// its process tree alone may use the egress (`None`: no egress).
    pub egress_peers: Option<std::sync::Arc<crate::wire::egress::Peers>>,
}

impl LaunchSpec {
    /// The complete argument list; nothing is added behind our back.
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-quic",
            "--disk-cache-size=1",
            "--media-cache-size=1",
            "--disable-application-cache",
            "--disable-breakpad",
            // Crashpad's handler daemonizes out of our process group and would
            // outlive the browser; we keep no crash dumps anyway.
            "--disable-dev-shm-usage",
            "--password-store=basic",
            "--use-mock-keychain",
            "--disable-features=Translate,MediaRouter,OptimizationHints",
            "--remote-debugging-address=127.0.0.1",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        a.push(format!("--remote-debugging-port={}", self.port));
        a.push(format!("--user-data-dir={}", self.user_data_dir.display()));
        a.push(format!("--user-agent={}", self.user_agent));
        let first = self.languages.split(',').next().unwrap_or("en-US");
        a.push(format!("--lang={first}"));
        a.push(format!("--accept-lang={}", self.languages));
        let d = &self.device;
        a.push(format!("--window-size={},{}", d.window.0, d.window.1));
        // Headful on Xvfb, the display is the screen, at ratio 1 (see
        // docs/fidelity.md: the persona's ratio applies headless).
        a.push(d.screen.chromium_arg(if self.xvfb { 1.0 } else { d.dpr }));
        a.push(self.pointer.chromium_arg().into());
        if d.dark {
            a.push("--force-dark-mode".into());
        }
        if self.headless && !self.xvfb {
            a.push("--headless=new".into());
            a.push("--mute-audio".into());
        }
        if self.xvfb {
            // Without a GPU, headful Chromium has no WebGL at all unless it
            // may render it in software, as headless does by default: the
            // same real (SwiftShader) WebGL in both modes, never a made-up one.
            a.push("--enable-unsafe-swiftshader".into());
        }
        if let Some(p) = &self.proxy_server {
            a.push(format!("--proxy-server={p}"));
            // Chromium never proxies loopback unless told to: everything,
            // loopback included, goes through the guarded egress.
            a.push("--proxy-bypass-list=<-loopback>".into());
            // WebRTC's UDP would go around any proxy.
            a.push("--force-webrtc-ip-handling-policy=disable_non_proxied_udp".into());
        }
        if !self.spki.is_empty() {
            a.push(format!(
                "--ignore-certificate-errors-spki-list={}",
                self.spki.join(",")
            ));
        }
        // Chromium's sandbox cannot start as root; anywhere else it stays on
        // unless `browser.sandbox = false` (a container that is the sandbox).
        if unsafe_is_root() || !self.sandbox {
            a.push("--no-sandbox".into());
        }
        a.push("about:blank".into());
        a
    }
}

/// Whether the daemon runs as root (Chromium's sandbox cannot start then).
pub fn running_as_root() -> bool {
    unsafe_is_root()
}

fn unsafe_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The Chromium to run: `configured`, else `$IDPOOL_CHROMIUM`, else a known path.
pub fn find_executable(configured: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = configured {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(Error::config(format!(
                "browser.executable {} does not exist",
                p.display()
            )))
        };
    }
    if let Some(p) = std::env::var_os("IDPOOL_CHROMIUM").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
        "/usr/lib/chromium/chromium",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .ok_or_else(|| {
        Error::config("no Chromium found (install Debian's `chromium`, or set browser.executable)")
    })
}

/// Fail clearly when something else holds the slot's CDP port. (Chromium would
/// silently bind [::1] instead, and we would attach to the stranger.)
pub fn check_port_free(slot: usize, port: u16) -> Result<()> {
    match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => {
            drop(l);
            Ok(())
        }
        Err(e) => Err(Error::new(
            ErrorKind::Io,
            format!("slot {slot}: CDP port {port} on 127.0.0.1 is already in use by another process; free it or change pool.base_port"),
        )
        .with_source(e)
        .retryable(false)),
    }
}

/// A started Chromium, attached to nothing yet.
pub struct Started {
    pub child: Child,
    pub pid: u32,
    pub ws_url: String,
    /// Crashpad handlers it started: they leave its process group, so they are
    /// ended and reaped separately.
    pub outside_group: Vec<u32>,
    /// Its virtual display, when it has one.
    pub display: Option<super::display::Xvfb>,
}

/// `<slot dir>/xdg`: the slot's private XDG config and cache homes.
fn xdg_dir(spec: &LaunchSpec) -> PathBuf {
    spec.user_data_dir
        .parent()
        .unwrap_or(&spec.user_data_dir)
        .join("xdg")
}

/// Crashpad handlers whose database lives in this slot's XDG folder.
fn crashpad_of(spec: &LaunchSpec) -> Vec<u32> {
    let needle = format!("--database={}", xdg_dir(spec).display());
    all_pids()
        .into_iter()
        .filter(|&pid| {
            cmdline(pid).is_some_and(|args| {
                args.iter().any(|a| a.contains("crashpad_handler"))
                    && args.iter().any(|a| a.starts_with(&needle))
            })
        })
        .collect()
}

/// The major version of the Chromium a slot would launch (`configured`,
/// `$IDPOOL_CHROMIUM` or a known path), from its `--version`, within 10 s;
/// `None` without one. Blocking: called once when the pool opens, so the
/// HTTP tier claims the real browser from its first request.
pub fn installed_major(configured: Option<&Path>) -> Option<u32> {
    let exe = find_executable(configured).ok()?;
    let mut child = std::process::Command::new(&exe)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    major_of(&out)
}

/// `Chromium 156.0.8078.73 built on Debian…` → 156.
pub fn major_of(version: &str) -> Option<u32> {
    version
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// What `<executable> --version` prints (its first line), within 10 s.
pub async fn executable_version(executable: &Path) -> Option<String> {
    let mut cmd = Command::new(executable);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(10), cmd.output())
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?.trim();
    (out.status.success() && !line.is_empty()).then(|| line.to_string())
}

/// Spawn Chromium and wait for its DevTools address. On any failure the child is
/// killed and reaped before the error returns.
pub async fn start(spec: &LaunchSpec) -> Result<Started> {
    check_port_free(spec.slot, spec.port)?;
    crate::fsutil::create_private_dir(&spec.user_data_dir)?;
    remove_singleton_locks(&spec.user_data_dir);
    let mut cmd = Command::new(&spec.executable);
    cmd.args(spec.args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // Chromium on Linux takes its locale (and so `Intl`'s, and the
    // language pack it loads) from the environment, not from `--lang`.
    let posix = spec
        .languages
        .split(',')
        .next()
        .unwrap_or("en-US")
        .replace('-', "_");
    cmd.env("LANGUAGE", &posix);
    cmd.env("LANG", format!("{posix}.UTF-8"));
    cmd.env_remove("LC_ALL");
    cmd.env_remove("LC_MESSAGES");
    if let Some(tz) = &spec.device.timezone {
        cmd.env("TZ", tz);
    }
    if let Some(files) = &spec.device.fonts {
        let slot_dir = spec.user_data_dir.parent().unwrap_or(&spec.user_data_dir);
        cmd.env(
            "FONTCONFIG_FILE",
            super::device::write_fontconfig(slot_dir, files, spec.device.hinting)?,
        );
    }
    // Chromium keeps some state (crash database) under $XDG_CONFIG_HOME, not the
    // user-data-dir: give each slot its own so nothing lands in the operator's home.
    cmd.env("XDG_CONFIG_HOME", xdg_dir(spec).join("config"));
    cmd.env("XDG_CACHE_HOME", xdg_dir(spec).join("cache"));
    // Its own HOME too: Chromium on Linux reads trust anchors from
    // $HOME/.pki/nssdb, which holds `security.extra_root_certs`.
    let home = xdg_dir(spec).join("home");
    super::trust::prepare(spec.slot, &home, &spec.trust_roots).await;
    cmd.env("HOME", &home);
    let display = display_for(spec, &mut cmd).await?;
    // systemd's notify socket and watchdog are the daemon's, not Chromium's.
    for var in [
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "LISTEN_FDS",
        "LISTEN_PID",
    ] {
        cmd.env_remove(var);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            if let Some(d) = display {
                d.end().await;
            }
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "slot {}: cannot start {}",
                    spec.slot,
                    spec.executable.display()
                ),
            )
            .with_source(e)
            .retryable(false));
        }
    };
    let pid = child.id().unwrap_or(0);
    // Before Chromium's first connection: its tree alone may use the egress.
    if let Some(peers) = &spec.egress_peers {
        peers.admit_browser(pid);
    }
    // Written at once: a daemon killed while Chromium starts leaves a pid
    // file the next start ends it by.
    if let Err(e) = std::fs::write(&spec.pid_file, format!("{pid}\n")) {
        tracing::warn!(slot = spec.slot, error = %e, "cannot write chromium.pid");
    }
    match started(spec, &mut child).await {
        Ok(ws_url) => {
            let outside_group = crashpad_of(spec);
            Ok(Started {
                child,
                pid,
                ws_url,
                outside_group,
                display,
            })
        }
        Err(e) => {
            let outside = crashpad_of(spec);
            kill_and_reap(&mut child).await;
            end_outside(&outside).await;
            if let Some(d) = display {
                d.end().await;
            }
            if let Some(peers) = &spec.egress_peers {
                peers.forget_browser(pid);
            }
            let _ = std::fs::remove_file(&spec.pid_file);
            Err(e)
        }
    }
}

/// The slot's virtual display, started for a headful Chromium and named in
/// its environment (the cookie file's path, never the cookie); `None`
/// without `xvfb`. Any display without one is not the slot's: unset.
async fn display_for(spec: &LaunchSpec, cmd: &mut Command) -> Result<Option<super::display::Xvfb>> {
    if !spec.xvfb {
        return Ok(None);
    }
    let d = super::display::start(
        spec.slot,
        &spec.user_data_dir,
        spec.device.screen,
        spec.launch_timeout,
    )
    .await?;
    cmd.env("DISPLAY", &d.name);
    cmd.env("XAUTHORITY", &d.auth);
    cmd.env_remove("WAYLAND_DISPLAY");
    Ok(Some(d))
}

async fn started(spec: &LaunchSpec, child: &mut Child) -> Result<String> {
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| Error::new(ErrorKind::Internal, "chromium stderr was not captured"))?;
    let mut lines = BufReader::new(stderr).lines();
    let mut tail: Vec<String> = Vec::new();
    let found = tokio::time::timeout(spec.launch_timeout, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(ws) = line.split("DevTools listening on ").nth(1) {
                return Some(ws.trim().to_string());
            }
            if tail.len() == 8 {
                tail.remove(0);
            }
            tail.push(line);
        }
        None
    })
    .await;
    let slot = spec.slot;
    match found {
        Ok(Some(ws)) => {
            // Keep draining stderr, or Chromium blocks once the pipe is full.
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::trace!(slot, "chromium: {line}");
                }
            });
            Ok(ws)
        }
        Ok(None) => Err(Error::new(
            ErrorKind::Io,
            format!(
                "slot {slot}: Chromium exited during start-up: {}",
                tail.join(" | ")
            ),
        )),
        Err(_) => Err(Error::new(
            ErrorKind::Timeout,
            format!(
                "slot {slot}: Chromium did not report its DevTools address within {}s",
                spec.launch_timeout.as_secs()
            ),
        )),
    }
}

/// End Chromium left running by an earlier run of this slot: main processes
/// on this slot's user-data-dir (the pid file's, and any other, so
/// a run killed before it wrote the file leaves nothing either). Returns the
/// first pid that was ended.
pub async fn end_stale(spec: &LaunchSpec) -> Option<u32> {
    // The profile folder is the slot's alone (the port may have changed in
    // the config since).
    let dir_arg = format!("--user-data-dir={}", spec.user_data_dir.display());
    let ours = |pid: u32| {
        cmdline(pid)
            .is_some_and(|a| a.contains(&dir_arg) && !a.iter().any(|x| x.starts_with("--type=")))
    };
    let from_file: Option<u32> = std::fs::read_to_string(&spec.pid_file)
        .ok()
        .and_then(|p| p.trim().parse().ok());
    let _ = std::fs::remove_file(&spec.pid_file);
    // The pid file's, if it is still ours (the pid may be reused), and any
    // other main process on this slot's profile (a run killed
    // before it wrote the file).
    let mut stale: Vec<u32> = from_file.filter(|p| ours(*p)).into_iter().collect();
    let others: Vec<u32> = all_pids()
        .into_iter()
        .filter(|p| !stale.contains(p) && ours(*p))
        .collect();
    stale.extend(others);
    end_main_processes(spec.slot, &stale).await;
    // Its display, after it (a Chromium that lost its display exits anyway).
    let display = super::display::end_stale(&spec.user_data_dir).await;
    if stale.is_empty() {
        return display;
    }
    remove_singleton_locks(&spec.user_data_dir);
    stale.first().copied()
}

/// End Chromium main processes (their groups), `slot`'s, left by an
/// earlier run; reaped when this process inherited them.
async fn end_main_processes(slot: usize, stale: &[u32]) {
    for &pid in stale {
        tracing::warn!(slot, pid, "ending Chromium left by an earlier run");
        let mut group = group_members(pid);
        group.push(pid);
        signal_group(pid, libc::SIGKILL);
        for _ in 0..100 {
            if !pid_alive(pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Its parent died with the earlier run; as subreaper we may have inherited it.
        reap(&group).await;
    }
}

/// Chromium main processes on the profile `user_data_dir` that no live daemon
/// started: their parent is gone (they were handed to init or a
/// subreaper) or is not an `idpool` process. What `idpool doctor` ends
/// while a daemon may be running: a running daemon's own browsers are its
/// children and are left alone.
pub fn orphans(user_data_dir: &Path) -> Vec<u32> {
    let dir_arg = format!("--user-data-dir={}", user_data_dir.display());
    let is_idpool = |pid: u32| {
        cmdline(pid)
            .and_then(|a| a.first().cloned())
            .is_some_and(|exe| Path::new(&exe).file_name().is_some_and(|n| n == "idpool"))
    };
    all_pids()
        .into_iter()
        .filter(|&p| {
            cmdline(p).is_some_and(|a| {
                a.contains(&dir_arg) && !a.iter().any(|x| x.starts_with("--type="))
            })
        })
        .filter(|&p| !super::process::parent(p).is_some_and(is_idpool))
        .collect()
}

/// End [`orphans`] of slot `slot`'s profile `user_data_dir` (and their
/// display); the pids ended.
pub async fn end_orphans(slot: usize, user_data_dir: &Path) -> Vec<u32> {
    let found = orphans(user_data_dir);
    if !found.is_empty() {
        end_main_processes(slot, &found).await;
        let _ = super::display::end_stale(user_data_dir).await;
        remove_singleton_locks(user_data_dir);
    }
    found
}

/// Chromium refuses a profile whose `Singleton*` links point at a dead process.
fn remove_singleton_locks(dir: &Path) {
    for name in ["SingletonLock", "SingletonSocket", "SingletonCookie"] {
        let p = dir.join(name);
        if p.symlink_metadata().is_ok() {
            let _ = std::fs::remove_file(&p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions() {
        assert_eq!(
            major_of("Chromium 156.0.8078.73 built on Debian GNU/Linux 12"),
            Some(156)
        );
        assert_eq!(major_of("Google Chrome 149.0.7000.1 "), Some(149));
        assert_eq!(major_of("nonsense"), None);
    }

    #[test]
    fn args_are_ours_alone() {
        let spec = LaunchSpec {
            slot: 1,
            executable: "/usr/bin/chromium".into(),
            port: 19301,
            user_data_dir: "/d/slots/1/chromium".into(),
            pid_file: "/d/slots/1/chromium.pid".into(),
            headless: true,
            xvfb: false,
            user_agent: "UA/1.0".into(),
            languages: "de-DE,de,en".into(),
            device: super::super::Device::desktop(1280, 800),
            pointer: crate::identity::profile::Pointer::Fine,
            proxy_server: Some("http://127.0.0.1:41234".into()),
            spki: vec!["AAA=".into(), "BBB=".into()],
            trust_roots: Vec::new(),
            launch_timeout: Duration::from_secs(5),
            netns: None,
            sandbox: true,
            egress_peers: None,
        };
        let a = spec.args();
        for want in [
            "--remote-debugging-port=19301",
            "--user-data-dir=/d/slots/1/chromium",
            "--user-agent=UA/1.0",
            "--lang=de-DE",
            "--accept-lang=de-DE,de,en",
            "--proxy-server=http://127.0.0.1:41234",
            "--proxy-bypass-list=<-loopback>",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--ignore-certificate-errors-spki-list=AAA=,BBB=",
            "--disable-quic",
        ] {
            assert!(a.iter().any(|x| x == want), "missing {want}: {a:?}");
        }
        assert!(
            !a.iter()
                .any(|x| x.contains("enable-automation") || x == "--ignore-certificate-errors")
        );
        // Flags a page can read and a person's browser lacks (issue 56):
        // the heap limit (`performance.memory.jsHeapSizeLimit`) and hidden
        // scroll bars (a page measures their width).
        assert!(
            !a.iter()
                .any(|x| x.contains("max-old-space-size") || x == "--hide-scrollbars"),
            "{a:?}"
        );
    }
}
