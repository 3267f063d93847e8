//! A real `idpool serve` process for tests, and a raw MCP client over HTTP.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::Env;

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// `idpool --config <env>/idpool.toml ARGS...` as a command.
pub fn idpool(env: &Env) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_idpool"));
    c.arg("--config").arg(env.path("idpool.toml"));
    c
}

/// Add a key with the CLI; returns the key it printed.
pub async fn add_key(env: &Env, name: &str, role: &str) -> String {
    add_key_granted(env, name, role, &[]).await
}

/// [`add_key`] with `--grant` for each of `grants`.
pub async fn add_key_granted(env: &Env, name: &str, role: &str, grants: &[&str]) -> String {
    let mut cmd = idpool(env);
    cmd.args(["keys", "add", name, "--role", role]);
    for g in grants {
        cmd.args(["--grant", g]);
    }
    let out = cmd.output().await.expect("idpool keys add runs");
    assert!(
        out.status.success(),
        "keys add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string()
}

/// A running daemon.
pub struct Daemon {
    pub child: tokio::process::Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Daemon {
    /// Write idpool.toml (`slots` slots, `[server]` with `server_extra`) and start
    /// `idpool serve`; returns once `/healthz` answers.
    pub async fn start(env: &Env, slots: usize, server_extra: &str) -> Daemon {
        Self::start_with(env, slots, server_extra, "", &[]).await
    }

    /// [`Daemon::start`] with more TOML after `[server]` and extra environment.
    pub async fn start_with(
        env: &Env,
        slots: usize,
        server_extra: &str,
        toml_extra: &str,
        vars: &[(&str, String)],
    ) -> Daemon {
        Self::start_at(env, free_port(), slots, server_extra, toml_extra, vars).await
    }

    /// [`Daemon::start_with`] on a chosen port (a restart keeps its address).
    pub async fn start_at(
        env: &Env,
        port: u16,
        slots: usize,
        server_extra: &str,
        toml_extra: &str,
        vars: &[(&str, String)],
    ) -> Daemon {
        Self::launch(env, port, slots, (server_extra, toml_extra), vars, None).await
    }

    /// [`Daemon::start`] as another user (`uid`, same gid): the env's folder
    /// is handed to that user first.
    pub async fn start_as(env: &Env, slots: usize, uid: u32) -> Daemon {
        Self::launch(env, free_port(), slots, ("", ""), &[], Some(uid)).await
    }

    async fn launch(
        env: &Env,
        port: u16,
        slots: usize,
        (server_extra, toml_extra): (&str, &str),
        vars: &[(&str, String)],
        uid: Option<u32>,
    ) -> Daemon {
        // Without a keys file callers get anonymous_role (viewer by default);
        // the tests call as operators unless they say otherwise.
        let anonymous = if server_extra.contains("anonymous_role") {
            ""
        } else {
            "anonymous_role = \"operator\"\n"
        };
        env.write_config_with(
            slots,
            true,
            super::free_base_port(slots),
            &format!(
                "[server]\nlisten = \"127.0.0.1:{port}\"\n{anonymous}{server_extra}\n\n{toml_extra}\n"
            ),
        );
        let log = env.path("daemon.log");
        let err = std::fs::File::create(&log).expect("log file");
        let mut cmd = idpool(env);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        if let Some(uid) = uid {
            let chown = std::process::Command::new("chown")
                .args(["-R", &format!("{uid}:{uid}")])
                .arg(env.path(""))
                .status()
                .expect("chown runs");
            assert!(chown.success(), "chown the env to {uid}");
            cmd.uid(uid).gid(uid);
        }
        let child = cmd
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("idpool serve starts");
        Daemon::up(child, port, log).await
    }

    /// A started `idpool serve`, once `/healthz` answers (within 15 s).
    pub async fn up(child: tokio::process::Child, port: u16, log: PathBuf) -> Daemon {
        let d = Daemon { child, port, log };
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(r) = http.get(d.url("/healthz")).send().await
                && r.status().is_success()
            {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the daemon did not come up:\n{}", d.log_text());
    }

    /// GET `path` with `key`; the body as text.
    pub async fn get_text(&self, path: &str, key: Option<&str>) -> String {
        let mut b = reqwest::Client::new().get(self.url(path));
        if let Some(k) = key {
            b = b.bearer_auth(k);
        }
        let r = b.send().await.expect("GET");
        r.text().await.expect("text")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `POST /api/v1/tools/{name}` without a key: the status and the JSON.
    pub async fn rest_tool(&self, name: &str, args: Value) -> (u16, Value) {
        let r = reqwest::Client::new()
            .post(self.url(&format!("/api/v1/tools/{name}")))
            .json(&args)
            .send()
            .await
            .expect("post");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.child.id().expect("daemon pid") as i32;
        // SAFETY: a plain kill(2) on the pid of our own child.
        unsafe {
            libc::kill(pid, sig);
        }
    }

    /// SIGHUP, then wait until the daemon says the reload is done.
    pub async fn reload(&self) {
        let done = |t: String| t.matches("reload done").count();
        let before = done(self.log_text());
        self.signal(libc::SIGHUP);
        for _ in 0..200 {
            if done(self.log_text()) > before {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the reload did not finish:\n{}", self.log_text());
    }

    /// SIGTERM and wait; the daemon must exit 0.
    pub async fn stop(self) {
        self.signal(libc::SIGTERM);
        self.wait_exit().await;
    }

    /// Wait for the daemon to exit (after a signal); it must exit 0.
    pub async fn wait_exit(mut self) {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the daemon stops within 60 s")
            .expect("wait");
        assert!(
            status.success(),
            "daemon exit {status}:\n{}",
            self.log_text()
        );
    }
}

impl Drop for Daemon {
    /// A test that fails half-way still stops its daemon the clean way, so the
    /// daemon ends its Chromium (SIGKILL would orphan them).
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        self.signal(libc::SIGTERM);
        let mut stopped = false;
        for _ in 0..300 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                stopped = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !stopped {
            // The test's runtime (its testbed, its proxies) is blocked here:
            // a daemon waiting on them may not finish in time. Say so, and
            // end what it started.
            let log = self.log_text();
            let tail: String = log.lines().rev().take(40).collect::<Vec<_>>().join("\n");
            eprintln!(
                "the daemon did not stop within 30 s of SIGTERM; its log's last lines, newest first:\n{tail}"
            );
            let _ = self.child.start_kill();
            for _ in 0..50 {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if let Some(dir) = self.log.parent() {
            for pid in super::end_browsers_under(dir) {
                eprintln!("ended Chromium {pid}, left behind by the test's daemon");
            }
        }
    }
}

/// A raw Streamable HTTP MCP client (one session).
pub struct Mcp {
    pub http: reqwest::Client,
    pub url: String,
    pub key: Option<String>,
    pub session: Option<String>,
    pub protocol: Option<String>,
}

/// One POST's answer: status, headers and the JSON-RPC messages in its body.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub messages: Vec<Value>,
}

impl Answer {
    /// The response to request `id`.
    pub fn response(&self, id: u64) -> &Value {
        self.messages
            .iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("no response to {id} in {:?}", self.messages))
    }
}

/// The JSON payloads of a JSON or SSE body.
pub fn messages_of(content_type: &str, body: &str) -> Vec<Value> {
    if content_type.starts_with("text/event-stream") {
        body.replace("\r\n", "\n")
            .split("\n\n")
            .filter_map(|ev| {
                let data: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    } else {
        serde_json::from_str::<Value>(body).into_iter().collect()
    }
}

impl Mcp {
    pub fn new(d: &Daemon, key: Option<&str>) -> Mcp {
        Mcp {
            // A call that never answers fails the test by name instead of
            // holding the suite until CI's limit.
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()
                .expect("an HTTP client"),
            url: d.url("/mcp"),
            key: key.map(str::to_string),
            session: None,
            protocol: None,
        }
    }

    pub fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut b = self
            .http
            .request(method, &self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(k) = &self.key {
            b = b.bearer_auth(k);
        }
        if let Some(s) = &self.session {
            b = b.header("mcp-session-id", s);
        }
        if let Some(p) = &self.protocol {
            b = b.header("mcp-protocol-version", p);
        }
        b
    }

    pub async fn send(&self, b: reqwest::RequestBuilder) -> Answer {
        let r = b.send().await.expect("POST /mcp");
        let status = r.status();
        let headers = r.headers().clone();
        let ct = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = r.text().await.expect("body");
        Answer {
            status,
            headers,
            messages: messages_of(&ct, &body),
        }
    }

    pub async fn post(&self, body: Value) -> Answer {
        self.send(self.request(reqwest::Method::POST).body(body.to_string()))
            .await
    }

    /// initialize + notifications/initialized; returns the initialize response.
    pub async fn initialize(&mut self) -> Answer {
        let a = self
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "idpool-test", "version": "1"}}}),
            )
            .await;
        if a.status.is_success() {
            self.session = a
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            self.protocol = Some("2025-11-25".into());
            let n = self
                .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
            // (A key revoked in between gets 401 here; the caller looks at `a`.)
            assert!(
                matches!(n.status, StatusCode::ACCEPTED | StatusCode::UNAUTHORIZED),
                "notifications/initialized: HTTP {}",
                n.status
            );
        }
        a
    }

    /// A request; returns the response message.
    pub async fn call(&self, id: u64, method: &str, params: Value) -> Value {
        let a = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert!(a.status.is_success(), "{method}: HTTP {}", a.status);
        a.response(id).clone()
    }

    pub async fn tool(&self, id: u64, name: &str, args: Value) -> Value {
        self.call(id, "tools/call", json!({"name": name, "arguments": args}))
            .await
    }
}

/// A script of tests/mcp-js running beside the test, read a JSON line at a time.
pub struct NodeScript {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

/// Start `node tests/mcp-js/SCRIPT ARGS...` (ended by PID when dropped).
pub fn node_script(script: &str, args: &[&str]) -> NodeScript {
    use tokio::io::AsyncBufReadExt;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-js");
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join(script))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let out = child.stdout.take().expect("stdout");
    NodeScript {
        child,
        lines: tokio::io::BufReader::new(out).lines(),
    }
}

impl NodeScript {
    /// Its next line, as JSON (within 60 s).
    pub async fn next_line(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("a line within 60 s")
            .expect("stdout readable")
            .expect("the script printed a line before it ended");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Wait for it to exit (within 30 s); whether it succeeded.
    pub async fn finish(mut self) -> bool {
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the script exits")
            .is_ok_and(|s| s.success())
    }
}

/// Run tests/mcp-js/every_tool.mjs on `d` as `key` with `plan` (its steps:
/// each tool called, its real result validated against its outputSchema by
/// Ajv 2020 strict); its JSON line.
pub async fn every_tool(d: &Daemon, key: &str, plan: &Value) -> Value {
    node_json(
        "every_tool.mjs",
        &[&d.url("/mcp"), key, &plan.to_string()],
        &[],
        600,
    )
    .await
}

/// Run tests/mcp-js/client.mjs; returns its one JSON line.
pub async fn node_client(args: &[&str], envs: &[(&str, String)]) -> Value {
    node_json("client.mjs", args, envs, 180).await
}

/// `node tests/mcp-js/SCRIPT ARGS` with `envs`, within `secs`: the one JSON
/// line it prints.
async fn node_json(script: &str, args: &[&str], envs: &[(&str, String)], secs: u64) -> Value {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-js");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript SDK is not installed: run `npm ci --prefix tests/mcp-js` (scripts/test.sh does)"
    );
    let mut c = tokio::process::Command::new("node");
    c.arg(dir.join(script)).args(args).kill_on_drop(true);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(secs), c.output())
        .await
        .unwrap_or_else(|_| panic!("{script} finishes within {secs} s"))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
