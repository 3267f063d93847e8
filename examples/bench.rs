//! The Rust side of `scripts/bench.sh`: load generators and the raw-library
//! baselines, each printing one JSON line (calls, errors, seconds, latency
//! percentiles, this process's CPU seconds). `bench/run.py` runs them in
//! interleaved rounds and writes the report.
//!
//! ```text
//! bench wreq  --url URL [--ca PEM] -c N -d SECS         raw wreq GETs (one client, chrome_149)
//! bench pool  --config FILE --tool T --args JSON -c N -d SECS
//!                                                       a tool through the pool API in-process
//! bench mcp   --url URL/mcp --tool T --args JSON -c N -d SECS [--stateless]
//!                                                       MCP Streamable HTTP clients (one
//!                                                       connection and session each; with
//!                                                       --stateless 2026-07-28 requests,
//!                                                       no session)
//! bench rest  --url URL/api/v1/tools/T --args JSON -c N -d SECS
//!                                                       the REST face (one connection each)
//! bench stdio --config FILE --idpool BIN --tool T --args JSON -c N -d SECS
//!                                                       `idpool mcp` (the stdio bridge to
//!                                                       the daemon), N requests in flight
//!                                                       on its one pipe
//! bench cdp   --url URL -n N [--chromium PATH]          raw chromiumoxide: launch, first
//!                                                       content, then N warm navigations
//! bench mcp-once --url URL/mcp --tool T --args JSON     one call on a fresh session (cold)
//! bench mcp-count --url URL/mcp --tool T --args JSON -n N  N calls in a row on one session
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

