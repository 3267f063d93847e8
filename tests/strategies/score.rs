//! `idpool strategy score DIR` on the bundled testbed folder
//! (`strategies/score/testshop/`: pages the testbed served, saved, and the
//! values read from them): every page right; a wanted value and a wanted
//! outcome changed in a copy make those pages wrong, naming page, field,
//! want and got; a broken truth file is refused naming the file.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `idpool strategy score DIR` with the bundled strategies (no config read).
fn score(dir: &Path) -> (Output, String, String) {
    let strategies = root().join("strategies");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .args(["strategy", "score"])
        .arg(dir)
        .arg("--dir")
        .arg(&strategies)
        .current_dir(root())
        .output()
        .expect("idpool runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!(
        "$ idpool strategy score {}\n{stdout}{stderr}",
        dir.display()
    );
    (out, stdout, stderr)
}

fn folder() -> PathBuf {
    root().join("strategies/score/testshop")
}

/// A copy of the testbed folder, to change.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let to = tmp.path().join("testshop");
    std::fs::create_dir_all(to.join("pages")).expect("mkdir");
    std::fs::copy(folder().join("truth.json"), to.join("truth.json")).expect("copy");
    for e in std::fs::read_dir(folder().join("pages"))
        .expect("pages")
        .flatten()
    {
        std::fs::copy(e.path(), to.join("pages").join(e.file_name())).expect("copy");
    }
    (tmp, to)
}

fn read_truth(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("truth.json")).expect("truth");
    serde_json::from_str(&text).expect("JSON")
}

fn write_truth(dir: &Path, truth: &Value) {
    let text = serde_json::to_string_pretty(truth).expect("JSON");
    std::fs::write(dir.join("truth.json"), text).expect("write");
}

/// The page of `truth` whose file is `file`.
fn page<'a>(truth: &'a mut Value, file: &str) -> &'a mut Value {
    truth["pages"]
        .as_array_mut()
        .expect("pages")
        .iter_mut()
        .find(|p| p["file"] == file)
        .expect("the page is in the truth")
}

#[test]
fn the_testbed_folder_scores_every_page_right() {
    let (out, stdout, _) = score(&folder());
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let pages = read_truth(&folder())["pages"]
        .as_array()
        .expect("pages")
        .len();
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("score: {pages}/{pages} pages right; ")),
        "{last}"
    );
    assert!(!stdout.contains("WRONG"), "{stdout}");
    // Every kind of check ran: items, an empty page, walls, the session.
    let rows: Vec<String> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for row in [
        "reviews-B0TESTA1-p1 reviews ok ok, 10 items",
        "product-EMPTY01 top_reviews ok empty, 0 items",
        "captcha-BAN1 reviews ok hard_block",
        "wall-ACCT1-signin account_reviews ok login_required",
        "account-reviews-ACCT1-signedin (session) ok logged_in",
    ] {
        assert!(rows.iter().any(|r| r == row), "`{row}` in\n{stdout}");
    }
}

#[test]
fn a_changed_truth_names_the_page_the_field_want_and_got() {
    let (_tmp, dir) = copy();
    let mut truth = read_truth(&dir);
    // A person misread a rating, and took the captcha for a page of content.
    let first = &mut page(&mut truth, "reviews-B0TESTA1-p1.html")["checks"][0]["items"][0];
    assert_eq!(first["fields"]["rating"], json!(1));
    first["fields"]["rating"] = json!(4);
    page(&mut truth, "captcha-BAN1.html")["checks"][0]["outcome"] = json!("ok");
    // A gzipped page reads the same.
    let p3 = dir.join("pages/reviews-B0TESTA1-p3.html");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.join("pages/reviews-B0TESTA1-p3.html.gz")).expect("create"),
        flate2::Compression::default(),
    );
    std::io::Write::write_all(&mut gz, &std::fs::read(&p3).expect("page")).expect("gzip");
    gz.finish().expect("gzip");
    std::fs::remove_file(&p3).expect("rm");
    page(&mut truth, "reviews-B0TESTA1-p3.html")["file"] = json!("reviews-B0TESTA1-p3.html.gz");
    write_truth(&dir, &truth);

    let (out, stdout, _) = score(&dir);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let after = |page: &str, check: &str| -> Vec<&str> {
        let at = lines
            .iter()
            .position(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.starts_with(&[page, check, "WRONG"])
            })
            .unwrap_or_else(|| panic!("no WRONG line for {page} {check} in\n{stdout}"));
        lines[at + 1..]
            .iter()
            .take_while(|l| l.starts_with("    "))
            .copied()
            .collect()
    };
    assert_eq!(
        after("reviews-B0TESTA1-p1", "reviews"),
        ["    - item 0 `rating`: want 4, got 1"],
        "{stdout}"
    );
    assert_eq!(
        after("captcha-BAN1", "reviews"),
        ["    - outcome: want ok, got hard_block"],
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["reviews-B0TESTA1-p3", "reviews", "ok", "ok,", "2", "items"]),
        "the gzipped page is judged: {stdout}"
    );
    assert_eq!(
        lines.last().copied().unwrap_or_default(),
        "score: 7/9 pages right; product 2/2, reviews 3/4, wall 2/3"
    );
}

#[test]
fn a_broken_truth_file_is_refused_naming_the_file() {
    let (_tmp, dir) = copy();
    let file = dir.join("truth.json").display().to_string();

    // Not JSON: the file, its line and column.
    let good = std::fs::read_to_string(dir.join("truth.json")).expect("truth");
    std::fs::write(
        dir.join("truth.json"),
        good.replacen("\"pages\":", "\"pages\"", 1),
    )
    .expect("write");
    let (out, stdout, stderr) = score(&dir);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("{file}:3:")), "{stderr}");
    assert!(stdout.is_empty(), "nothing judged: {stdout}");

    // An operation the strategy does not have.
    let mut truth: Value = serde_json::from_str(&good).expect("JSON");
    truth["pages"][2]["checks"][0]["operation"] = json!("revews");
    write_truth(&dir, &truth);
    let (out, _, stderr) = score(&dir);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}: pages[2].checks[0]: unknown operation `revews` of strategy testshop"
        )),
        "{stderr}"
    );

    // An outcome that is none, with the path to it.
    let mut truth: Value = serde_json::from_str(&good).expect("JSON");
    truth["pages"][1]["checks"][1]["outcome"] = json!("nothing");
    write_truth(&dir, &truth);
    let (out, _, stderr) = score(&dir);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("pages[1].checks[1].outcome: unknown outcome `nothing`"),
        "{stderr}"
    );

    // A page file that is not there.
    let mut truth: Value = serde_json::from_str(&good).expect("JSON");
    truth["pages"][0]["file"] = json!("gone.html");
    write_truth(&dir, &truth);
    let (out, _, stderr) = score(&dir);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{file}: pages[0].file: no `gone.html`")),
        "{stderr}"
    );

    // No truth file at all.
    std::fs::remove_file(dir.join("truth.json")).expect("rm");
    let (out, _, stderr) = score(&dir);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{file}: cannot read")), "{stderr}");
}
