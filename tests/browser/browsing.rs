//! Interactive browser sessions (`browser_*`) on a slot's real Chromium,
//! against the testbed's open-web site: snapshots with refs, typing with
//! submit, clicks, selects, waits, keys, screenshots; the guard and
//! robots.txt on every navigation; sessions bound to their caller; the
//! slot's other work goes on beside them; cookies back in the jar on close.

use crate::common;

use common::{Env, free_base_port, ref_of, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::tools;
use idpool_testbed::site;
use serde_json::{Value, json};

fn caller(key: &str, mcp: &str) -> RunOptions {
    RunOptions {
        caller: Some(key.into()),
        session: Some(mcp.into()),
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn an_agent_browses_a_site_on_an_identity_and_only_it_can() {
    let env = Env::new(1).await;
    common::seat_plain_desktop(&env, 0);
    env.write_config_private(
        1,
        true,
        free_base_port(1),
        "[\"127.0.0.1\"]",
        "[security.resolve]\n\"news.web.test\" = \"127.0.0.1\"\n\"intranet.web.test\" = \"127.0.0.2\"\n\n[web]\nmin_interval_ms = 0\n\n[browser]\nrecycle_after = 1\n",
    );
    let pool = env.pool();
    let port = env.testbed.https_addr.port();
    let at = |p: &str| format!("https://news.web.test:{port}{p}");
    let alice = caller("alice", "mcp-1");
    let session_of = |v: &Value| v["session"].as_str().expect("session").to_string();

    let open = tools::browser_open::run(
        &pool.services().browsing,
        json!({"url": at("/site/search")}),
        &alice,
    )
    .await
    .expect("open")
    .body;
    let id = session_of(&open);
    assert_eq!(open["slot"], 0);
    let status = pool.reports().status_now();
    assert_eq!(status["slots"][0]["browser_sessions"], 1);
    assert_eq!(open["title"], "Search");
    // The slot's other browser work goes on beside the session (its tab
    // survives the working tab's recycling).
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": at("/site/about"), "mode": "browser"}),
        &Default::default(),
    )
    .await
    .expect("a scrape beside the session")
    .body;
    assert_eq!(r["via"], "browser");
    let textbox = ref_of(&open, "searchbox", "Search the catalog");
    let typed = tools::browser_type::run(
        &pool.services().browsing,
        json!({"session": id, "ref": textbox, "text": "kettle", "submit": true}),
        &alice,
    )
    .await
    .expect("type and submit")
    .body;
    let snap = typed["snapshot"].as_str().expect("snapshot");
    assert!(
        typed["url"].as_str().unwrap_or("").contains("q=kettle"),
        "{typed}"
    );
    assert!(snap.contains("2 results for “kettle”"), "{snap}");
    assert!(
        snap.contains("Blue kettle") && snap.contains("Red kettle") && !snap.contains("Green mug"),
        "{snap}"
    );

    // Only its caller: another key, or the same key over another MCP session, finds nothing.
    for other in [
        caller("bob", "mcp-1"),
        caller("alice", "mcp-2"),
        RunOptions::default(),
    ] {
        let e =
            tools::browser_snapshot::run(&pool.services().browsing, json!({"session": id}), &other)
                .await
                .expect_err("not theirs");
        assert!(
            e.to_string()
                .contains(&format!("no browser session `{id}` for this caller")),
            "{e}"
        );
    }

    // A select, a key, waits.
    let sort = ref_of(&typed, "combobox", "Sort by");
    let sel = tools::browser_select::run(
        &pool.services().browsing,
        json!({"session": id, "ref": sort, "values": ["Price"]}),
        &alice,
    )
    .await
    .expect("select")
    .body;
    assert_eq!(sel["selected"], json!(["price"]));
    tools::browser_press::run(
        &pool.services().browsing,
        json!({"session": id, "key": "Tab"}),
        &alice,
    )
    .await
    .expect("press");
    let e = tools::browser_click::run(
        &pool.services().browsing,
        json!({"session": id, "ref": "e9999"}),
        &alice,
    )
    .await
    .expect_err("stale ref");
    assert!(
        e.to_string()
            .contains("no element `e9999` in this session's snapshots"),
        "{e}"
    );

    // A click only a person (or an agent) makes reveals more items.
    let more = tools::browser_navigate::run(
        &pool.services().browsing,
        json!({"session": id, "url": at("/site/more")}),
        &alice,
    )
    .await
    .expect("navigate")
    .body;
    assert!(!more["snapshot"].as_str().unwrap_or("").contains("Item 4"));
    // Each navigation went out through a lease: counted as a request (and
    // its outcome given to the slot's breaker for the host).
    let ok = pool.leases().rates().report()["strategies"]["web"]["totals"]["ok"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        ok >= 2,
        "navigations counted: {}",
        pool.leases().rates().report()
    );
    let button = ref_of(&more, "button", "Load more");
    tools::browser_click::run(
        &pool.services().browsing,
        json!({"session": id, "ref": button}),
        &alice,
    )
    .await
    .expect("click");
    let waited = tools::browser_wait_for::run(
        &pool.services().browsing,
        json!({"session": id, "text": "Item 6"}),
        &alice,
    )
    .await
    .expect("wait for text")
    .body;
    for item in site::MORE_FIRST.iter().chain(site::MORE_LATER) {
        assert!(
            waited["snapshot"].as_str().unwrap_or("").contains(item),
            "{item}: {waited}"
        );
    }
    let e = tools::browser_wait_for::run(
        &pool.services().browsing,
        json!({"session": id, "time": 99}),
        &alice,
    )
    .await
    .expect_err("too long");
    assert!(e.to_string().contains("`time` is 0 to 30 seconds"), "{e}");

    // Every navigation goes through the guard and robots.txt.
    let e = tools::browser_navigate::run(
        &pool.services().browsing,
        json!({"session": id, "url": at("/site/private/secret")}),
        &alice,
    )
    .await
    .expect_err("robots");
    assert!(e.to_string().contains("`Disallow: /site/private/`"), "{e}");
    let e = tools::browser_navigate::run(
        &pool.services().browsing,
        json!({"session": id, "url": format!("https://intranet.web.test:{port}/")}),
        &alice,
    )
    .await
    .expect_err("private");
    assert!(e.to_string().contains("127.0.0.2"), "{e}");

    // Answers that fit: a page of 5,000 controls, in pieces and in views.
    page_of_controls(&pool, &id, &alice, &at("/site/controls")).await;

    let shot =
        tools::browser_screenshot::run(&pool.services().browsing, json!({"session": id}), &alice)
            .await
            .expect("screenshot")
            .body;
    assert_eq!(shot["media"][0]["type"], "image");
    assert_eq!(shot["screenshot"]["width"], 1366);

    // Closing gives the session's cookies to the slot's jar.
    assert!(
        !pool.leases().slots_for_tests()[0]
            .jar()
            .export_for_domain("news.web.test")
            .iter()
            .any(|c| c.name == "last_search")
    );
    let closed =
        tools::browser_close::run(&pool.services().browsing, json!({"session": id}), &alice)
            .await
            .expect("close");
    assert_eq!(closed["closed"], true);
    let jar = pool.leases().slots_for_tests()[0]
        .jar()
        .export_for_domain("news.web.test");
    assert!(
        jar.iter()
            .any(|c| c.name == "last_search" && c.value == "kettle"),
        "{jar:?}"
    );
    let e = tools::browser_snapshot::run(&pool.services().browsing, json!({"session": id}), &alice)
        .await
        .expect_err("closed");
    assert!(e.to_string().contains("no browser session"), "{e}");
    assert!(pool.services().browsing.list().is_empty());
    shutdown_and_check(&pool).await;
}

/// The names of the controls `/site/controls` holds: `Item link 0`,
/// `Item button 1`, `Item field 2`, `Item box 3`, ...
fn control_names() -> Vec<String> {
    (0..site::CONTROLS)
        .map(|i| {
            let kind = ["link", "button", "field", "box"][i % 4];
            format!("Item {kind} {i}")
        })
        .collect()
}

/// The control a snapshot line names, if any (`- link "Item link 8" [ref=e12]`).
fn control_in(line: &str) -> Option<String> {
    let start = line.find("\"Item ")? + 1;
    let end = start + line[start..].find('"')?;
    Some(line[start..end].to_string())
}

/// `/site/controls` in a session: the default snapshot keeps to the budget
/// and, read on to the end, names every control exactly once;
/// `interactive_only` shows only controls; `selector` a part of the page;
/// `changes_only` what a click added.
async fn page_of_controls(pool: &idpool::pool::Pool, id: &str, who: &RunOptions, url: &str) {
    let first = tools::browser_navigate::run(
        &pool.services().browsing,
        json!({"session": id, "url": url}),
        who,
    )
    .await
    .expect("navigate to the controls")
    .body;
    let budget = idpool::tools::budget::DEFAULT_MAX_CHARS;
    assert_eq!(first["truncated"], true, "{}", first["total_chars"]);
    let total = first["total_chars"].as_u64().expect("total_chars") as usize;
    assert!(total > 5 * budget, "a snapshot of {total} chars");
    let mut seen: Vec<String> = Vec::new();
    let mut piece = first;
    let mut pieces = 0;
    loop {
        let text = piece["snapshot"].as_str().expect("snapshot");
        assert!(
            text.chars().count() <= budget,
            "a piece of {} chars",
            text.chars().count()
        );
        seen.extend(text.lines().filter_map(control_in));
        pieces += 1;
        let Some(next) = piece["next_start_index"].as_u64() else {
            assert_eq!(piece["truncated"], false);
            break;
        };
        piece = tools::browser_snapshot::run(
            &pool.services().browsing,
            json!({"session": id, "start_index": next}),
            who,
        )
        .await
        .expect("the next piece")
        .body;
        assert_eq!(piece["total_chars"].as_u64(), Some(total as u64));
    }
    assert!(pieces > 5, "{pieces} pieces");
    assert_eq!(seen, control_names(), "every control once, in order");

    // Only the controls: no text, no headings; each control once.
    let controls = tools::browser_snapshot::run(
        &pool.services().browsing,
        json!({"session": id, "interactive_only": true, "max_chars": 2_000_000}),
        who,
    )
    .await
    .expect("interactive only")
    .body;
    let text = controls["snapshot"].as_str().expect("snapshot");
    assert!(controls.get("truncated").is_none(), "fits in 2M chars");
    for line in text.lines() {
        let role = line
            .trim_start_matches("- ")
            .split(' ')
            .next()
            .unwrap_or("");
        assert!(
            ["link", "button", "textbox", "checkbox"].contains(&role),
            "not a control: {line}"
        );
    }
    let named: Vec<String> = text.lines().filter_map(control_in).collect();
    assert_eq!(named, control_names());
    assert!(text.len() < total, "{} vs {total}", text.len());

    // A part of the page.
    let group = tools::browser_snapshot::run(
        &pool.services().browsing,
        json!({"session": id, "selector": "#group-3"}),
        who,
    )
    .await
    .expect("a subtree")
    .body;
    let named: Vec<String> = group["snapshot"]
        .as_str()
        .expect("snapshot")
        .lines()
        .filter_map(control_in)
        .collect();
    assert_eq!(named, control_names()[300..400].to_vec());
    let e = tools::browser_snapshot::run(
        &pool.services().browsing,
        json!({"session": id, "selector": "#nope"}),
        who,
    )
    .await
    .expect_err("no such element");
    assert!(
        e.to_string()
            .contains("no element matches the selector `#nope`"),
        "{e}"
    );

    // What a click changed, and nothing else; refs stay the same.
    let all = tools::browser_snapshot::run(
        &pool.services().browsing,
        json!({"session": id, "interactive_only": true, "max_chars": 2_000_000}),
        who,
    )
    .await
    .expect("all controls")
    .body;
    let grow = ref_of(&all, "button", "Add a row");
    assert_eq!(
        ref_of(&controls, "button", "Add a row"),
        grow,
        "a ref holds across snapshots"
    );
    let changed = tools::browser_click::run(
        &pool.services().browsing,
        json!({"session": id, "ref": grow, "changes_only": true}),
        who,
    )
    .await
    .expect("click with changes only")
    .body;
    let text = changed["snapshot"].as_str().expect("snapshot");
    assert!(
        text.starts_with("# changes since the last snapshot: 1 added, 0 removed"),
        "{text}"
    );
    assert!(text.contains("+ - button \"New button 1\" [ref="), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
}

/// The acceptance run: an agent on the official MCP TypeScript SDK opens a
/// session, types into the search box with submit, sees the results, and
/// closes; another key cannot use the session id.
#[tokio::test]
async fn the_typescript_sdk_drives_a_session_and_another_key_cannot_use_it() {
    let env = Env::new(1).await;
    let agent = common::daemon::add_key(&env, "agent", "operator").await;
    let other = common::daemon::add_key(&env, "other", "operator").await;
    let d = common::daemon::Daemon::start_with(
        &env,
        1,
        "keys_file = \"keys.toml\"",
        "[security.resolve]\n\"news.web.test\" = \"127.0.0.1\"\n\n[web]\nmin_interval_ms = 0\n",
        &[],
    )
    .await;
    let page = format!(
        "https://news.web.test:{}/site/search",
        env.testbed.https_addr.port()
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-js");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(dir.join("browse.mjs"))
            .args([
                "--url",
                &d.url("/mcp"),
                "--key",
                &agent,
                "--other-key",
                &other,
                "--page",
                &page,
            ])
            .output(),
    )
    .await
    .expect("browse.mjs finishes")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "browse.mjs: {e}: {stdout}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            d.log_text()
        )
    });
    assert!(r.get("error").is_none(), "{r}\n{}", d.log_text());
    assert_eq!(r["firstTitle"], "Search");
    assert!(
        r["typedUrl"].as_str().unwrap_or("").contains("q=kettle"),
        "{r}"
    );
    let snap = r["snapshot"].as_str().expect("snapshot");
    assert!(
        snap.contains("2 results for “kettle”") && snap.contains("Blue kettle"),
        "{snap}"
    );
    assert_eq!(r["other"]["isError"], true, "{r}");
    assert!(
        r["other"]["text"]
            .as_str()
            .unwrap_or("")
            .contains("no browser session"),
        "{r}"
    );
    assert_eq!(r["closed"]["closed"], true);
    // Both keys' calls are in the audit log, the refused one too.
    let audit = std::fs::read_to_string(env.path("data/audit.log")).expect("audit log");
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"browser_type\"") && l.contains("agent")),
        "{audit}"
    );
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"browser_snapshot\"") && l.contains("other")),
        "{audit}"
    );
    d.stop().await;
}