// The daemon's allocator, so in-process rows measure what the daemon runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Default)]
struct Args {
    url: String,
    ca: Option<String>,
    config: Option<String>,
    tool: String,
    args: String,
    concurrency: usize,
    duration: f64,
    count: usize,
    chromium: Option<String>,
    /// A server process whose CPU time over the measured window is reported.
    watch: Option<u32>,
    /// 2026-07-28 stateless MCP requests.
    stateless: bool,
    /// The `idpool` binary (the stdio bridge).
    idpool: Option<String>,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args> {
    let mut a = Args {
        concurrency: 1,
        duration: 5.0,
        count: 50,
        args: "{}".into(),
        ..Args::default()
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = value()?,
            "--ca" => a.ca = Some(value()?),
            "--config" => a.config = Some(value()?),
            "--tool" => a.tool = value()?,
            "--args" => a.args = value()?,
            "-c" | "--concurrency" => a.concurrency = value()?.parse()?,
            "-d" | "--duration" => a.duration = value()?.parse()?,
            "-n" | "--count" => a.count = value()?.parse()?,
            "--chromium" => a.chromium = Some(value()?),
            "--watch-pid" => a.watch = Some(value()?.parse()?),
            "--stateless" => a.stateless = true,
            "--idpool" => a.idpool = Some(value()?),
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut argv = std::env::args().skip(1);
    let mode = argv.next().unwrap_or_default();
    let a = parse_args(argv)?;
    let out = match mode.as_str() {
        "wreq" => wreq_load(&a).await?,
        "pool" => pool_load(&a).await?,
        "mcp" => mcp_load(&a).await?,
        "rest" => rest_load(&a).await?,
        "stdio" => stdio_load(&a).await?,
        "mcp-once" => mcp_once(&a).await?,
        "mcp-count" => mcp_count(&a).await?,
        "cdp" => cdp(&a).await?,
        _ => bail!(
            "usage: bench wreq|pool|mcp|rest|stdio|mcp-once|mcp-count|cdp [flags] (see the source)"
        ),
    };
    println!("{out}");
    Ok(())
}

/// This process's user + system CPU seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we hand it and has no other effect.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// User + system CPU seconds of another process, from `/proc/PID/stat`.
fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields resume after its `)`.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / hz)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Run `call` from `concurrency` workers for `duration` seconds (after a
/// short warm-up of one call each) and summarize.
async fn load<S, F, Fut>(
    watch: Option<u32>,
    concurrency: usize,
    duration: f64,
    setup: impl Fn(usize) -> Fut + Send + Sync + 'static,
    call: F,
) -> Result<Value>
where
    S: Send + 'static,
    Fut: std::future::Future<Output = Result<S>> + Send + 'static,
    F: Fn(
            &mut S,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<usize>> + Send + '_>>
        + Send
        + Sync
        + 'static,
{
    let call = Arc::new(call);
    let mut states = Vec::new();
    for i in 0..concurrency {
        let mut s = setup(i).await?;
        // Warm-up: connections, sessions, lazy state.
        (call)(&mut s).await.context("warm-up call failed")?;
        states.push(s);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_seconds();
    let server0 = watch.and_then(process_cpu_seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut s in states {
        let (call, stop) = (call.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors, mut bytes, mut first_error) =
                (Vec::new(), 0u64, 0u64, None::<String>);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match (call)(&mut s).await {
                    Ok(n) => {
                        lat.push(t.elapsed().as_secs_f64() * 1e3);
                        bytes += n as u64;
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                    }
                }
            }
            (lat, errors, bytes, first_error)
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(duration)).await;
    stop.store(true, Ordering::Relaxed);
    let server1 = watch.and_then(process_cpu_seconds);
    let (mut lat, mut errors, mut bytes, mut first_error) = (Vec::new(), 0, 0, None);
    for t in tasks {
        let (l, e, b, f) = t.await?;
        lat.extend(l);
        errors += e;
        bytes += b;
        if first_error.is_none() {
            first_error = f;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    lat.sort_by(f64::total_cmp);
    Ok(json!({
        "calls": lat.len(),
        "errors": errors,
        "first_error": first_error,
        "secs": secs,
        "calls_per_sec": lat.len() as f64 / secs,
        "p50_ms": percentile(&lat, 0.5),
        "p99_ms": percentile(&lat, 0.99),
        "bytes_per_call": if lat.is_empty() { 0 } else { bytes / lat.len() as u64 },
        "client_cpu_s": cpu,
        "server_cpu_s": server0.zip(server1).map(|(a, b)| b - a),
    }))
}

async fn wreq_load(a: &Args) -> Result<Value> {
    let mut b = wreq::Client::builder()
        .emulation(
            wreq_util::Emulation::builder()
                .profile(wreq_util::Profile::Chrome149)
                .build(),
        )
        .no_proxy()
        .timeout(Duration::from_secs(30));
    if let Some(ca) = &a.ca {
        let pem = std::fs::read(ca).with_context(|| format!("read {ca}"))?;
        let store = wreq::tls::trust::CertStore::builder()
            .add_stack_pem_certs(pem)
            .build()?;
        b = b.tls_cert_store(store);
    }
    let client = b.build()?;
    let url = a.url.clone();
    load(
        a.watch,
        a.concurrency,
        a.duration,
        move |_| {
            let (client, url) = (client.clone(), url.clone());
            async move { Ok((client, url)) }
        },
        |(client, url): &mut (wreq::Client, String)| {
            Box::pin(async move {
                let r = client.get(url.as_str()).send().await?;
                if !r.status().is_success() {
                    bail!("HTTP {}", r.status());
                }
                Ok(r.bytes().await?.len())
            })
        },
    )
    .await
}

async fn pool_load(a: &Args) -> Result<Value> {
    let path = a.config.as_deref().context("--config is required")?;
    let cfg = idpool::config::Config::load_file(std::path::Path::new(path))
        .map_err(|d| anyhow::anyhow!("{d}"))?;
    let pool = Arc::new(idpool::pool::Pool::open(&cfg)?);
    let args: Value = serde_json::from_str(&a.args).context("--args is not JSON")?;
    let tool = a.tool.clone();
    let out = load(
        a.watch,
        a.concurrency,
        a.duration,
        {
            let (pool, args, tool) = (pool.clone(), args.clone(), tool.clone());
            move |_| {
                let s = (pool.clone(), args.clone(), tool.clone());
                async move { Ok(s) }
            }
        },
        |(pool, args, tool): &mut (Arc<idpool::pool::Pool>, Value, String)| {
            Box::pin(async move {
                let opts = idpool::lease::cascade::RunOptions::default();
                if tool == "pool_status" {
                    // The status as a caller gets it: the snapshot, copied
                    // into the call's result and serialized.
                    let v = serde_json::Value::clone(&pool.reports().status());
                    return Ok(serde_json::to_vec(&v)?.len());
                }
                let v = match tool.as_str() {
                    "get_reviews" => {
                        idpool::tools::get_reviews::run(pool.leases(), args.clone(), opts).await?
                    }
                    "extract" => {
                        idpool::tools::extract::run(pool.leases(), args.clone(), opts).await?
                    }
                    other => {
                        bail!("pool mode runs get_reviews, extract or pool_status, not {other}")
                    }
                }
                .body;
                let n = v["reviews"]
                    .as_array()
                    .or_else(|| v["items"].as_array())
                    .map_or(0, Vec::len);
                if n == 0 {
                    bail!("no items in {v}");
                }
                Ok(n)
            })
        },
    )
    .await;
    pool.shutdown().await;
    out
}

/// One MCP client: its own connection and session.
struct McpClient {
    http: reqwest::Client,
    url: String,
    session: String,
    next_id: u64,
    tool: String,
    args: Value,
    /// 2026-07-28 stateless requests (no session).
    stateless: bool,
}

const MCP_VERSION: &str = "2025-06-18";

/// An HTTP/1.1 client that keeps one connection (a load client's own).
fn one_connection() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(60))
        .build()
}
const MCP_STATELESS: &str = "2026-07-28";

/// The JSON-RPC message answering `id` in a JSON or SSE response body.
fn answer_of(content_type: &str, body: &str, id: u64) -> Result<Value> {
    let messages: Vec<Value> = if content_type.starts_with("text/event-stream") {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        vec![serde_json::from_str(body)?]
    };
    messages
        .into_iter()
        .find(|m| m["id"] == json!(id))
        .with_context(|| format!("no answer to request {id} in {body:.200}"))
}

impl McpClient {
    async fn connect(url: &str, tool: &str, args: Value) -> Result<Self> {
        Self::open(url, tool, args, false).await
    }

    async fn open(url: &str, tool: &str, args: Value, stateless: bool) -> Result<Self> {
        let http = one_connection()?;
        if stateless {
            return Ok(McpClient {
                http,
                url: url.to_string(),
                session: String::new(),
                next_id: 1,
                tool: tool.to_string(),
                args,
                stateless,
            });
        }
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": MCP_VERSION, "capabilities": {},
            "clientInfo": {"name": "idpool-bench", "version": "1"}}});
        let r = http
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await?;
        let session = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .context("initialize: no mcp-session-id")?
            .to_string();
        let _ = r.bytes().await?;
        let r = http
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", MCP_VERSION)
            .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await?;
        let _ = r.bytes().await?;
        Ok(McpClient {
            http,
            url: url.to_string(),
            session,
            next_id: 1,
            tool: tool.to_string(),
            args,
            stateless,
        })
    }

    /// One `tools/call`; the response's size in bytes.
    async fn call(&mut self) -> Result<usize> {
        let id = self.next_id;
        self.next_id += 1;
        let request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream");
        let r = if self.stateless {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": self.tool, "arguments": self.args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": MCP_STATELESS,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "idpool-bench", "version": "1"},
            }}});
            request
                .header("mcp-protocol-version", MCP_STATELESS)
                .header("mcp-method", "tools/call")
                .header("mcp-name", &self.tool)
                .json(&body)
        } else {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": self.tool, "arguments": self.args}});
            request
                .header("mcp-session-id", &self.session)
                .header("mcp-protocol-version", MCP_VERSION)
                .json(&body)
        }
        .send()
        .await?;
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let text = r.text().await?;
        let answer = answer_of(&ct, &text, id)?;
        if answer["result"]["isError"] == json!(true) || answer.get("error").is_some() {
            bail!("tool error: {:.300}", answer.to_string());
        }
        Ok(text.len())
    }
}

