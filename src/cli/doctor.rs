//! `idpool doctor`: what breaks installs, checked one by one as the user
//! running it (run it as the service's user: `sudo -u idpool idpool doctor`):
//! Chromium and its version, the CDP ports, the browsers' isolation (and
//! what they expose without it), the data dir, the audit log, the keys file,
//! extra roots, strategies and profiles, proxies, calibration records, the
//! fleet and the daemon. One line per check, with the fix; exit 1 when a
//! check fails.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use idpool::config::{Config, SlotPlan};
use idpool::identity::browser::launcher;

mod fleet;
mod folders;
mod isolation;
mod ports;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// One JSON object per check instead of lines.
    #[arg(long)]
    pub json: bool,
    /// An API key of the running daemon: with it, the linkage check asks
    /// the daemon which identities are signed in where.
    #[arg(long, env = "IDPOOL_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    detail: String,
    fix: Option<String>,
}

/// `1 slot`, `2 slots` (`strateg`: `1 strategy`, `2 strategies`).
fn n(count: usize, word: &str) -> String {
    match (count, word) {
        (1, "strateg") => "1 strategy".into(),
        (_, "strateg") => format!("{count} strategies"),
        (1, w) => format!("1 {w}"),
        (_, w) => format!("{count} {w}s"),
    }
}

fn ok(check: &'static str, detail: impl Into<String>) -> Check {
    Check {
        check,
        status: Status::Ok,
        detail: detail.into(),
        fix: None,
    }
}

