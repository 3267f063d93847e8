//! A compiled Rust strategy implements the same `Strategy` trait as the TOML
//! ones: registered next to them, served by the same cascade and tools, with its
//! own classification and extraction code.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Env, shutdown_and_check};
use idpool::lease::cascade::RunOptions;
use idpool::strategy::extract::Extracted;
use idpool::strategy::operation::{Operation, Tier};
use idpool::strategy::{Body, Markers, Outcome, Politeness, Strategy};
use idpool::tools;
use serde_json::{Map, Value, json};

/// Reads the testbed's `/whoami` JSON: the fingerprint the site saw.
#[derive(Debug)]
struct Fingerprint {
    hosts: Vec<String>,
    base_url: String,
    politeness: Politeness,
    markers: Markers,
    operations: BTreeMap<String, Operation>,
}

impl Fingerprint {
    fn new(base_url: String) -> Self {
        // The request side is declared; extraction and classification are code.
        let op = Operation::parse(
            "fingerprint",
            "[tier2]\nurl = \"{base_url}/whoami\"\nformat = \"json\"\nextract = { items = \"\" }\n",
        )
        .expect("operation");
        Fingerprint {
            hosts: vec!["localhost".into()],
            base_url,
            politeness: Politeness {
                min_interval_ms: 0,
                max_in_flight: 4,
                global_max_in_flight: 8,
                ..Politeness::default()
            },
            markers: Markers::default(),
            operations: BTreeMap::from([("fingerprint".to_string(), op)]),
        }
    }
}

impl Strategy for Fingerprint {
    fn name(&self) -> &str {
        "fingerprint-rs"
    }
    fn hosts(&self) -> &[String] {
        &self.hosts
    }
    fn warmup_url(&self) -> Option<&url::Url> {
        None
    }
    fn cookie_domain(&self) -> &str {
        "localhost"
    }
    fn base_url(&self) -> Option<&str> {
        Some(&self.base_url)
    }
    fn politeness(&self) -> &Politeness {
        &self.politeness
    }
    fn markers(&self) -> &Markers {
        &self.markers
    }
    fn operations(&self) -> &BTreeMap<String, Operation> {
        &self.operations
    }
    /// A site that answers non-browsers with a 200 and `"browser": false` blocks them.
    fn classify(&self, status: u16, _url: &str, body: &Body<'_>) -> Outcome {
        match body.take_json() {
            Ok(v) if v["browser"] == false => Outcome::HardBlock,
            Ok(_) if status == 200 => Outcome::Ok,
            _ => Outcome::Failed,
        }
    }
    fn extract(
        &self,
        _op: &Operation,
        _tier: &Tier,
        body: &Body<'_>,
        _url: &url::Url,
    ) -> Result<Extracted, String> {
        let v: Value = body.take_json()?;
        let mut item = Map::new();
        for k in ["ja4", "family", "http_version"] {
            item.insert(k.into(), v[k].clone());
        }
        Ok(Extracted {
            items: vec![item],
            ..Default::default()
        })
    }
}

#[tokio::test]
async fn a_compiled_strategy_runs_through_the_same_cascade_and_tools() {
    let env = Env::new(1).await;
    let _ = std::fs::remove_file(env.path("strategies/alt.toml"));
    let base = format!("https://localhost:{}", env.testbed.https_addr.port());
    let pool = idpool::pool::Pool::open_with(&env.config(), vec![Arc::new(Fingerprint::new(base))])
        .expect("pool");
    let list = tools::list_strategies::run(&pool.registry());
    assert!(
        list["strategies"]
            .as_array()
            .expect("list")
            .iter()
            .any(|s| s["name"] == "fingerprint-rs")
    );
    let r = tools::extract::run(
        pool.leases(),
        json!({"strategy": "fingerprint-rs", "operation": "fingerprint", "params": {}}),
        RunOptions::default(),
    )
    .await
    .expect("compiled strategy")
    .body;
    assert_eq!(r["items"][0]["family"], "chrome");
    assert_eq!(r["items"][0]["http_version"], "HTTP/2.0");
    assert_eq!(r["tier"], 2);
    shutdown_and_check(&pool).await;

    // Its name and hosts clash-check against the TOML strategies like any other.
    let clash = Fingerprint {
        hosts: vec!["127.0.0.1".into()],
        ..Fingerprint::new("https://127.0.0.1".into())
    };
    let err = idpool::pool::Pool::open_with(&env.config(), vec![Arc::new(clash)])
        .err()
        .expect("host clash");
    assert!(
        err.to_string()
            .contains("host `127.0.0.1` is already covered by strategy `testbed`"),
        "{err}"
    );
}