async fn mcp_load(a: &Args) -> Result<Value> {
    let args: Value = serde_json::from_str(&a.args).context("--args is not JSON")?;
    let (url, tool, stateless) = (a.url.clone(), a.tool.clone(), a.stateless);
    load(
        a.watch,
        a.concurrency,
        a.duration,
        move |_| {
            let (url, tool, args) = (url.clone(), tool.clone(), args.clone());
            async move { McpClient::open(&url, &tool, args, stateless).await }
        },
        |c: &mut McpClient| Box::pin(c.call()),
    )
    .await
}

/// `POST /api/v1/tools/{tool}` clients, one connection each.
async fn rest_load(a: &Args) -> Result<Value> {
    let args: Value = serde_json::from_str(&a.args).context("--args is not JSON")?;
    let url = a.url.clone();
    load(
        a.watch,
        a.concurrency,
        a.duration,
        move |_| {
            let http = one_connection();
            let (url, args) = (url.clone(), args.clone());
            async move { Ok((http?, url, args)) }
        },
        |(http, url, args): &mut (reqwest::Client, String, Value)| {
            Box::pin(async move {
                let r = http.post(url.as_str()).json(args).send().await?;
                let status = r.status();
                let text = r.text().await?;
                if !status.is_success() {
                    bail!("{status}: {text:.300}");
                }
                Ok(text.len())
            })
        },
    )
    .await
}