fn bad(
    status: Status,
    check: &'static str,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        check,
        status,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

pub async fn run(explicit: Option<&Path>, a: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut checks = Vec::new();
    let source = idpool::config::resolve_path(explicit)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<embedded defaults>".into());
    match Config::load(explicit) {
        Ok(cfg) => {
            checks.push(ok("config", format!("{source} loads")));
            checks.extend(all(explicit, &cfg, a.key.as_deref()).await);
        }
        Err(d) => checks.push(bad(
            Status::Fail,
            "config",
            d.to_string(),
            "fix the config at the line shown (`idpool check-config` lists every problem)",
        )),
    }
    let mut out = std::io::stdout().lock();
    for c in &checks {
        if a.json {
            writeln!(out, "{}", serde_json::to_string(c)?)?;
        } else {
            writeln!(out, "{}", line(c))?;
        }
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    if !a.json {
        writeln!(
            out,
            "{} checks: {} ok, {warned} to look at, {failed} failed",
            checks.len(),
            checks.len() - failed - warned
        )?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `ok    chromium: …` / `FAIL  keys file: … Fix: …`.
fn line(c: &Check) -> String {
    let tag = match c.status {
        Status::Ok => "ok  ",
        Status::Warn => "warn",
        Status::Fail => "FAIL",
    };
    match &c.fix {
        Some(fix) => format!("{tag}  {}: {}. Fix: {fix}", c.check, c.detail),
        None => format!("{tag}  {}: {}", c.check, c.detail),
    }
}

async fn all(explicit: Option<&Path>, cfg: &Config, key: Option<&str>) -> Vec<Check> {
    let plan: Vec<SlotPlan> = cfg
        .slot_plan()
        .into_iter()
        .chain(cfg.spare_plan())
        .collect();
    let mut checks = Vec::new();
    let (check, version) = match chromium(cfg).await {
        Ok((c, v)) => (c, Some(v)),
        Err(c) => (c, None),
    };
    checks.push(check);
    checks.push(ports::cdp(cfg, &plan));
    checks.push(isolation::check(cfg));
    checks.push(folders::data_dir(&cfg.pool.data_dir));
    checks.push(folders::audit_log(cfg));
    checks.push(keys_file(cfg));
    checks.push(extra_roots(cfg));
    checks.push(definitions(explicit));
    checks.push(proxies(cfg, &plan).await);
    checks.push(calibration(cfg, &plan, version.as_deref()));
    checks.push(looks(cfg, &plan));
    checks.push(geography(cfg, &plan));
    checks.push(linkage(cfg, &plan, key).await);
    checks.push(fleet::check(cfg).await);
    checks.push(daemon(cfg).await);
    checks.push(leftovers(cfg, &plan).await);
    checks
}

/// Chromium left running by an earlier life of this data dir's daemon (it
/// was killed, or its machine's init took its children): ended here, as
/// the daemon's own start does. A running daemon's browsers are its
/// children and are left alone.
async fn leftovers(cfg: &Config, plan: &[SlotPlan]) -> Check {
    const NAME: &str = "leftover browsers";
    let mut ended = Vec::new();
    for slot in plan {
        let dir = cfg.pool.data_dir.join("slots").join(slot.id.to_string());
        for pid in launcher::end_orphans(slot.id, &dir.join("chromium")).await {
            ended.push(format!("slot {} (pid {pid})", slot.id));
        }
    }
    if ended.is_empty() {
        return ok(NAME, "no Chromium left by an earlier run");
    }
    bad(
        Status::Warn,
        NAME,
        format!(
            "ended {} Chromium left by an earlier run: {}",
            ended.len(),
            ended.join(", ")
        ),
        "nothing more to do; if it recurs, the daemon is being killed without its shutdown (see `journalctl -u idpool`)",
    )
}

/// Chromium found, and what its `--version` says (`Ok` carries the line).
async fn chromium(cfg: &Config) -> Result<(Check, String), Check> {
    let fix = "install Debian's `chromium` (apt-get install chromium), or set browser.executable";
    let exe = launcher::find_executable(cfg.browser.executable.as_deref())
        .map_err(|e| bad(Status::Fail, "chromium", e.to_string(), fix))?;
    match launcher::executable_version(&exe).await {
        Some(v) => Ok((ok("chromium", format!("{}: {v}", exe.display())), v)),
        None => Err(bad(
            Status::Fail,
            "chromium",
            format!("{} does not answer `--version` within 10 s", exe.display()),
            fix,
        )),
    }
}

fn keys_file(cfg: &Config) -> Check {
    use std::os::unix::fs::PermissionsExt;
    const NAME: &str = "keys file";
    let path = &cfg.server.keys_file;
    let Ok(meta) = std::fs::metadata(path) else {
        let loopback = cfg.server.listen.ip().is_loopback();
        return if loopback {
            ok(
                NAME,
                format!(
                    "none at {}: loopback callers get role {}",
                    path.display(),
                    cfg.server.anonymous_role.as_str()
                ),
            )
        } else {
            bad(
                Status::Warn,
                NAME,
                format!(
                    "none at {} while listening on {}",
                    path.display(),
                    cfg.server.listen
                ),
                "`idpool keys add NAME --role ROLE` (callers from the network need keys)",
            )
        };
    };
    if let Err(e) = std::fs::File::open(path) {
        return bad(
            Status::Fail,
            NAME,
            format!("{} cannot be read by this user ({e})", path.display()),
            format!(
                "let the daemon's group read it: `chown root:idpool {0} && chmod 0640 {0}`",
                path.display()
            ),
        );
    }
    match idpool::auth::Keys::load(path) {
        Err(d) => bad(
            Status::Fail,
            NAME,
            d.to_string(),
            "fix the file as the message says (`idpool keys list` reads it)",
        ),
        Ok(keys) => {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o004 != 0 {
                return bad(
                    Status::Warn,
                    NAME,
                    format!("{} is readable by everyone (mode {mode:o})", path.display()),
                    format!("chmod 0640 {}", path.display()),
                );
            }
            ok(
                NAME,
                format!(
                    "{}: {}, mode {mode:o}",
                    path.display(),
                    n(keys.entries().len(), "key")
                ),
            )
        }
    }
}

fn extra_roots(cfg: &Config) -> Check {
    const NAME: &str = "extra roots";
    let roots = &cfg.security.extra_root_certs;
    for cert in roots {
        let problem = match std::fs::read(cert) {
            Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => continue,
            Ok(_) => "holds no PEM certificate".to_string(),
            Err(e) => format!("cannot be read by this user ({e})"),
        };
        return bad(
            Status::Fail,
            NAME,
            format!("{} {problem}", cert.display()),
            "make it a readable PEM file (`chmod 0644`), or remove it from security.extra_root_certs",
        );
    }
    ok(
        NAME,
        if roots.is_empty() {
            "none configured".to_string()
        } else {
            format!("{} readable", roots.len())
        },
    )
}

/// Profiles and strategies, as `idpool check-config` validates them.
fn definitions(explicit: Option<&Path>) -> Check {
    const NAME: &str = "strategies and profiles";
    let report = super::check_config::check(explicit);
    match report.problems.as_slice() {
        [] => ok(
            NAME,
            format!(
                "{} and {} valid",
                n(report.strategies, "strateg"),
                n(report.profiles, "profile")
            ),
        ),
        [first, rest @ ..] => bad(
            Status::Fail,
            NAME,
            if rest.is_empty() {
                first.to_string()
            } else {
                format!("{first} (and {} more)", rest.len())
            },
            "fix the file at the line shown; `idpool check-config` lists every problem",
        ),
    }
}

/// Every slot's upstream proxy answers a TCP connection within 3 s.
async fn proxies(cfg: &Config, plan: &[SlotPlan]) -> Check {
    const NAME: &str = "proxies";
    let (profiles, _) = idpool::identity::profile::load_dir(&cfg.pool.profiles_dir);
    let mut seen = std::collections::BTreeMap::new();
    for slot in plan {
        let url = match &slot.proxy {
            Some(t) => t.render(slot.id, "doctor").ok(),
            None => profiles.get(&slot.profile).and_then(|p| p.proxy.clone()),
        };
        if let Some(url) = url {
            seen.entry(url.host_port())
                .or_insert((slot.id, url.redacted()));
        }
    }
    for ((host, port), (slot, shown)) in &seen {
        let connect = tokio::net::TcpStream::connect((host.as_str(), *port));
        let why = match tokio::time::timeout(Duration::from_secs(3), connect).await {
            Ok(Ok(_)) => continue,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 3 s".into(),
        };
        return bad(
            Status::Fail,
            NAME,
            format!("slot {slot}'s proxy {shown} cannot be reached ({why})"),
            "start the proxy or correct its address ([pool] proxies, [[pool.slot]] proxy or the profile's proxy)",
        );
    }
    ok(
        NAME,
        if seen.is_empty() {
            "none configured (direct)".to_string()
        } else {
            format!("{} reachable", seen.len())
        },
    )
}

/// Each slot's saved calibration was made with the Chromium installed now.
fn calibration(cfg: &Config, plan: &[SlotPlan], installed: Option<&str>) -> Check {
    const NAME: &str = "calibration";
    let installed = installed.unwrap_or_default();
    let mut current = 0;
    let mut pending = 0;
    for slot in plan {
        let dir = cfg.pool.data_dir.join("slots").join(slot.id.to_string());
        match idpool::identity::calibrate::Record::load(&dir) {
            None => pending += 1,
            Some(r) if installed.is_empty() || r.chromium == installed => current += 1,
            Some(r) => {
                return bad(
                    Status::Warn,
                    NAME,
                    format!(
                        "slot {} was calibrated against {}, the installed one is {installed}",
                        slot.id, r.chromium
                    ),
                    format!(
                        "it recalibrates at its next browser launch; now: `idpool calibrate --slot {}`",
                        slot.id
                    ),
                );
            }
        }
    }
    let mut detail = format!("{} current", n(current, "slot"));
    if pending > 0 {
        detail.push_str(&format!(
            ", {pending} not calibrated yet (at their first browser launch)"
        ));
    }
    ok(NAME, detail)
}

/// Each slot whose profile declares its proxy's geography (`geo`) has a
/// time zone and languages that agree with it.
fn geography(cfg: &Config, plan: &[SlotPlan]) -> Check {
    const NAME: &str = "geography";
    let (profiles, _) = idpool::identity::profile::load_dir(&cfg.pool.profiles_dir);
    let mut declared = 0;
    for slot in plan {
        let Some(p) = profiles.get(&slot.profile) else {
            continue;
        };
        let Some(geo) = &p.geo else {
            continue;
        };
        declared += 1;
        let langs = idpool::identity::profile::language_tags(&p.accept_language);
        let off = geo.disagreements(p.timezone.as_deref(), &langs);
        if !off.is_empty() {
            return bad(
                Status::Warn,
                NAME,
                format!(
                    "slot {} (profile `{}`) disagrees with its proxy's geography: {}",
                    slot.id,
                    p.name,
                    off.join("; ")
                ),
                "set the profile's `timezone` and `accept_language` to the proxy's (or drop them: the time zone follows `geo`)",
            );
        }
    }
    ok(
        NAME,
        if declared == 0 {
            "no profile declares its proxy's geography (`geo`)".to_string()
        } else if declared == 1 {
            "1 slot agrees with its proxy's geography".to_string()
        } else {
            format!("{declared} slots agree with their proxy's geography")
        },
    )
}

/// Slots a fingerprinting library would take for one device (every
/// component each measured at calibration equal), signed-in identities of
/// one site among them (asked of the running daemon when `key` is given),
/// and profiles that claim another operating system (`pretend_os`).
async fn linkage(cfg: &Config, plan: &[SlotPlan], key: Option<&str>) -> Check {
    use idpool::identity::persona::linkage;
    let (profiles, _) = idpool::identity::profile::load_dir(&cfg.pool.profiles_dir);
    let pretending: Vec<String> = plan
        .iter()
        .filter(|s| profiles.get(&s.profile).is_some_and(|p| p.pretend_os))
        .map(|s| format!("slot {} (profile `{}`)", s.id, s.profile))
        .collect();
    if let Some(key) = key {
        let args = super::daemon::DaemonArgs {
            url: None,
            key: Some(key.to_string()),
        };
        if let Ok(status) =
            super::slots::get_json(&args.base(cfg), "/api/v1/slots", Some(key)).await
            && status["linkage"].is_object()
        {
            return linkage_verdict(&status["linkage"], &pretending, true);
        }
    }
    let measured: Vec<(usize, linkage::Components)> = plan
        .iter()
        .filter_map(|slot| {
            let dir = cfg.pool.data_dir.join("slots").join(slot.id.to_string());
            let check = idpool::identity::calibrate::Record::load(&dir)?.browser_check?;
            Some((slot.id, linkage::components_of(&check.seen)?))
        })
        .collect();
    linkage_verdict(&linkage::report(&measured), &pretending, false)
}

/// The linkage check's verdict on a linkage report (`pool_status`'s
/// `linkage`, or one made from the calibration records on disk, which
/// knows no sign-ins: `daemon` says whether it came from the daemon).
fn linkage_verdict(report: &serde_json::Value, pretending: &[String], daemon: bool) -> Check {
    const NAME: &str = "linkage";
    let pairs = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|p| format!("slots {} and {}", p[0], p[1]))
            .collect()
    };
    let sharing: Vec<String> = report["signed_in_sharing"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(site, p)| format!("{site}: {}", pairs(p).join(", ")))
        .collect();
    if !sharing.is_empty() {
        return bad(
            Status::Warn,
            NAME,
            format!(
                "signed-in identities of one site share a device fingerprint ({}): the site can link their accounts",
                sharing.join("; ")
            ),
            "retire one of each pair (`idpool retire N`: a new persona, its account signed in again), or set `[routing] distinct_devices = true` in the strategy so the site never gets calls from both",
        );
    }
    let same = pairs(&report["same_device"]);
    if !same.is_empty() {
        return bad(
            Status::Warn,
            NAME,
            format!(
                "one device to a fingerprinting library: {} (a site links what they do){}",
                same.join(", "),
                if daemon {
                    ""
                } else {
                    "; give IDPOOL_KEY to learn which are signed in where"
                }
            ),
            "retire one of each pair (`idpool retire N`: a new persona)",
        );
    }
    if !pretending.is_empty() {
        return bad(
            Status::Warn,
            NAME,
            format!(
                "{} claim another operating system than this machine's (pretend_os): their fonts, voices and WebGL are this machine's",
                pretending.join(", ")
            ),
            "use the machine's platform in those profiles, or accept that a site can tell",
        );
    }
    let measured = report["measured"].as_array().map_or(0, Vec::len);
    ok(
        NAME,
        if measured == 0 {
            "no slot measured yet (each measures its fingerprint at its calibration)".to_string()
        } else {
            format!(
                "{} measured, no two one device ({} are the machine's, shared by every slot of it)",
                n(measured, "slot"),
                idpool::identity::persona::linkage::MACHINE.join(", ")
            )
        },
    )
}

/// What each slot browser's self-check found at its last calibration:
/// a warning names every slot with a signal beyond WebGL's (which is the
/// machine's truth, not a lie to fix).
fn looks(cfg: &Config, plan: &[SlotPlan]) -> Check {
    const NAME: &str = "browser looks";
    let mut checked = 0;
    let mut webgl = 0;
    let mut found = Vec::new();
    for slot in plan {
        let dir = cfg.pool.data_dir.join("slots").join(slot.id.to_string());
        let Some(check) =
            idpool::identity::calibrate::Record::load(&dir).and_then(|r| r.browser_check)
        else {
            continue;
        };
        checked += 1;
        let names: Vec<&str> = check
            .signals
            .iter()
            .map(|s| s.name.as_str())
            .filter(|n| *n != "webgl")
            .collect();
        if check.signals.iter().any(|s| s.name == "webgl") {
            webgl += 1;
        }
        if !names.is_empty() {
            found.push(format!("slot {}: {}", slot.id, names.join(", ")));
        }
    }
    if !found.is_empty() {
        return bad(
            Status::Warn,
            NAME,
            format!(
                "the self-check found signals a person's Chromium lacks: {}",
                found.join("; ")
            ),
            "`idpool slots` shows each signal's detail; docs/fidelity.md says what each means",
        );
    }
    let mut detail = format!("{} without signals", n(checked, "slot"));
    if webgl > 0 {
        detail.push_str(&format!(
            " ({webgl} with a software WebGL renderer: no GPU here)"
        ));
    }
    if checked == 0 {
        detail = "no self-check yet (each slot runs one at its calibration)".into();
    }
    ok(NAME, detail)
}

/// The daemon's `/healthz` and `/readyz` at `server.listen`.
async fn daemon(cfg: &Config) -> Check {
    const NAME: &str = "daemon";
    let args = super::daemon::DaemonArgs {
        url: None,
        key: None,
    };
    let base = args.base(cfg);
    let client = match wreq::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(3))
        .build()
    {
        Ok(c) => c,
        Err(e) => return bad(Status::Fail, NAME, e.to_string(), "report this"),
    };
    let get = |path: &str| client.get(format!("{base}{path}")).send();
    match get("/healthz").await {
        Ok(r) if r.status().is_success() => {
            let ready = match get("/readyz").await {
                Ok(r) => r.text().await.unwrap_or_default().trim().to_string(),
                Err(e) => e.to_string(),
            };
            if ready.starts_with("ready") {
                ok(NAME, format!("answers at {base}: {ready}"))
            } else {
                bad(
                    Status::Warn,
                    NAME,
                    format!("answers at {base} but is {ready}"),
                    "`idpool slots` shows which breakers are open",
                )
            }
        }
        Ok(r) => bad(
            Status::Fail,
            NAME,
            format!("{base}/healthz answered {}", r.status()),
            "is another program on server.listen?",
        ),
        Err(_) => bad(
            Status::Warn,
            NAME,
            format!("no daemon answers at {base}"),
            "start it: `systemctl start idpool` (or `idpool serve`); `journalctl -u idpool` says why it stopped",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linkage_names_signed_in_pairs_first_then_devices_then_pretenders() {
        let clean =
            serde_json::json!({"measured": [0, 1], "same_device": [], "signed_in_sharing": {}});
        assert_eq!(linkage_verdict(&clean, &[], true).status, Status::Ok);
        let shared = serde_json::json!({"measured": [0, 1], "same_device": [[0, 1]],
            "signed_in_sharing": {"testshop": [[0, 1]]}});
        let c = linkage_verdict(&shared, &[], true);
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.contains("testshop: slots 0 and 1"), "{}", c.detail);
        let devices = serde_json::json!({"measured": [0, 1], "same_device": [[0, 1]]});
        let c = linkage_verdict(&devices, &[], false);
        assert!(
            c.detail.contains("slots 0 and 1") && c.detail.contains("IDPOOL_KEY"),
            "{}",
            c.detail
        );
        let c = linkage_verdict(&clean, &["slot 3 (profile `win`)".into()], true);
        assert!(c.detail.contains("pretend_os"), "{}", c.detail);
    }
}
