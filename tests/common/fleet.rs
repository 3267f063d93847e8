//! A fleet for tests: a real `redis-server` on a loopback port of its own,
//! and daemons that share one testbed (each with its own folder, config and
//! data dir under the env).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::Env;
use super::daemon::{Daemon, free_port};

/// A `redis-server` this test started (ended by PID on drop), with a
/// password (`requirepass`): the daemons reach it the way production does.
pub struct Redis {
    pub port: u16,
    pub password: String,
    child: Option<std::process::Child>,
    dir: std::path::PathBuf,
}

impl Redis {
    /// Start one on a free port, with no persistence (a restart starts empty,
    /// the hardest case for reconciling).
    pub async fn start(env: &Env) -> Redis {
        let mut r = Redis {
            port: free_port(),
            password: format!("pw{:016x}", rand::random::<u64>()),
            child: None,
            dir: env.path("redis"),
        };
        std::fs::create_dir_all(&r.dir).expect("redis dir");
        r.launch().await;
        r
    }

    async fn launch(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .args(["--requirepass", &self.password])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs (apt-get install redis-server)");
        self.child = Some(child);
        for _ in 0..100 {
            if self.cli(&["PING"]).await.trim() == "PONG" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server did not answer on port {}", self.port);
    }

    pub fn url(&self) -> String {
        format!("redis://:{}@127.0.0.1:{}/", self.password, self.port)
    }

    /// `redis-cli -p PORT ARGS…`, its output.
    pub async fn cli(&self, args: &[&str]) -> String {
        let out = tokio::process::Command::new("redis-cli")
            .args([
                "-p",
                &self.port.to_string(),
                "--no-auth-warning",
                "-a",
                &self.password,
            ])
            .args(args)
            .output()
            .await
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stop it (SIGTERM, reaped).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let _ = c.wait();
        }
    }

    /// Start it again on the same port (empty).
    pub async fn restart(&mut self) {
        self.stop();
        self.launch().await;
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The cluster key every test daemon shares.
pub const CLUSTER_KEY: &str = "fleet-test-key-0123456789abcdef";

/// How a fleet node is configured beyond its name.
pub struct NodeOpts<'a> {
    pub slots: usize,
    /// More keys of `[cluster]`.
    pub cluster: &'a str,
    /// More keys of `[pool]`.
    pub pool: &'a str,
    /// More sections at the end.
    pub tail: &'a str,
    /// The anonymous caller's role.
    pub role: &'a str,
    /// More keys of `[server]`.
    pub server: &'a str,
}

impl Default for NodeOpts<'_> {
    fn default() -> Self {
        NodeOpts {
            slots: 2,
            cluster: "",
            pool: "",
            tail: "",
            role: "operator",
            server: "",
        }
    }
}

/// Start daemon `name` of a fleet: `slots` slots (`pool_extra` more keys of
/// `[pool]`), `[cluster]` on `redis` with `cluster_extra`.
pub async fn node(
    env: &Env,
    redis: &Redis,
    name: &str,
    slots: usize,
    cluster_extra: &str,
    pool_extra: &str,
) -> Daemon {
    let opts = NodeOpts {
        slots,
        cluster: cluster_extra,
        pool: pool_extra,
        ..NodeOpts::default()
    };
    node_with(env, redis, name, &opts).await
}

/// [`node`] with every option.
pub async fn node_with(env: &Env, redis: &Redis, name: &str, o: &NodeOpts<'_>) -> Daemon {
    let port = free_port();
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).expect("node dir");
    std::fs::write(dir.join("cluster.key"), CLUSTER_KEY).expect("key file");
    let base = super::free_base_port(o.slots + 2);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nanonymous_role = \"{}\"\n{}\n\n\
         [pool]\nsize = {}\nbase_port = {base}\ndata_dir = \"data\"\n\
         strategies_dir = \"../strategies\"\nprofiles_dir = \"../profiles\"\n{}\n\n\
         [security]\nallow_private_networks = true\nextra_root_certs = [\"../testbed/ca.pem\"]\n\n\
         [cluster]\nredis_url = \"{}\"\nnode = \"{name}\"\nkey_file = \"cluster.key\"\n{}\n\n{}\n",
        o.role,
        o.server,
        o.slots,
        o.pool,
        redis.url(),
        o.cluster,
        o.tail
    );
    std::fs::write(dir.join("idpool.toml"), config).expect("config");
    let log = dir.join("daemon.log");
    let err = std::fs::File::create(&log).expect("log file");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"));
    let child = cmd
        .arg("--config")
        .arg(dir.join("idpool.toml"))
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .expect("idpool serve starts");
    Daemon::up(child, port, log).await
}

/// Call `tool` through the REST face: (HTTP status, body).
pub async fn rest(d: &Daemon, tool: &str, args: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(d.url(&format!("/api/v1/tools/{tool}")))
        .json(&args)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("POST tool");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// `pool_status` of `d` (with `fleet` when asked).
pub async fn status(d: &Daemon, fleet: bool) -> Value {
    let (code, v) = rest(d, "pool_status", json!({"fleet": fleet})).await;
    assert_eq!(code, 200, "{v}");
    v
}

/// The fleet ids `d` holds now.
pub async fn held(d: &Daemon) -> Vec<String> {
    let v = status(d, false).await;
    v["slots"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|s| s["held"] == json!(true))
                .filter_map(|s| s["fleet_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The most requests the shop was answering at once (from its log).
pub fn most_at_once<'a>(log: impl IntoIterator<Item = &'a idpool_testbed::LogEntry>) -> usize {
    let mut edges: Vec<(u64, i32)> = log
        .into_iter()
        .flat_map(|e| [(e.at_ms, 1), (e.done_ms, -1)])
        .collect();
    // An answer done at t frees its place before one arriving at t.
    edges.sort_by_key(|(t, d)| (*t, *d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// Poll `f` every 50 ms until it holds or `limit` passes; how long it took.
pub async fn within<F, Fut>(limit: Duration, mut f: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        if f().await {
            return Some(t0.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Sign slot `slot` of `d` (an admin's daemon) in to the testbed's shop: a
/// person's session, imported.
pub async fn import_signed_in(env: &Env, d: &Daemon, slot: usize) {
    let session = super::signed_in_session(env).await;
    let r = reqwest::Client::new()
        .post(d.url(&format!("/api/v1/slots/{slot}/session-import")))
        .json(&json!({"session": session}))
        .send()
        .await
        .expect("import");
    assert!(
        r.status().is_success(),
        "{}",
        r.text().await.unwrap_or_default()
    );
}