/// `idpool mcp` bridging to the daemon: one process, one pipe, `-c`
/// requests in flight on it (answers matched by id).
async fn stdio_load(a: &Args) -> Result<Value> {
    use std::collections::HashMap;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::sync::{Mutex, oneshot};

    let args: Value = serde_json::from_str(&a.args).context("--args is not JSON")?;
    let bin = a.idpool.clone().context("stdio needs --idpool")?;
    let config = a.config.clone().context("stdio needs --config")?;
    let mut child = tokio::process::Command::new(&bin)
        .args(["--config", &config, "mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {bin} mcp"))?;
    let bridge_pid = child.id();
    let stdin = child.stdin.take().context("bridge stdin")?;
    let stdout = child.stdout.take().context("bridge stdout")?;
    type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;
    let waiting: Waiting = Arc::default();
    let reader = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = v["id"].as_u64()
                    && let Some(tx) = waiting.lock().await.remove(&id)
                {
                    let _ = tx.send(v);
                }
            }
        })
    };
    let stdin = Arc::new(Mutex::new(stdin));
    let next = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let ask = {
        let (stdin, waiting, next) = (stdin.clone(), waiting.clone(), next.clone());
        move |method: &'static str, params: Value| {
            let (stdin, waiting, next) = (stdin.clone(), waiting.clone(), next.clone());
            async move {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let (tx, rx) = oneshot::channel();
                waiting.lock().await.insert(id, tx);
                let mut line =
                    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
                        .to_string();
                line.push('\n');
                stdin.lock().await.write_all(line.as_bytes()).await?;
                let v = tokio::time::timeout(Duration::from_secs(60), rx)
                    .await
                    .context("no answer in 60 s")?
                    .context("the bridge closed")?;
                if v.get("error").is_some() || v["result"]["isError"] == json!(true) {
                    bail!("error: {:.300}", v.to_string());
                }
                Ok::<usize, anyhow::Error>(v.to_string().len())
            }
        }
    };
    ask(
        "initialize",
        json!({"protocolVersion": MCP_VERSION, "capabilities": {},
               "clientInfo": {"name": "idpool-bench", "version": "1"}}),
    )
    .await
    .context("initialize over stdio")?;
    stdin
        .lock()
        .await
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await?;
    let (tool, ask) = (a.tool.clone(), Arc::new(ask));
    let mut out = load(
        a.watch,
        a.concurrency,
        a.duration,
        |_| async { Ok(()) },
        move |_: &mut ()| {
            let (ask, tool, args) = (ask.clone(), tool.clone(), args.clone());
            Box::pin(
                async move { ask("tools/call", json!({"name": tool, "arguments": args})).await },
            )
        },
    )
    .await?;
    // The bridge's CPU over its whole life (warm-up included).
    out["bridge_cpu_total_s"] = json!(bridge_pid.and_then(process_cpu_seconds));
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let _ = child.kill().await;
    reader.abort();
    Ok(out)
}

