//! Personal data: fields a strategy marks `pii = true` (the testshop's
//! `author`) reach callers below `security.pii_role` masked, with the masked
//! fields named, and admins in clear; the audit log never holds them.

use crate::common;

use common::daemon::{Daemon, Mcp, add_key};
use serde_json::{Value, json};

async fn reviews(d: &Daemon, key: &str, item: &str) -> Value {
    let mut c = Mcp::new(d, Some(key));
    assert!(c.initialize().await.status.is_success());
    let r = c
        .tool(
            1,
            "get_reviews",
            json!({"item": item, "strategy": "testshop", "pages": 2}),
        )
        .await;
    let s = r["result"]["structuredContent"].clone();
    assert!(s.is_object(), "get_reviews: {r}");
    s
}

fn authors(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|r| r["author"].as_str().unwrap_or("<none>").to_string())
        .collect()
}

#[tokio::test]
async fn a_pii_field_reaches_an_operator_masked_and_an_admin_in_clear() {
    let env = common::shop(1).await;
    let operator = add_key(&env, "op", "operator").await;
    let admin = add_key(&env, "boss", "admin").await;
    let d = Daemon::start(&env, 1, "").await;
    let truth = common::truth("B0PII1");
    let want = &truth[..20];

    let op = reviews(&d, &operator, "B0PII1").await;
    let got = op["reviews"].as_array().expect("reviews");
    assert_eq!(got.len(), 20, "{op}");
    assert_eq!(
        op["masked"],
        json!(["author"]),
        "the result names the masked fields"
    );
    assert_eq!(
        got.as_slice(),
        &common::masked_truth("B0PII1")[..20],
        "names masked to initials, every other field as the shop has it"
    );

    let boss = reviews(&d, &admin, "B0PII1").await;
    assert_eq!(
        boss["reviews"],
        json!(want),
        "an admin sees every field in clear"
    );
    assert!(boss.get("masked").is_none(), "{boss}");

    // Not one author's name is in the audit log (it records arguments only,
    // and results never).
    let audit = std::fs::read_to_string(env.path("data/audit.log")).expect("audit log");
    assert!(audit.contains("get_reviews"), "{audit}");
    for name in authors(want) {
        assert!(!audit.contains(&name), "`{name}` is in the audit log");
    }
    d.stop().await;
}

#[tokio::test]
async fn pii_role_sets_who_sees_personal_data() {
    use idpool::config::Role;
    let env = common::Env::new(1).await;
    let mut cfg = env.config();
    cfg.security.pii_role = Role::Operator;
    let pool = idpool::pool::Pool::open(&cfg).expect("pool opens");
    let pii = &pool.services().pii;
    assert!(pii.mask_for(Role::Viewer).is_some());
    assert!(pii.mask_for(Role::Operator).is_none());
    assert!(pii.mask_for(Role::Admin).is_none());
    // The key lives in the data dir, 0600, and is read back as it is.
    let key = env.path("data/pii.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key).expect("pii.key").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let before = std::fs::read(&key).expect("read");
    drop(pool);
    let pool = idpool::pool::Pool::open(&cfg).expect("pool opens again");
    assert_eq!(std::fs::read(&key).expect("read"), before);
    drop(pool);
    // A damaged key is a clear error naming the file.
    std::fs::write(&key, b"short").expect("write");
    let err = idpool::pool::Pool::open(&cfg).err().expect("refused");
    assert!(err.to_string().contains("pii.key"), "{err}");
}
