//! Sessions in and out (issue 16, item 1): Netscape cookies.txt, the
//! Cookie-Editor JSON array and Playwright storageState, each written by the
//! test in its real shape, merge into a slot's jar (and its Chromium's
//! localStorage); an export imported into a fresh slot carries the same
//! cookies and localStorage, read back by a page's script; bad files name
//! the entry and change nothing.

use crate::common;

use common::Env;
use common::daemon::{Daemon, add_key, idpool};
use idpool::request::FetchRequest;
use idpool::request::SessionFormat as Format;
use serde_json::{Value, json};

const HOST: &str = "127.0.0.1";

fn in_a_day() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
        + 86_400
}

/// The cookies the testbed saw on slot `slot`'s HTTP tier.
async fn cookies_seen(env: &Env, pool: &idpool::pool::Pool, slot: usize) -> String {
    let f = pool
        .fetch(FetchRequest::get(env.url("/whoami")), Some(slot))
        .await
        .expect("whoami");
    let v: Value = serde_json::from_slice(&f.response.body).expect("json");
    v["cookie"].as_str().unwrap_or_default().to_string()
}

/// The origin's localStorage as the testbed's `/storage` page shows it in
/// slot `slot`'s browser.
async fn storage_seen(env: &Env, pool: &idpool::pool::Pool, slot: usize) -> Value {
    let f = pool
        .browse(
            env.url("/storage"),
            Some("#storage[data-state=ready]".to_string()),
            Some(slot),
        )
        .await
        .expect("the storage page");
    let html = String::from_utf8_lossy(&f.response.body).to_string();
    let start = html
        .find("<pre id=\"storage\"")
        .expect("the storage element");
    let text = &html[start..];
    let open = text.find('>').expect(">") + 1;
    let close = text.find("</pre>").expect("</pre>");
    let json = text[open..close]
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Slot `slot` sends the four cookies of the three files.
async fn sends_every_imported_cookie(env: &Env, pool: &idpool::pool::Pool, slot: usize) {
    let sent = cookies_seen(env, pool, slot).await;
    for c in [
        "from_txt=t1",
        "txt_only=t2",
        "from_editor=e1",
        "from_state=s1",
    ] {
        assert!(sent.contains(c), "slot {slot} did not send {c}: {sent}");
    }
}

#[tokio::test]
async fn every_format_imports_and_an_export_round_trips_into_a_fresh_slot() {
    let env = Env::new(2).await;
    let pool = env.pool();
    let exp = in_a_day();
    let txt = format!(
        "# Netscape HTTP Cookie File\n# This is a generated file! Do not edit.\n\n\
         {HOST}\tFALSE\t/\tTRUE\t{exp}\tfrom_txt\tt1\n#HttpOnly_{HOST}\tFALSE\t/\tTRUE\t0\ttxt_only\tt2\n"
    );
    let r = pool
        .services()
        .session_files
        .import_session(0, &txt, Format::Auto)
        .await
        .expect("cookies.txt");
    assert_eq!((r.format, r.cookies), ("netscape", 2), "{r:?}");
    assert_eq!(r.domains.get(HOST), Some(&2));
    let editor = json!([{
        "domain": HOST, "expirationDate": exp as f64 + 0.25, "hostOnly": true, "httpOnly": false,
        "name": "from_editor", "path": "/", "sameSite": "lax", "secure": true, "session": false,
        "storeId": "0", "value": "e1"
    }]);
    let r = pool
        .services()
        .session_files
        .import_session(0, &editor.to_string(), Format::Auto)
        .await
        .expect("Cookie-Editor JSON");
    assert_eq!((r.format, r.cookies), ("json", 1), "{r:?}");
    let origin = env.testbed.https_url();
    let state = json!({
        "cookies": [{"name": "from_state", "value": "s1", "domain": HOST, "path": "/",
                     "expires": -1, "httpOnly": true, "secure": true, "sameSite": "Lax"}],
        "origins": [{"origin": origin, "localStorage": [
            {"name": "cart", "value": "3 drills"}, {"name": "theme", "value": "{\"dark\":true}"}]}]
    });
    let r = pool
        .services()
        .session_files
        .import_session(0, &state.to_string(), Format::StorageState)
        .await
        .expect("storageState");
    assert_eq!((r.format, r.cookies), ("storage-state", 1), "{r:?}");
    assert_eq!(r.local_storage.get(&origin), Some(&2), "{r:?}");

    sends_every_imported_cookie(&env, &pool, 0).await;
    let want = json!({"cart": "3 drills", "theme": "{\"dark\":true}"});
    assert_eq!(storage_seen(&env, &pool, 0).await, want);
    assert!(cookies_seen(&env, &pool, 1).await.is_empty());

    let exported = pool
        .services()
        .session_files
        .export_session(0, Format::StorageState, None)
        .await
        .expect("export");
    let doc: Value = serde_json::from_str(&exported).expect("a storageState");
    assert_eq!(doc["origins"][0]["origin"], origin, "{doc}");
    let r = pool
        .services()
        .session_files
        .import_session(1, &exported, Format::Auto)
        .await
        .expect("import into slot 1");
    assert!(r.cookies >= 4, "{r:?}");
    sends_every_imported_cookie(&env, &pool, 1).await;
    assert_eq!(storage_seen(&env, &pool, 1).await, want);

    // The other formats carry the cookies too (no localStorage there).
    for f in [Format::Netscape, Format::Json] {
        let text = pool
            .services()
            .session_files
            .export_session(1, f, Some(HOST))
            .await
            .expect("export");
        assert!(text.contains("from_state"), "{f:?}: {text}");
        let back = idpool::identity::session::parse(&text, Format::Auto).expect("parses back");
        assert!(back.cookies.len() >= 4, "{f:?}: {back:?}");
    }
    common::shutdown_and_check(&pool).await;
}

#[tokio::test]
async fn bad_session_files_name_the_entry_and_change_nothing() {
    let env = Env::new(1).await;
    let pool = env.pool();
    let good = format!("{HOST}\tFALSE\t/\tFALSE\t0\tkeep\tkeep-this-value\n");
    pool.services()
        .session_files
        .import_session(0, &good, Format::Auto)
        .await
        .expect("good file");
    let jar = env.path("data/slots/0/cookies.json");
    let before = std::fs::read(&jar).expect("jar saved");
    let cases = [
        (
            r#"{"cookies": [{"name": "a", "value": "1", "domain": "127.0.0.1"}, {"name": "b", "val"#,
            "not JSON",
        ),
        (
            r#"[{"name": "a", "value": "1", "domain": "127.0.0.1"}, {"name": "sid", "value": 7, "domain": "127.0.0.1"}]"#,
            "cookie[1] (`sid`): invalid type",
        ),
        (
            r#"{"cookies": [{"name": "x", "domain": "127.0.0.1"}], "origins": []}"#,
            "cookies[0] (`x`): missing field `value`",
        ),
        (
            "127.0.0.1\tFALSE\t/\tFALSE\t0\tok\t1\n127.0.0.1 FALSE / FALSE 0 broken 2\n",
            "line 2: expected 7 tab-separated fields",
        ),
    ];
    for (text, want) in cases {
        let e = pool
            .services()
            .session_files
            .import_session(0, text, Format::Auto)
            .await
            .expect_err("a bad file is refused");
        assert!(e.to_string().contains(want), "{e} (wanted {want})");
        assert!(
            !e.to_string().contains("keep-this-value"),
            "a value leaked: {e}"
        );
        assert_eq!(std::fs::read(&jar).expect("jar"), before, "the jar changed");
    }
    assert!(
        cookies_seen(&env, &pool, 0)
            .await
            .contains("keep=keep-this-value")
    );
    common::shutdown_and_check(&pool).await;
}

/// Through the daemon: `idpool session import|export` need an admin key,
/// the export file is mode 0600, and the audit line has no cookie value.
#[tokio::test]
async fn the_cli_goes_through_the_daemon_with_an_admin_key() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new(1).await;
    let admin = add_key(&env, "root", "admin").await;
    let operator = add_key(&env, "agent", "operator").await;
    let d = Daemon::start(&env, 1, "").await;
    env.write(
        "accounts/a.txt",
        &format!("{HOST}\tFALSE\t/\tFALSE\t0\tsecret_sid\tvalue-never-logged\n"),
    );
    let run = |args: Vec<String>| {
        let mut c = idpool(&env);
        c.args(args);
        c
    };
    let import = |key: &str| {
        vec![
            "session".into(),
            "import".into(),
            "--slot".into(),
            "0".into(),
            env.path("accounts/a.txt").display().to_string(),
            "--url".into(),
            d.url(""),
            "--key".into(),
            key.to_string(),
        ]
    };
    let out = run(import(&operator)).output().await.expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("admin"),
        "{out:?}"
    );
    let out = run(import(&admin)).output().await.expect("runs");
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("1 cookies imported (netscape)") && said.contains("127.0.0.1: 1"),
        "{said}"
    );
    let file = env.path("export.json");
    let out = run(vec![
        "session".into(),
        "export".into(),
        "--slot".into(),
        "0".into(),
        "--output".into(),
        file.display().to_string(),
        "--url".into(),
        d.url(""),
        "--key".into(),
        admin.clone(),
    ])
    .output()
    .await
    .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let mode = std::fs::metadata(&file)
        .expect("written")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    assert_eq!(doc["cookies"][0]["value"], "value-never-logged", "{doc}");
    d.stop().await;
    for f in ["data/audit.log", "daemon.log"] {
        let text = std::fs::read_to_string(env.path(f)).unwrap_or_default();
        assert!(
            !text.contains("value-never-logged"),
            "{f} has the cookie value:\n{text}"
        );
    }
    let audit = std::fs::read_to_string(env.path("data/audit.log")).expect("audit");
    assert!(
        audit.contains("\"import_session\"") && audit.contains("\"export_session\""),
        "{audit}"
    );
}