/// One call on a fresh session: the daemon's cold path (a lazy browser launch).
async fn mcp_once(a: &Args) -> Result<Value> {
    let args: Value = serde_json::from_str(&a.args).context("--args is not JSON")?;
    let mut c = McpClient::connect(&a.url, &a.tool, args).await?;
    let t = Instant::now();
    let bytes = c.call().await?;
    Ok(json!({"ms": t.elapsed().as_secs_f64() * 1e3, "bytes": bytes}))
}

/// `count` calls one after another on one session.
async fn mcp_count(a: &Args) -> Result<Value> {
    let args: Value = serde_json::from_str(&a.args).context("--args is not JSON")?;
    let mut c = McpClient::connect(&a.url, &a.tool, args).await?;
    let mut lat = Vec::new();
    for _ in 0..a.count {
        let t = Instant::now();
        c.call().await?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let each = lat.clone();
    lat.sort_by(f64::total_cmp);
    Ok(json!({"calls": lat.len(), "p50_ms": percentile(&lat, 0.5),
        "p99_ms": percentile(&lat, 0.99), "each_ms": each}))
}

/// Raw chromiumoxide with the flags idpool's launcher uses: launch to first
/// content (cold), then `count` warm navigations of one tab.
async fn cdp(a: &Args) -> Result<Value> {
    use chromiumoxide::Browser;
    use futures_util::StreamExt;
    let exe = a
        .chromium
        .clone()
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    // The flags idpool's launcher gives a slot's Chromium (its own list, so
    // the two rows cannot drift apart); port 0: Chromium picks one.
    let spec = idpool::identity::browser::launcher::LaunchSpec {
        slot: 0,
        executable: exe.clone().into(),
        port: 0,
        user_data_dir: dir.path().to_path_buf(),
        pid_file: dir.path().join("chromium.pid"),
        headless: true,
        xvfb: false,
        user_agent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                     Chrome/149.0.0.0 Safari/537.36"
            .into(),
        languages: "en-US,en".into(),
        device: idpool::identity::browser::Device::desktop(1366, 768),
        pointer: idpool::identity::profile::Pointer::Fine,
        proxy_server: None,
        spki: a.ca.iter().cloned().collect(),
        trust_roots: Vec::new(),
        launch_timeout: Duration::from_secs(30),
        netns: None,
        sandbox: true,
        egress_peers: None,
    };
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.args(spec.args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = cmd.spawn().with_context(|| format!("start {exe}"))?;
    let port_file = dir.path().join("DevToolsActivePort");
    let ws = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file)
            && let Some((port, path)) = text.split_once('\n')
            && !path.trim().is_empty()
        {
            break format!("ws://127.0.0.1:{}{}", port.trim(), path.trim());
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("chromium did not open its DevTools port");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (browser, mut handler) = Browser::connect(ws).await?;
    let driver = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let page = browser.new_page("about:blank").await?;
    page.goto(a.url.as_str()).await?;
    let first = page.content().await?;
    let cold_ms = started.elapsed().as_secs_f64() * 1e3;
    if first.len() < 100 {
        bail!("first content too short: {first}");
    }
    let mut lat = Vec::new();
    let cpu0 = cpu_seconds();
    for _ in 0..a.count {
        let t = Instant::now();
        page.goto(a.url.as_str()).await?;
        let html = page.content().await?;
        if html.len() < 100 {
            bail!("content too short");
        }
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = cpu_seconds() - cpu0;
    drop(page);
    drop(browser);
    driver.abort();
    // Ours to end: the whole process group, then reap.
    if let Some(pid) = child.id() {
        // SAFETY: kill on our own child's process group.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    }
    let _ = child.wait().await;
    lat.sort_by(f64::total_cmp);
    Ok(json!({
        "cold_ms": cold_ms,
        "calls": lat.len(),
        "p50_ms": percentile(&lat, 0.5),
        "p99_ms": percentile(&lat, 0.99),
        "client_cpu_s": cpu,
    }))
}
