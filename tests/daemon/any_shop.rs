//! Any shop through the daemon: `get_reviews` with a product URL on a host
//! no strategy covers (the testbed's `/wshop/` as `shop.web.test`) answers
//! the same over MCP, REST and `idpool call`: both review pages (the second
//! reached by `rel=next`), and the reviews a script draws through the
//! browser tier. Reviewers' names are personal data: an operator gets
//! initials.

use crate::common;

use common::any_shop::{HOST, answered, env, got, two_page_item, url};
use common::daemon::{Daemon, Mcp, idpool};
use serde_json::{Value, json};

/// The pages' (tier, source) and the reviews of a `get_reviews` answer.
fn check(r: &Value, id: &str, tier: u64, sources: &[&str], how: &str) {
    assert_eq!(r["strategy"], "web", "{how}: {r}");
    assert_eq!(got(&r["reviews"]), answered(id, true), "{how}");
    let pages: Vec<(u64, &str)> = (r["pages"].as_array().expect("pages").iter())
        .map(|p| {
            (
                p["tier"].as_u64().unwrap_or_default(),
                p["source"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let want: Vec<(u64, &str)> = sources.iter().map(|s| (tier, *s)).collect();
    assert_eq!(pages, want, "{how}: {r}");
    assert_eq!(r["has_more"], false, "{how}");
}

#[tokio::test]
async fn reviews_of_any_shop_over_mcp_rest_and_idpool_call() {
    let env = env().await;
    let web =
        format!("[security.resolve]\n\"{HOST}\" = \"127.0.0.1\"\n\n[web]\nmin_interval_ms = 0\n");
    let d = Daemon::start_with(&env, 1, "", &web, &[]).await;
    let (id, js) = (two_page_item("WEB"), two_page_item("JS"));
    let plain = json!({"item": url(&env, &id), "pages": 3});
    let scripted = json!({"item": url(&env, &js), "pages": 3});
    let (linked, drawn) = (["json-ld", "microdata"], ["page", "page"]);

    let mut c = Mcp::new(&d, None);
    assert!(c.initialize().await.status.is_success());
    let list = c.call(1, "tools/list", json!({})).await;
    let tool = (list["result"]["tools"].as_array().expect("tools").iter())
        .find(|t| t["name"] == "get_reviews")
        .cloned()
        .expect("get_reviews listed");
    let names = &tool["inputSchema"]["properties"]["strategy"]["enum"];
    assert!(
        names.as_array().is_some_and(|n| n.contains(&json!("web"))),
        "{names}"
    );
    let r = c.tool(2, "get_reviews", plain.clone()).await;
    check(&r["result"]["structuredContent"], &id, 2, &linked, "mcp");
    let r = c.tool(3, "get_reviews", scripted.clone()).await;
    check(
        &r["result"]["structuredContent"],
        &js,
        3,
        &drawn,
        "mcp, scripted",
    );

    let (status, r) = d.rest_tool("get_reviews", plain.clone()).await;
    assert_eq!(status, 200, "{r}");
    check(&r, &id, 2, &linked, "rest");
    let (status, r) = d.rest_tool("get_reviews", scripted.clone()).await;
    assert_eq!(status, 200, "{r}");
    check(&r, &js, 3, &drawn, "rest, scripted");

    for (args, item, tier, sources) in [(&plain, &id, 2, &linked), (&scripted, &js, 3, &drawn)] {
        let out = idpool(&env)
            .args(["call", "get_reviews", "--args", &args.to_string()])
            .args(["--url", &d.url("/mcp")])
            .output()
            .await
            .expect("idpool call runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let r: Value = serde_json::from_slice(&out.stdout).expect("json");
        check(&r, item, tier, sources, "idpool call");
    }
    d.stop().await;
}