/// `[[pool.slot]] session = FILE` is imported at start when the file changed
/// since its last import, not again when it did not; a bad file is reported
/// and the slot keeps its jar.
#[tokio::test]
async fn a_declared_session_file_is_imported_when_it_changes() {
    let env = Env::new(1).await;
    let base = common::free_base_port(1);
    env.write(
        "idpool.toml",
        &format!(
            "[pool]\nbase_port = {base}\ndata_dir = \"data\"\nstrategies_dir = \"strategies\"\nprofiles_dir = \"profiles\"\n\
             [[pool.slot]]\nid = 0\nprofile = \"default\"\nsession = \"accounts/a.txt\"\n\n\
             [security]\nallow_private_networks = true\nextra_root_certs = [\"testbed/ca.pem\"]\n"
        ),
    );
    let file = env.path("accounts/a.txt");
    env.write(
        "accounts/a.txt",
        &format!("{HOST}\tFALSE\t/\tTRUE\t0\tacct\tfirst\n"),
    );
    let pool = env.pool();
    assert!(cookies_seen(&env, &pool, 0).await.contains("acct=first"));
    common::shutdown_and_check(&pool).await;

    // Unchanged file: the jar's own newer cookie stays.
    let pool = env.pool();
    let url = env.url("/");
    assert!(
        pool.leases().slots_for_tests()[0]
            .jar()
            .insert_set_cookie("acct=mine; Secure; Path=/", &url)
    );
    pool.leases().slots_for_tests()[0]
        .jar()
        .save()
        .expect("save");
    common::shutdown_and_check(&pool).await;
    let pool = env.pool();
    assert!(cookies_seen(&env, &pool, 0).await.contains("acct=mine"));
    common::shutdown_and_check(&pool).await;

    // A newer file is imported again.
    env.write(
        "accounts/a.txt",
        &format!("{HOST}\tFALSE\t/\tTRUE\t0\tacct\tsecond\n"),
    );
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(later))
        .expect("mtime");
    let pool = env.pool();
    assert!(cookies_seen(&env, &pool, 0).await.contains("acct=second"));
    common::shutdown_and_check(&pool).await;

    // A broken file: reported, nothing lost.
    env.write("accounts/a.txt", "{\"cookies\": [");
    let later = later + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(later))
        .expect("mtime");
    let pool = env.pool();
    let events = pool.events().recent();
    assert!(
        events.iter().any(|e| e.kind == "session_import_failed"),
        "{events:?}"
    );
    assert!(cookies_seen(&env, &pool, 0).await.contains("acct=second"));
    common::shutdown_and_check(&pool).await;
}

/// A profile's `seed_cookies` (any session format) fills a fresh jar once.
#[tokio::test]
async fn profile_seed_cookies_fill_a_fresh_jar() {
    let env = Env::new(1).await;
    env.write(
        "profiles/seed.json",
        r#"{"cookies":[{"name":"seeded","value":"1","domain":".127.0.0.1","path":"/","expires":-1,"httpOnly":true,"secure":true}]}"#,
    );
    env.write(
        "profiles/default.toml",
        "emulation = \"chrome_149\"\nplatform = \"linux\"\nseed_cookies = \"seed.json\"\n",
    );
    let pool = env.pool();
    assert!(cookies_seen(&env, &pool, 0).await.contains("seeded=1"));
    common::shutdown_and_check(&pool).await;
}
