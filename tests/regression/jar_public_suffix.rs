//! Issue 32, finding 5: a site could plant cookies for other sites. A
//! `Set-Cookie: planted=1; Domain=test` from `a.attacker.test` rode along to
//! `www.victim.test` on the same slot's HTTP tier and out with its session
//! export (on the web: `Domain=com` to amazon.com); a `Secure` cookie over
//! plain http was taken; a session file's `Domain=com` cookie was imported.
//!
//! The HTTP tests go through the real pool: `scrape` in http mode on the
//! open web, both names resolved by `security.resolve` to a tiny HTTP/1.1
//! server on 127.0.0.1 that this test runs and that records what each
//! request carried.

use std::sync::Arc;

use idpool::pool::Pool;
use idpool::request::SessionFormat as Format;
use idpool::tools;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::common::{self, Env};

/// One request the server saw: its path, and its `Cookie` header.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    cookie: String,
}

/// A loopback HTTP/1.1 server answering each path with its `Set-Cookie`s.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                        match tokio::time::timeout(
                            std::time::Duration::from_secs(10),
                            conn.read(&mut chunk),
                        )
                        .await
                        {
                            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let path = head
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or_default()
                        .to_string();
                    let cookie = head
                        .lines()
                        .filter_map(|l| l.split_once(':'))
                        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("cookie"))
                        .map(|(_, v)| v.trim().to_string())
                        .collect::<Vec<_>>()
                        .join("; ");
                    let set: &[&str] = match path.as_str() {
                        "/plant" => &["planted=1; Domain=test; Path=/", "good=1; Path=/"],
                        "/secure" => &["insecure=1; Secure; Path=/"],
                        "/secure-loopback" => &["loopback=1; Secure; Path=/"],
                        _ => &[],
                    };
                    log.lock().push(Seen { path, cookie });
                    let body =
                        "<html><head><title>t</title></head><body><p>A page.</p></body></html>";
                    let mut resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n",
                        body.len()
                    );
                    for s in set {
                        resp.push_str(&format!("Set-Cookie: {s}\r\n"));
                    }
                    resp.push_str("\r\n");
                    resp.push_str(body);
                    let _ = conn.write_all(resp.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Server { port, seen, task }
    }

    /// The `Cookie` header of the last request for `path`.
    fn cookie_sent_to(&self, path: &str) -> String {
        let seen = self.seen.lock();
        let hit = seen.iter().rev().find(|s| s.path == path);
        hit.unwrap_or_else(|| panic!("no request for {path}: {seen:?}"))
            .cookie
            .clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A one-slot pool on the open web where both names live on 127.0.0.1.
fn open_web(env: &Env) -> Pool {
    env.write_config_private(
        1,
        true,
        common::free_base_port(1),
        "[\"127.0.0.1\"]",
        "[security.resolve]\n\"a.attacker.test\" = \"127.0.0.1\"\n\"www.victim.test\" = \"127.0.0.1\"\n\n\
         [web]\nmin_interval_ms = 0\nrespect_robots = false\n",
    );
    env.pool()
}

async fn get(pool: &Pool, url: String) {
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": url, "mode": "http"}),
        &Default::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("{url}: {e}"))
    .body;
    assert_eq!(r["via"].as_str(), Some("http"), "{url}: {r}");
}

fn exported_names(pool: &Pool) -> Vec<String> {
    let mut n: Vec<String> = pool.leases().slots_for_tests()[0]
        .jar()
        .export_all()
        .into_iter()
        .map(|c| c.name)
        .collect();
    n.sort();
    n
}

#[tokio::test]
async fn planted_cookie_for_a_public_suffix_is_never_sent_nor_exported() {
    let server = Server::start().await;
    let env = Env::new(1).await;
    let pool = open_web(&env);
    let port = server.port;

    get(&pool, format!("http://a.attacker.test:{port}/plant")).await;
    get(&pool, format!("http://www.victim.test:{port}/look")).await;
    get(&pool, format!("http://a.attacker.test:{port}/again")).await;

    let to_victim = server.cookie_sent_to("/look");
    assert!(
        !to_victim.contains("planted"),
        "the cookie planted for `test` reached www.victim.test: {to_victim}"
    );
    // The same response's host-only cookie did take (the jar is in the
    // path): it comes back to its own host, and to it alone.
    assert_eq!(server.cookie_sent_to("/again"), "good=1");
    assert!(!to_victim.contains("good"), "{to_victim}");

    assert_eq!(exported_names(&pool), ["good"]);
    let export = pool
        .services()
        .session_files
        .export_session(0, Format::Json, None)
        .await
        .expect("export");
    assert!(
        !export.contains("planted") && export.contains("good"),
        "{export}"
    );
    common::shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn secure_cookie_over_plain_http_from_a_name_is_refused() {
    let server = Server::start().await;
    let env = Env::new(1).await;
    let pool = open_web(&env);
    let port = server.port;

    // `a.attacker.test` resolves to 127.0.0.1, but a name is not loopback.
    get(&pool, format!("http://a.attacker.test:{port}/secure")).await;
    // A loopback address literal is a potentially trustworthy origin.
    get(&pool, format!("http://127.0.0.1:{port}/secure-loopback")).await;

    assert_eq!(exported_names(&pool), ["loopback"]);
    let export = pool
        .services()
        .session_files
        .export_session(0, Format::Netscape, None)
        .await
        .expect("export");
    assert!(!export.contains("insecure"), "{export}");
    common::shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn session_file_cookie_for_a_public_suffix_is_refused_with_its_reason() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let in_a_day = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 86_400;
    let file = format!(
        "# Netscape HTTP Cookie File\n\
         .shop.test\tTRUE\t/\tFALSE\t{in_a_day}\tgood\tkept\n\
         .com\tTRUE\t/\tFALSE\t{in_a_day}\tx\tfixation-secret\n\
         shop.test\tFALSE\t/\tFALSE\t{in_a_day}\t__Host-h\tno-secure\n\
         127.0.0.1\tFALSE\t/\tTRUE\t0\tafter\tstill-kept\n"
    );
    let r: Value = tools::import_session::run(
        &pool.services().session_files,
        json!({"slot": 0, "session": file, "format": "auto"}),
    )
    .await
    .expect("the file imports: one bad cookie does not refuse it whole");
    assert_eq!(r["cookies"], 2, "{r}");
    assert_eq!(r["rejected"], 2, "{r}");
    assert_eq!(
        r["refused"],
        json!([
            {"entry": 1, "name": "x", "domain": "com", "reason": "a public suffix"},
            {"entry": 2, "name": "__Host-h", "domain": "shop.test",
             "reason": "a `__Host-` cookie must be Secure"},
        ]),
        "{r}"
    );
    assert_eq!(r["domains"], json!({"127.0.0.1": 1, "shop.test": 1}), "{r}");
    assert!(!r.to_string().contains("fixation-secret"), "{r}");

    assert_eq!(exported_names(&pool), ["after", "good"]);
    let export = pool
        .services()
        .session_files
        .export_session(0, Format::Json, None)
        .await
        .expect("export");
    assert!(!export.contains("fixation-secret"), "{export}");
    common::shutdown_and_check(&pool).await;
}
