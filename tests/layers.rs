//! The library's layers import downward only, and the modules inside a layer
//! form no cycle. The order lives here and in `src/lib.rs`'s layout map.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first; modules on one line are one layer (they may import each
/// other, or nothing of each other).
const LAYERS: &[&[&str]] = &[
    &["error", "diag", "fsutil", "dom"],
    &["config", "profile"],
    &["jar"],
    &["session"],
    &["fingerprint"],
    &["http"],
    &["netns"],
    &["egress"],
    &["browser"],
    &["strategy"],
    &["web"],
    &["calibrate"],
    &["cluster"],
    &["pool"],
    &["tiers"],
    &["tools"],
    &["auth"],
    &["mcp"],
    &["daemon"],
    &["cli"],
    &["testbed"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// A source file: its path under `src/` and its text.
struct Source {
    rel: String,
    text: String,
}

impl Source {
    /// The top module the file belongs to (`pool` for `pool/lease.rs`).
    fn top(&self) -> &str {
        self.rel
            .split('/')
            .next()
            .unwrap_or("")
            .trim_end_matches(".rs")
    }
}

fn sources(root: &Path) -> Vec<Source> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<Source>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("read src")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p
                    .strip_prefix(root)
                    .expect("under src")
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&p).expect("read source");
                out.push(Source { rel, text });
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// The code of a file without its comments (doc links name other modules).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("")))
}

