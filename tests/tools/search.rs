//! `search` on the testbed's engine pages, served in the structure of
//! DuckDuckGo's HTML endpoint and of Bing (`idpool_testbed::engines`), to
//! the bundled engine strategies aimed there: the ranked results exactly,
//! ads marked, no results, the fall back to Bing when DuckDuckGo serves its
//! block page, `scrape_results`, robots.txt, and every engine blocked.

use crate::common;

use common::{Env, free_base_port, shutdown_and_check};
use idpool::tools;
use idpool_testbed::engines::{self, Engine, Hit};
use serde_json::{Value, json};

/// The bundled strategy `name`, aimed at `host` on the testbed (its own
/// politeness off), with `tier2_path` instead of the engine's own path when
/// given.
fn engine_strategy(env: &Env, name: &str, host: &str, tier2_path: Option<(&str, &str)>) {
    let base = format!("https://{host}:{}", env.testbed.https_addr.port());
    let local = common::bundled_strategy_at(name, host, &base, |l| {
        tier2_path
            .filter(|(from, _)| l.contains(from))
            .map(|(from, to)| l.replace(from, to))
    });
    env.write(&format!("strategies/{name}.toml"), &local);
}

fn setup(env: &Env, ddg_path: Option<(&str, &str)>) {
    env.write_config_private(
        1,
        true,
        free_base_port(1),
        "[\"127.0.0.1\"]",
        "[security.resolve]\n\"news.web.test\" = \"127.0.0.1\"\n\"ddg.web.test\" = \"127.0.0.1\"\n\"bing.web.test\" = \"127.0.0.1\"\n\n[web]\nmin_interval_ms = 0\n",
    );
    engine_strategy(env, "duckduckgo", "ddg.web.test", ddg_path);
    engine_strategy(env, "bing", "bing.web.test", None);
}

/// What `search` should answer for `hits`, as served by `engine` on slot 0.
fn expected(hits: &[Hit], engine: &str) -> Vec<Value> {
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            json!({
                "position": i + 1, "title": h.title, "url": h.url, "snippet": h.snippet,
                "sponsored": h.sponsored, "engine": engine, "slot": 0,
            })
        })
        .collect()
}

/// The results without `display_url` (the engines' own way of showing an address).
fn ranked(r: &Value) -> Vec<Value> {
    r["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|x| {
            let mut x = x.clone();
            if let Some(o) = x.as_object_mut() {
                o.remove("display_url");
                o.remove("page");
            }
            x
        })
        .collect()
}

async fn search(pool: &idpool::pool::Pool, args: Value) -> idpool::error::Result<Value> {
    tools::search::run(pool.leases(), args, Default::default())
        .await
        .map(|o| o.body)
}

#[tokio::test]
async fn search_ranks_marks_ads_falls_back_on_a_block_and_scrapes_the_top_results() {
    let env = Env::new(1).await;
    setup(&env, None);
    let pool = env.pool();
    let port = env.testbed.https_addr.port();

    // DuckDuckGo first: its ranked results exactly, the ad marked, each
    // link out of the engine's redirect.
    let r = search(&pool, json!({"query": "blue kettle"}))
        .await
        .expect("search");
    let ddg = engines::hits(Engine::DuckDuckGo, "blue kettle", port);
    assert!(ddg.iter().any(|h| h.sponsored) && ddg.len() > 5);
    assert_eq!(r["engine"], "duckduckgo", "{r}");
    assert_eq!(ranked(&r), expected(&ddg, "duckduckgo"), "{r}");
    assert_eq!(
        r["results"][1]["display_url"],
        format!("news.web.test:{port}/site/article")
    );
    assert!(r.get("tried").is_none(), "{r}");
    let limited = search(&pool, json!({"query": "blue kettle", "limit": 3}))
        .await
        .expect("limit");
    assert_eq!(ranked(&limited), expected(&ddg[..3], "duckduckgo"));

    // No results is an answer, not a failure.
    let none = search(&pool, json!({"query": engines::NOTHING}))
        .await
        .expect("no results");
    assert_eq!(none["engine"], "duckduckgo");
    assert_eq!(none["results"], json!([]));

    // DuckDuckGo serves its block page: Bing answers, and says who did not.
    env.testbed
        .set_modes(|m| m.engines_blocked = vec!["duckduckgo".into()]);
    let r = search(&pool, json!({"query": "red kettle", "scrape_results": 3}))
        .await
        .expect("search with a blocked engine");
    let bing = engines::hits(Engine::Bing, "red kettle", port);
    assert_eq!(r["engine"], "bing", "{r}");
    assert_eq!(ranked(&r), expected(&bing, "bing"), "{r}");
    assert_eq!(r["tried"][0]["engine"], "duckduckgo", "{r}");
    assert!(
        r["tried"][0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("block"),
        "{r}"
    );
    // The three first organic results, fetched as markdown; not the ad.
    let results = r["results"].as_array().expect("results");
    assert!(results[0]["sponsored"] == true && results[0].get("page").is_none());
    let pages: Vec<&Value> = results.iter().filter(|x| x.get("page").is_some()).collect();
    assert_eq!(pages.len(), 3, "{r}");
    for p in &pages {
        let page = &p["page"];
        assert_eq!(page["status"], 200, "{page}");
        assert_eq!(page["format"], "markdown");
        assert_eq!(page["url"], p["url"], "{page}");
        assert!(!page["content"].as_str().unwrap_or("").is_empty(), "{page}");
    }
    // /site/about is Bing's first organic result: its page's heading.
    assert!(
        pages[0]["page"]["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("# About"),
        "{}",
        pages[0]["page"]
    );

    // Every engine blocked: one error naming both.
    env.testbed
        .set_modes(|m| m.engines_blocked = vec!["duckduckgo".into(), "bing".into()]);
    let e = search(&pool, json!({"query": "green kettle"}))
        .await
        .expect_err("every engine blocked");
    let msg = e.to_string();
    assert!(
        msg.contains("no search engine answered")
            && msg.contains("duckduckgo")
            && msg.contains("bing"),
        "{msg}"
    );

    // Arguments.
    let e = search(&pool, json!({"query": "x", "engine": "altavista"}))
        .await
        .expect_err("unknown engine");
    assert!(
        e.to_string().contains("no search engine `altavista`"),
        "{e}"
    );
    let e = search(&pool, json!({"query": "  "}))
        .await
        .expect_err("empty");
    assert!(e.to_string().contains("`query` is empty"), "{e}");
    shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn an_engine_path_robots_txt_disallows_is_not_searched() {
    let env = Env::new(1).await;
    // DuckDuckGo's endpoint moved under a path the testbed's robots.txt
    // disallows: `robots = true` keeps the pool off it; Bing answers.
    setup(
        &env,
        Some(("{base_url}/html/", "{base_url}/site/private/html/")),
    );
    let pool = env.pool();
    let port = env.testbed.https_addr.port();
    let r = search(&pool, json!({"query": "teapot"}))
        .await
        .expect("search");
    assert_eq!(r["engine"], "bing", "{r}");
    assert_eq!(
        ranked(&r),
        expected(&engines::hits(Engine::Bing, "teapot", port), "bing")
    );
    let why = r["tried"][0]["error"].as_str().unwrap_or("");
    assert!(why.contains("Disallow: /site/private/"), "{r}");
    shutdown_and_check(&pool).await;
}
