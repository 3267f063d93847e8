//! Every tool is declared once (its `tools/*.rs` spec); the README's tool
//! table and `idpool call --help` are checked against those declarations.

use idpool::tools;

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[test]
fn the_readme_tool_table_matches_the_specs() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let header = "| tool | role | read-only | open world | destructive | progress |";
    let start = readme.find(header).expect("the README's tool table");
    let rows: Vec<Vec<String>> = readme[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let names: Vec<String> = rows
        .iter()
        .map(|r| r[0].trim_matches('`').to_string())
        .collect();
    let specs: Vec<&str> = tools::ALL.iter().map(|s| s.name).collect();
    assert_eq!(names, specs, "the README lists other tools than src/tools/");
    for (row, spec) in rows.iter().zip(tools::ALL) {
        let a = spec.annotations;
        let expect = [
            spec.role.as_str(),
            yes_no(a.read_only),
            yes_no(a.open_world),
            yes_no(a.destructive),
        ];
        assert_eq!(row[1..5], expect, "README row of `{}`", spec.name);
        assert_eq!(
            !row[5].is_empty(),
            spec.progress,
            "README: `{}` progress column",
            spec.name
        );
    }
}

#[test]
fn idpool_call_help_lists_every_tool() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .args(["call", "--help"])
        .output()
        .expect("idpool call --help");
    let help = String::from_utf8_lossy(&out.stdout);
    for spec in tools::ALL {
        assert!(
            help.contains(spec.name),
            "`{}` missing from:\n{help}",
            spec.name
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idpool"))
        .args(["call", "no_such_tool", "--embedded"])
        .output()
        .expect("idpool call no_such_tool");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no_such_tool") && err.contains("scrape"),
        "{err}"
    );
}