/// Names following `prefix` in `line` (`crate::pool::Lease` → `pool`).
fn names_after<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
    line.match_indices(prefix)
        .filter(|(i, _)| {
            // `crate::` itself, not `mycrate::`.
            !line[..*i]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(i, _)| {
            let rest = &line[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// Every import of a higher layer: `file:line: a imports b`.
fn upward_imports(files: &[Source]) -> Vec<String> {
    let mut found = Vec::new();
    for f in files {
        let top = f.top();
        let Some(own) = layer_of(top) else {
            continue; // lib.rs, main.rs, bin/: above every layer
        };
        for (n, line) in code_lines(&f.text) {
            for target in names_after(line, "crate::") {
                if let Some(other) = layer_of(target)
                    && other > own
                {
                    found.push(format!(
                        "src/{}:{n}: `{top}` imports `{target}`, a higher layer",
                        f.rel
                    ));
                }
            }
        }
    }
    found
}

/// Cycles among the files of one module (`super::x` and `crate::m::x`).
fn sibling_cycles(files: &[Source]) -> Vec<String> {
    // module folder → file → siblings it uses
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in files {
        let parts: Vec<&str> = f.rel.split('/').collect();
        if parts.len() != 2 || parts[1] == "mod.rs" {
            continue;
        }
        let (module, name) = (parts[0], parts[1].trim_end_matches(".rs"));
        let siblings: BTreeSet<String> = files
            .iter()
            .filter_map(|g| {
                let p: Vec<&str> = g.rel.split('/').collect();
                (p.len() == 2 && p[0] == module && p[1] != "mod.rs")
                    .then(|| p[1].trim_end_matches(".rs").to_string())
            })
            .collect();
        let mut uses = BTreeSet::new();
        for (_, line) in code_lines(&f.text) {
            let via_super = names_after(line, "super::");
            let via_crate = names_after(line, &format!("crate::{module}::"));
            for s in via_super.into_iter().chain(via_crate) {
                if s != name && siblings.contains(s) {
                    uses.insert(s.to_string());
                }
            }
        }
        graphs
            .entry(module.to_string())
            .or_default()
            .insert(name.to_string(), uses);
    }
    let mut cycles = Vec::new();
    for (module, g) in &graphs {
        for (a, uses) in g {
            for b in uses {
                if a < b && g.get(b).is_some_and(|u| u.contains(a)) {
                    cycles.push(format!(
                        "{module}/{a}.rs and {module}/{b}.rs import each other"
                    ));
                }
            }
        }
        // Longer cycles: a file that reaches itself.
        for start in g.keys() {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&String> = g[start].iter().collect();
            while let Some(n) = stack.pop() {
                if n == start {
                    cycles.push(format!("{module}/{start}.rs is part of an import cycle"));
                    break;
                }
                if seen.insert(n.clone())
                    && let Some(next) = g.get(n)
                {
                    stack.extend(next.iter());
                }
            }
        }
    }
    cycles.sort();
    cycles.dedup();
    cycles
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = sources(&src);
    for f in &files {
        let top = f.top();
        assert!(
            layer_of(top).is_some() || matches!(top, "lib" | "main" | "bin"),
            "src/{}: module `{top}` has no layer in tests/layers.rs",
            f.rel
        );
    }
    let up = upward_imports(&files);
    assert!(up.is_empty(), "upward imports:\n{}", up.join("\n"));
    let cycles = sibling_cycles(&files);
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_layout_map_in_lib_rs_names_the_layers_in_order() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let listed: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter_map(|l| l.split_whitespace().next())
        .map(|w| w.trim_end_matches('/').trim_end_matches(".rs"))
        .filter(|w| layer_of(w).is_some())
        .collect();
    let ranks: Vec<usize> = listed.iter().filter_map(|m| layer_of(m)).collect();
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1]),
        "src/lib.rs lists the modules out of layer order: {listed:?}"
    );
    for layer in LAYERS {
        for m in *layer {
            assert!(listed.contains(m), "src/lib.rs's layout map lacks `{m}`");
        }
    }
}

#[test]
fn the_check_catches_an_upward_import_and_a_cycle() {
    let file = |rel: &str, text: &str| Source {
        rel: rel.into(),
        text: text.into(),
    };
    let bad = [
        file("browser/mod.rs", "use crate::pool::Slot;\n"),
        file("pool/mod.rs", "// a comment naming crate::mcp is fine\n"),
        file("mcp/http.rs", "use super::sse::Sessions;\n"),
        file("mcp/sse.rs", "use crate::mcp::http::McpHttp;\n"),
    ];
    assert_eq!(
        upward_imports(&bad),
        ["src/browser/mod.rs:1: `browser` imports `pool`, a higher layer"]
    );
    assert_eq!(
        sibling_cycles(&bad).first().map(String::as_str),
        Some("mcp/http.rs and mcp/sse.rs import each other")
    );
    let fine = [
        file("pool/mod.rs", "use crate::browser::SlotBrowser;\n"),
        file("mcp/http.rs", "use super::gate::reject;\n"),
        file("mcp/gate.rs", "use crate::auth::Role;\n"),
    ];
    assert!(upward_imports(&fine).is_empty());
    assert!(sibling_cycles(&fine).is_empty());
}

/// `cargo build --release` (no features) compiles no testbed code: the
/// `testbed` feature, which alone declares the module, is on only for the
/// tests (a dev-dependency) or when asked for.
#[test]
fn the_daemon_builds_without_the_testbed() {
    let features = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "--offline", "--locked", "--prefix", "none"])
            .args([
                "-e",
                "features,normal,build",
                "-p",
                "idpool",
                "-i",
                "idpool",
            ])
            .args(extra)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo tree");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let plain = features(&[]);
    assert!(plain.contains("idpool feature \"default\""), "{plain}");
    assert!(
        !plain.contains("\"testbed\""),
        "a normal build enables the testbed:\n{plain}"
    );
    let asked = features(&["--features", "testbed"]);
    assert!(asked.contains("idpool feature \"testbed\""), "{asked}");
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs"))
        .expect("lib.rs");
    assert!(lib.contains("#[cfg(feature = \"testbed\")]\npub mod testbed;"));
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("Cargo.toml");
    let bin = manifest
        .split("[[bin]]")
        .find(|b| b.contains("name = \"idpool-testbed\""))
        .expect("the testbed binary");
    assert!(bin.contains("required-features = [\"testbed\"]"), "{bin}");
}

/// Small modules that show the architecture: no file in `src/` over 600
/// lines, no function over 100 (data tables are `const`s, not functions).
#[test]
fn files_and_functions_stay_small() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for f in sources(&src) {
        let lines: Vec<&str> = f.text.lines().collect();
        if lines.len() > 600 {
            found.push(format!("src/{}: {} lines", f.rel, lines.len()));
        }
        let mut i = 0;
        while i < lines.len() {
            if let Some((indent, name)) = fn_start(lines[i]) {
                let close = format!("{indent}}}");
                let end = (i + 1..lines.len()).find(|&j| lines[j] == close);
                if let Some(end) = end {
                    if end - i > 100 {
                        found.push(format!(
                            "src/{}:{}: fn {name}: {} lines",
                            f.rel,
                            i + 1,
                            end - i
                        ));
                    }
                    i = end;
                }
            }
            i += 1;
        }
    }
    assert!(found.is_empty(), "too long:\n{}", found.join("\n"));
}

/// `(indent, name)` of a line that opens a function body.
fn fn_start(line: &str) -> Option<(&str, &str)> {
    let code = line.trim_start();
    let indent = &line[..line.len() - code.len()];
    let mut rest = code;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    (!line.trim_end().ends_with(';')).then_some((indent, &name[..end]))
}
