//! The amazon strategy's fixture pages served on loopback to a copy of the
//! strategy aimed there: `keyword_rank` reads the `search` pages until it
//! finds the items (the target sits on page 2); `bsr_categories` and
//! `seller_products` answer through MCP, the REST face and `idpool call`.

use crate::common;

use common::daemon::{Daemon, Mcp, add_key, idpool};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain HTTP server answering `/s?…&page=N` with the fixture page N.
async fn fixture_server(hits: Arc<AtomicUsize>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/fixtures/amazon");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let dir = dir.clone();
            let hits = hits.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let page = path
                    .rsplit("page=")
                    .next()
                    .and_then(|p| p.parse::<u32>().ok());
                let file = match page {
                    _ if path.starts_with("/s?me=") => {
                        Some("seller-products-in-2026-over.html".into())
                    }
                    _ if path.starts_with("/gp/bestsellers/") => {
                        Some("bsr-categories-es-2026-node.html".into())
                    }
                    Some(p) if path.starts_with("/s?") => Some(format!("search-page{p}.html")),
                    _ => None,
                };
                let body = file.and_then(|f: String| std::fs::read(dir.join(f)).ok());
                hits.fetch_add(1, Ordering::SeqCst);
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", b"not found".to_vec()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    port
}

/// An env whose only strategy is amazon aimed at the fixture server on `port`.
async fn local_amazon(port: u16) -> common::Env {
    let env = common::Env::new(1).await;
    let _ = std::fs::remove_file(env.path("strategies/testbed.toml"));
    let _ = std::fs::remove_file(env.path("strategies/alt.toml"));
    let local = common::bundled_strategy_at(
        "amazon",
        "127.0.0.1",
        &format!("http://127.0.0.1:{port}"),
        |_| None,
    );
    env.write("strategies/amazon.toml", &local);
    env
}

#[tokio::test]
async fn keyword_rank_finds_a_target_on_page_two_of_the_search_results() {
    let hits = Arc::new(AtomicUsize::new(0));
    let port = fixture_server(hits.clone()).await;
    let env = local_amazon(port).await;
    let pool = env.pool();
    let r = idpool::tools::keyword_rank::run(
        pool.leases(),
        json!({"keyword": "electric kettle", "max_pages": 3,
               "items": ["B0TARGET01", "B0ACMEKTL1", "B0SPONS003", "B0NOTHERE1"]}),
        idpool::lease::cascade::RunOptions::default(),
    )
    .await
    .expect("keyword_rank")
    .body;
    // Page 1: a sponsored result, three organic; page 2: a sponsored one,
    // then B0KETTLE50 (organic 4) and the target (organic 5).
    assert_eq!(
        r["found"]["B0TARGET01"],
        json!({"page": 2, "position": 51, "organic_rank": 5, "sponsored": []}),
        "{r}"
    );
    assert_eq!(
        r["found"]["B0ACMEKTL1"],
        json!({"page": 1, "position": 2, "organic_rank": 1, "sponsored": []})
    );
    assert_eq!(
        r["found"]["B0SPONS003"],
        json!({"page": null, "position": null, "organic_rank": null, "sponsored": [{"page": 2, "position": 49}]})
    );
    assert_eq!(r["missing"], json!(["B0NOTHERE1"]));
    assert_eq!(r["pages"], 2, "page 2 is the last: no third request");
    assert_eq!(r["results"], 9);
    assert_eq!(hits.load(Ordering::SeqCst), 2, "one request a page");
    // Bad arguments are named.
    let e = idpool::tools::keyword_rank::run(
        pool.leases(),
        json!({"keyword": "k", "items": []}),
        idpool::lease::cascade::RunOptions::default(),
    )
    .await
    .expect_err("no items");
    assert!(e.to_string().contains("`items` must hold 1 to 20"), "{e}");
    common::shutdown_and_check(&pool).await;
}

/// The new operations through every face: MCP, `POST /api/v1/tools/extract`
/// and `idpool call`.
#[tokio::test]
async fn bsr_categories_and_seller_products_answer_through_mcp_rest_and_the_cli() {
    let hits = Arc::new(AtomicUsize::new(0));
    let port = fixture_server(hits.clone()).await;
    let env = local_amazon(port).await;
    let key = add_key(&env, "cli", "operator").await;
    let d = Daemon::start(&env, 1, "keys_file = \"keys.toml\"").await;
    let tree =
        json!({"strategy": "amazon", "operation": "bsr_categories", "params": {"category": "hpc"}});
    let store = json!({"strategy": "amazon", "operation": "seller_products", "params": {"seller": "AFIXSELLER01"}});

    let mut mcp = Mcp::new(&d, Some(&key));
    assert!(mcp.initialize().await.status.is_success());
    let r = mcp.tool(2, "extract", tree.clone()).await;
    let items = &r["result"]["structuredContent"]["items"];
    assert_eq!(items.as_array().map(Vec::len), Some(10), "{r}");
    assert!(
        items[0]["node"]
            .as_str()
            .is_some_and(|n| n.starts_with("hpc/")),
        "{r}"
    );
    assert!(
        items[0]["node_id"]
            .as_str()
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())),
        "{r}"
    );

    let rest = reqwest::Client::new()
        .post(d.url("/api/v1/tools/extract"))
        .bearer_auth(&key)
        .json(&store)
        .send()
        .await
        .expect("POST /api/v1/tools/extract");
    assert!(rest.status().is_success(), "{}", rest.status());
    let v: serde_json::Value = rest.json().await.expect("json");
    assert_eq!(
        v["items"],
        json!([{"results": 2000, "results_over": true}]),
        "{v}"
    );

    let out = idpool(&env)
        .args(["call", "extract", "--args", &tree.to_string()])
        .args(["--url", &d.url("/mcp"), "--key", &key])
        .output()
        .await
        .expect("idpool call runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["items"], *items);
    assert_eq!(v["operation"], "bsr_categories");

    // keyword_rank over MCP: its real result keeps to its outputSchema
    // (Ajv 2020 strict; the other tools: tests/daemon/mcp.rs).
    let plan = json!([{"tool": "keyword_rank", "args": {
        "keyword": "electric kettle", "items": ["B0TARGET01"], "max_pages": 3}}]);
    let r = common::daemon::every_tool(&d, &key, &plan).await;
    assert_eq!(r["results"][0]["ok"], true, "{r}");
    d.stop().await;
}
