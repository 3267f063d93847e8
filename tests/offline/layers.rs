//! The library's import rules, read from the source: each folder of `src/`
//! imports only what its allow-list names ([`ALLOWED`]), and the parts of a
//! folder (its files, its subfolders and its own `mod.rs`) form no import
//! cycle, at every depth. Imports are read as the compiler resolves them:
//! `use` trees (grouped, nested, renamed), `crate::`, `super::` and `self::`
//! paths inside code, a child module named without `self::`, and items any
//! module re-exports, along a chain of `pub use` (an import of
//! `super::Lease` is an import of the file that defines it; one of
//! `crate::pool::Slot`, were the facade to re-export it, an import of
//! `identity/slot`). Besides: only the tool API names the pool, and only the
//! lease (and `identity/`) names the slot. Tests' own modules
//! (`#[cfg(test)] mod tests`) are left out: they are not the architecture.
//!
//! Where the tree does not yet keep a rule, the exception is listed here
//! ([`KNOWN_IMPORTS`], [`KNOWN_CYCLES`], [`KNOWN_ROADS`]) and the check fails
//! both on a new violation and on a listed one that is gone, so the lists
//! only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every folder above [`FOUNDATION`] may import these (`request`: what a
/// caller asks for, as plain values).
const BASE: &[&str] = &["error", "diag", "fsutil", "request"];

/// The modules under everything, whose lists are all they may import.
const FOUNDATION: &[&str] = &["error", "diag", "fsutil", "dom", "request"];

/// What each folder of the library may import (besides [`BASE`] and
/// itself), by its path under `src/`; a folder's entry covers the folders
/// under it that have none of their own, and naming a folder grants what is
/// under it. The binary's side (`cli/`, `main.rs`, `bin/`) may use the whole
/// library.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("diag", &["dom", "error"]),
    ("fsutil", &["error"]),
    ("dom", &["error"]),
    ("request", &["diag", "error"]),
    ("config", &[]),
    ("events", &[]),
    // The network: knows no slot.
    ("wire", &[]),
    ("wire/fingerprint", &[]),
    ("wire/http", &["config", "wire/fingerprint"]),
    ("wire/netns", &[]),
    ("wire/egress", &["config", "wire/http", "wire/netns"]),
    // What one identity is made of.
    ("identity", &[]),
    ("identity/profile", &["config", "wire/http"]),
    ("identity/jar", &[]),
    // The sealed container of an identity bundle (crypto only).
    ("identity/bundle", &[]),
    ("identity/session", &["identity/jar"]),
    (
        "identity/browser",
        &[
            "config",
            "dom",
            "wire",
            "identity/jar",
            "identity/profile",
            "identity/session",
        ],
    ),
    // The device a slot is: drawn once, kept, applied by the launch.
    (
        "identity/persona",
        &["identity/browser", "identity/profile"],
    ),
    (
        "identity/calibrate",
        &[
            "config",
            "dom",
            "wire",
            "identity/browser",
            "identity/jar",
            "identity/profile",
        ],
    ),
    (
        "identity/slot",
        &[
            "config",
            "events",
            "wire",
            "identity/browser",
            "identity/calibrate",
            "identity/jar",
            "identity/persona",
            "identity/profile",
            "identity/session",
        ],
    ),
    ("strategy", &["dom", "wire/http", "identity/profile"]),
    ("web", &["dom"]),
    ("cluster", &["config", "wire/http"]),
    // Routing decisions: pure, sending nothing.
    ("routing", &["config", "strategy"]),
    // The one road to a site: the only folder that combines them.
    (
        "lease",
        &[
            "cluster", "config", "dom", "events", "identity", "routing", "strategy", "web", "wire",
        ],
    ),
    // Each holds the lease source; none reaches a site but through it.
    (
        "services",
        &[
            "cluster",
            "config",
            "events",
            "identity/browser",
            "identity/bundle",
            "identity/jar",
            "identity/persona",
            "identity/session",
            "identity/slot",
            "lease",
            "routing",
            "strategy",
            "wire/http",
        ],
    ),
    // The facade.
    (
        "pool",
        &[
            "cluster", "config", "events", "identity", "lease", "routing", "services", "strategy",
            "wire",
        ],
    ),
    // A tool imports the tool API (`tools/spec.rs`, which alone takes the
    // pool's handles), the lease and the services it is handed, and the
    // strategies and pages it reads: nothing of identity/, wire/ or routing/.
    (
        "tools",
        &[
            "config", "dom", "lease", "pool", "services", "strategy", "web",
        ],
    ),
    // A key's grants are routing's data (`routing/grants.rs`): the gate
    // checks them, the audit names them.
    ("auth", &["config", "pool", "routing"]),
    (
        "mcp",
        &[
            "auth", "cluster", "config", "events", "lease", "pool", "routing", "tools",
        ],
    ),
    (
        "daemon",
        &[
            "auth",
            "cluster",
            "config",
            "events",
            "identity/browser",
            "identity/profile",
            "lease",
            "mcp",
            "pool",
            "routing",
            "services",
            "tools",
        ],
    ),
];

/// Imports the allow-lists do not grant that the tree still has
/// (`importer -> imported`).
const KNOWN_IMPORTS: &[&str] = &[];

/// Folders whose parts still import each other in a cycle: none. A
/// folder's `mod.rs` declares and re-exports; what its files share lives
/// in a file of its own, and a type's extension files (`impl T` in
/// `hang.rs`) import the type, never the other way round.
const KNOWN_CYCLES: &[&str] = &[];

/// Where a request reaches a site: a browser navigation or an HTTP send.
/// Only the modules in [`ROAD_OWNERS`] may call these.
const ROADS: &[&str] = &[".goto(", "settle::navigate(", ".navigate(", ".fetch("];

/// The modules that define the roads or are the one road (the lease).
/// (`calibrate/` talks only to the daemon's own loopback listener.)
const ROAD_OWNERS: &[&str] = &[
    "identity/browser/",
    "wire/http/",
    "identity/calibrate/",
    "identity/slot/",
    "lease/",
];

/// Files outside [`ROAD_OWNERS`] that still call a road themselves.
const KNOWN_ROADS: &[&str] = &[];

fn allowed(key: &str) -> Option<&'static [&'static str]> {
    ALLOWED.iter().find(|(m, _)| *m == key).map(|(_, a)| *a)
}

/// `path` is `folder` or under it.
fn under(path: &str, folder: &str) -> bool {
    path == folder || path.starts_with(&format!("{folder}/"))
}

/// The allow-list entry a module falls under: the longest that is its
/// path or a folder above it.
fn key_of(module: &[String]) -> Option<&'static str> {
    let path = module.join("/");
    ALLOWED
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| under(&path, k))
        .max_by_key(|k| k.len())
}

/// Whether `module` may import `other` (allow-list keys): the same folder or
/// one above it, its allow-list, and [`BASE`] above the foundation.
fn grants(module: &str, other: &str) -> bool {
    under(module, other)
        || allowed(module).is_some_and(|a| a.iter().any(|g| under(other, g)))
        || (!FOUNDATION.contains(&module) && BASE.contains(&other))
}

/// A source file: its path under `src/` and its text.
struct Source {
    rel: String,
    text: String,
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

/// The module a file is (`pool/lease.rs` → `pool::lease`, `pool/mod.rs` →
/// `pool`, `lib.rs` → the root); the binary's files are under `bin`.
fn module_of(rel: &str) -> Vec<String> {
    let no_ext = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = no_ext.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    parts
}

/// The file's code: tests' modules cut off, comments and string
/// literals blanked (line numbers kept).
fn code_of(text: &str) -> String {
    without_test_modules(&without_literals(text))
}

/// `code` (comments and literals already blanked) without its
/// `#[cfg(test)] mod … { … }` blocks, their lines kept as empty lines (line
/// numbers stay), and with whatever follows such a block.
fn without_test_modules(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find(ATTR) {
        let after = &rest[i + ATTR.len()..];
        let item = after.trim_start();
        let open = item
            .strip_prefix("mod ")
            .and_then(|m| m.find(['{', ';']).filter(|&j| m.as_bytes()[j] == b'{'))
            .map(|j| "mod ".len() + j);
        let Some(open) = open else {
            out.push_str(&rest[..i + ATTR.len()]);
            rest = after;
            continue;
        };
        let start = i + ATTR.len() + (after.len() - item.len()) + open;
        let mut depth = 0usize;
        let mut end = rest.len();
        for (k, ch) in rest[start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(&rest[..i]);
        out.extend(rest[i..end].chars().filter(|c| *c == '\n'));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with comments, strings and char literals blanked (their newlines
/// kept).
fn without_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&'*') {
            i += 2;
            while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                if b[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
            continue;
        }
        // A raw string r"…" / r#"…"#.
        if c == 'r'
            && matches!(b.get(i + 1), Some('"' | '#'))
            && !(i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&'"') {
                j += 1;
                loop {
                    match b.get(j) {
                        None => break,
                        Some('"') if (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) => {
                            j += 1 + hashes;
                            break;
                        }
                        Some('\n') => out.push('\n'),
                        _ => {}
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if b.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        // A char literal ('x', '\n', '"'), not a lifetime.
        if c == '\'' {
            let close = if b.get(i + 1) == Some(&'\\') {
                (i + 3..i + 12).find(|&j| b.get(j) == Some(&'\''))
            } else {
                (b.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            if let Some(end) = close {
                out.push_str("' '");
                i = end + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a `use` tree names, each with the name it is given where
/// renamed: `a::{b, c::{d as e}, f::*}` → `a::b`, `a::c::d` (as `e`),
/// `a::f::*`.
fn expand_use(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
    type Out = Vec<(Vec<String>, Option<String>)>;
    fn parse(s: &[char], i: &mut usize, prefix: &[String], out: &mut Out) {
        let mut alias = None;
        let mut path: Vec<String> = prefix.to_vec();
        loop {
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if *i >= s.len() {
                break;
            }
            if s[*i] == '{' {
                *i += 1;
                loop {
                    parse(s, i, &path, out);
                    while *i < s.len() && s[*i].is_whitespace() {
                        *i += 1;
                    }
                    match s.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            break;
                        }
                        _ => break,
                    }
                    while *i < s.len() && s[*i].is_whitespace() {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&'}') {
                        *i += 1;
                        break;
                    }
                }
                return;
            }
            if s[*i] == '*' {
                *i += 1;
                path.push("*".into());
                out.push((path, None));
                return;
            }
            let start = *i;
            while *i < s.len() && is_ident(s[*i]) {
                *i += 1;
            }
            if start == *i {
                break;
            }
            let word: String = s[start..*i].iter().collect();
            path.push(word);
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
                *i += 2;
                continue;
            }
            // `as alias`: the path is what it names.
            if s[*i..].starts_with(&['a', 's']) && s.get(*i + 2).is_some_and(|c| c.is_whitespace())
            {
                *i += 2;
                while *i < s.len() && s[*i].is_whitespace() {
                    *i += 1;
                }
                let start = *i;
                while *i < s.len() && is_ident(s[*i]) {
                    *i += 1;
                }
                alias = Some(s[start..*i].iter().collect::<String>());
            }
            break;
        }
        if path.len() > prefix.len() {
            out.push((path, alias));
        }
    }
    let s: Vec<char> = tree.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    parse(&s, &mut i, &[], &mut out);
    // `a::{self, b}`: `self` is `a`.
    for (p, _) in &mut out {
        if p.last().is_some_and(|l| l == "self") {
            p.pop();
        }
    }
    out
}

/// One path a file names: the line, whether it is a `pub use` (a
/// re-export), and its segments as written.
struct Named {
    line: usize,
    reexport: bool,
    path: Vec<String>,
    /// The name a `use … as name` gives it.
    alias: Option<String>,
}

/// Every `use` path and every `crate::`/`super::`/`self::` path in `code`.
fn named_paths(code: &str) -> Vec<Named> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let line_at = |pos: usize| chars[..pos].iter().filter(|&&c| c == '\n').count() + 1;
    let mut i = 0;
    while i < chars.len() {
        let at_word = i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':';
        // `use …;`
        if at_word
            && chars[i..].starts_with(&['u', 's', 'e'])
            && chars.get(i + 3).is_some_and(|c| c.is_whitespace())
        {
            let end = (i..chars.len())
                .find(|&j| chars[j] == ';')
                .unwrap_or(chars.len());
            let before: String = chars[..i]
                .iter()
                .rev()
                .take(40)
                .collect::<String>()
                .chars()
                .rev()
                .collect();
            let stmt_start = before
                .rfind([';', '{', '}', '\n'])
                .map_or(before.as_str(), |k| &before[k + 1..]);
            let reexport = stmt_start.trim_start().starts_with("pub");
            let tree: String = chars[i + 3..end].iter().collect();
            let line = line_at(i);
            for (path, alias) in expand_use(&tree) {
                out.push(Named {
                    line,
                    reexport,
                    path,
                    alias,
                });
            }
            i = end;
            continue;
        }
        // A path in code: `crate::a::b`, `super::x`, `child::f` (what a
        // bare first segment is, `resolve` decides).
        if at_word && is_ident(chars[i]) && !chars[i].is_ascii_digit() {
            let mut j = i;
            let mut path = Vec::new();
            loop {
                let start = j;
                while j < chars.len() && is_ident(chars[j]) {
                    j += 1;
                }
                if start == j {
                    break;
                }
                path.push(chars[start..j].iter().collect::<String>());
                if chars.get(j) == Some(&':')
                    && chars.get(j + 1) == Some(&':')
                    && chars.get(j + 2).is_some_and(|c| is_ident(*c))
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if path.len() > 1 {
                out.push(Named {
                    line: line_at(i),
                    reexport: false,
                    path,
                    alias: None,
                });
            }
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
    out
}

/// The modules of the tree: module path → the names of its child modules.
type Tree = BTreeMap<Vec<String>, BTreeSet<String>>;

fn tree_of(files: &[Source]) -> Tree {
    let mut tree: Tree = BTreeMap::new();
    for f in files {
        let m = module_of(&f.rel);
        tree.entry(m.clone()).or_default();
        if let Some((last, parent)) = m.split_last() {
            tree.entry(parent.to_vec())
                .or_default()
                .insert(last.clone());
        }
    }
    tree
}

/// `path` as written in module `at`, made absolute; `None` for another
/// crate's path.
fn resolve(at: &[String], path: &[String], tree: &Tree) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some([at, rest].concat()),
        "super" => {
            let mut base = at.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            Some([base.as_slice(), rest].concat())
        }
        // A child module named without `self::`.
        _ if tree.get(at).is_some_and(|c| c.contains(first)) => Some([at, path].concat()),
        _ => None,
    }
}

/// One import between two modules of the crate.
struct Import {
    file: String,
    line: usize,
    from: Vec<String>,
    to: Vec<String>,
}

/// Every import of the crate whose files are `files`; re-exports (`pub use`)
/// of each module, item name → the absolute path it stands for.
fn imports(files: &[Source]) -> (Vec<Import>, BTreeMap<Vec<String>, String>, Tree) {
    let tree = tree_of(files);
    let mut all = Vec::new();
    let mut reexports: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for f in files {
        let at = module_of(&f.rel);
        for n in named_paths(&code_of(&f.text)) {
            let Some(to) = resolve(&at, &n.path, &tree) else {
                continue;
            };
            if n.reexport
                && let Some(name) = n.alias.as_ref().or(to.last())
                && name != "*"
            {
                let mut key = at.clone();
                key.push(name.clone());
                if key != to {
                    reexports.insert(key, to.join("::"));
                }
            }
            all.push(Import {
                file: f.rel.clone(),
                line: n.line,
                from: at.clone(),
                to,
            });
        }
    }
    (all, reexports, tree)
}

/// Imports between top-level modules that their allow-lists do not grant:
/// `importer -> imported` with where each is.
fn forbidden(files: &[Source]) -> BTreeMap<String, Vec<String>> {
    let (all, reexports, _) = imports(files);
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in all {
        // An item a module re-exports is an import of the module that
        // defines it (`crate::pool::Slot` is `crate::identity::slot::Slot`),
        // except in the re-export itself, which names where it reaches.
        let to = through_reexports(&i.to, &reexports);
        // Not the library's (the binary's side), or not a module.
        let (Some(a), Some(b)) = (key_of(&i.from), key_of(&to)) else {
            continue;
        };
        let at = format!("src/{}:{}", i.file, i.line);
        let seen = found.entry(format!("{a} -> {b}")).or_default();
        if !grants(a, b) && !seen.contains(&at) {
            seen.push(at);
        }
    }
    found.retain(|_, at| !at.is_empty());
    found
}

/// `path` with every re-exported prefix replaced by what it re-exports,
/// along a chain of `pub use` (bounded: a chain longer than 16 hops or a
/// loop stops where it is).
fn through_reexports(path: &[String], reexports: &BTreeMap<Vec<String>, String>) -> Vec<String> {
    let mut path = path.to_vec();
    for _ in 0..16 {
        let hit = (1..=path.len())
            .rev()
            .find_map(|n| reexports.get(&path[..n]).map(|t| (n, t)));
        let Some((n, target)) = hit else { break };
        let mut next: Vec<String> = target.split("::").map(str::to_string).collect();
        next.extend_from_slice(&path[n..]);
        if next == path {
            break;
        }
        path = next;
    }
    path
}

/// The part of `folder` that `path` (under it) lies in: a child module's
/// name, or `mod.rs` for the folder's own file, following re-exports.
fn part_of(
    folder: &[String],
    path: &[String],
    tree: &Tree,
    reexports: &BTreeMap<Vec<String>, String>,
) -> String {
    let own = if folder.is_empty() {
        "lib.rs"
    } else {
        "mod.rs"
    };
    let Some(next) = path.get(folder.len()) else {
        return own.into();
    };
    if tree.get(folder).is_some_and(|c| c.contains(next)) {
        return next.clone();
    }
    let key: Vec<String> = path[..=folder.len()].to_vec();
    match reexports.get(&key) {
        Some(target) => {
            let target: Vec<String> = target.split("::").map(str::to_string).collect();
            if target.starts_with(folder) && target.len() > folder.len() && target != key {
                part_of(folder, &target, tree, reexports)
            } else {
                own.into()
            }
        }
        None => own.into(),
    }
}

/// Each folder whose parts import each other in a cycle, with the parts.
fn cycles(files: &[Source]) -> BTreeMap<String, Vec<BTreeSet<String>>> {
    let (all, reexports, tree) = imports(files);
    // folder → part → parts it imports
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for i in &all {
        let k = i.from.iter().zip(&i.to).take_while(|(a, b)| a == b).count();
        let folder = &i.from[..k];
        if !tree.contains_key(folder) || tree[folder].is_empty() {
            continue;
        }
        let own = if folder.is_empty() {
            "lib.rs"
        } else {
            "mod.rs"
        };
        let a = i.from.get(k).cloned().unwrap_or_else(|| own.into());
        let b = part_of(folder, &i.to, &tree, &reexports);
        if a != b {
            graphs
                .entry(folder.to_vec())
                .or_default()
                .entry(a)
                .or_default()
                .insert(b);
        }
    }
    let mut found = BTreeMap::new();
    for (folder, g) in graphs {
        let sccs: Vec<BTreeSet<String>> = strongly_connected(&g)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect();
        if !sccs.is_empty() && std::env::var_os("LAYERS_EDGES").is_some() {
            for (a, bs) in &g {
                for b in bs {
                    if sccs.iter().any(|c| c.contains(a) && c.contains(b)) {
                        eprintln!("{}: {a} -> {b}", folder.join("/"));
                    }
                }
            }
        }
        if !sccs.is_empty() {
            let name = if folder.is_empty() {
                "src".to_string()
            } else {
                folder.join("/")
            };
            found.insert(name, sccs);
        }
    }
    found
}

/// Tarjan's strongly connected components of `g`.
fn strongly_connected(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let next: Vec<&'a str> =
            s.g.get(v)
                .map(|e| e.iter().map(String::as_str).collect())
                .unwrap_or_default();
        for w in next {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                c.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(c);
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Files outside [`ROAD_OWNERS`] that call a road: file → the lines.
fn roads(files: &[Source]) -> BTreeMap<String, Vec<usize>> {
    let mut found: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for f in files {
        if ROAD_OWNERS.iter().any(|o| f.rel.starts_with(o))
            || module_of(&f.rel)
                .first()
                .is_some_and(|m| allowed(m).is_none())
        {
            continue;
        }
        for (n, line) in code_of(&f.text).lines().enumerate() {
            if ROADS.iter().any(|r| line.contains(r)) {
                found.entry(f.rel.clone()).or_default().push(n + 1);
            }
        }
    }
    found
}

fn library() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    sources(&src)
        .into_iter()
        .filter(|f| !(f.rel.starts_with("cli/") || f.rel.starts_with("bin/") || f.rel == "main.rs"))
        .collect()
}

/// `found` holds exactly `known`: a new entry is a violation, a listed one
/// that is gone must leave its list.
fn ratchet(what: &str, found: &BTreeMap<String, String>, known: &[&str]) {
    let new: Vec<String> = found
        .iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    assert!(new.is_empty(), "{what}:\n{}", new.join("\n"));
    let gone: Vec<&&str> = known.iter().filter(|k| !found.contains_key(**k)).collect();
    assert!(
        gone.is_empty(),
        "{what}: listed in tests/offline/layers.rs but no longer in the tree (remove them): {gone:?}"
    );
}

#[test]
fn each_folder_imports_only_what_its_allow_list_names() {
    let files = library();
    let tops = tree_of(&files)
        .get(&Vec::new())
        .cloned()
        .unwrap_or_default();
    for t in &tops {
        assert!(
            allowed(t).is_some(),
            "src/{t}: no allow-list in tests/offline/layers.rs"
        );
    }
    let found: BTreeMap<String, String> = forbidden(&files)
        .into_iter()
        .map(|(k, at)| (k, at.join(", ")))
        .collect();
    ratchet("imports no allow-list grants", &found, KNOWN_IMPORTS);
}

#[test]
fn the_allow_lists_form_no_cycle() {
    let g: BTreeMap<String, BTreeSet<String>> = ALLOWED
        .iter()
        .map(|(m, _)| {
            let to = ALLOWED
                .iter()
                .map(|(o, _)| *o)
                .filter(|o| o != m && grants(m, o))
                .map(str::to_string)
                .collect();
            (m.to_string(), to)
        })
        .collect();
    let loops: Vec<_> = strongly_connected(&g)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    assert!(loops.is_empty(), "the allow-lists allow a cycle: {loops:?}");
}

#[test]
fn no_folder_has_an_import_cycle_at_any_depth() {
    let found: BTreeMap<String, String> = cycles(&library())
        .into_iter()
        .map(|(folder, sccs)| {
            let parts: Vec<String> = sccs
                .iter()
                .map(|c| c.iter().cloned().collect::<Vec<_>>().join(" <-> "))
                .collect();
            (folder, parts.join("; "))
        })
        .collect();
    ratchet("import cycles (folder: parts)", &found, KNOWN_CYCLES);
}

#[test]
fn only_the_lease_reaches_a_site() {
    let found: BTreeMap<String, String> = roads(&library())
        .into_iter()
        .map(|(f, lines)| {
            let lines: Vec<String> = lines.iter().map(ToString::to_string).collect();
            (f, format!("lines {}", lines.join(", ")))
        })
        .collect();
    ratchet(
        "a browser navigation or an HTTP send outside the lease",
        &found,
        KNOWN_ROADS,
    );
}

#[test]
fn the_layout_map_in_lib_rs_names_every_folder() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let listed: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter_map(|l| l.split_whitespace().next())
        .map(|w| w.trim_end_matches('/').trim_end_matches(".rs"))
        .collect();
    for (m, _) in ALLOWED {
        assert!(listed.contains(m), "src/lib.rs's layout map lacks `{m}`");
    }
}

fn file(rel: &str, text: &str) -> Source {
    Source {
        rel: rel.into(),
        text: text.into(),
    }
}

#[test]
fn the_check_catches_each_kind_of_violation() {
    // A folder importing what its allow-list does not name (an upward
    // import included: `browser` may not import `pool`), grouped or not.
    let bad = [
        file(
            "identity/browser/mod.rs",
            "use crate::{pool::Slot, identity::jar::Jar};\n",
        ),
        file(
            "pool/mod.rs",
            "// a comment naming crate::mcp is fine\nlet s = \"crate::mcp\";\n",
        ),
        file("tools/scrape.rs", "fn f() { crate::wire::http::send(); }\n"),
    ];
    let f = forbidden(&bad);
    assert_eq!(
        f.keys().collect::<Vec<_>>(),
        ["identity/browser -> pool", "tools -> wire/http"],
        "{f:?}"
    );
    assert_eq!(
        f["identity/browser -> pool"],
        ["src/identity/browser/mod.rs:1"]
    );

    // An import through a facade's re-export is an import of what it
    // re-exports, along a chain of them (grouped or not).
    let facade = [
        file(
            "pool.rs",
            "pub use crate::lease::Held;\npub use crate::identity::{slot::Slot as Seat};\n",
        ),
        file("lease/mod.rs", "mod held;\npub use held::Held;\n"),
        file(
            "lease/held.rs",
            "pub use crate::identity::slot::Slot as Held;\n",
        ),
        file("identity/slot/mod.rs", "pub struct Slot;\n"),
        file(
            "tools/reset_slot.rs",
            "use crate::pool::{Seat, Pool};\nfn f(s: crate::pool::Held) {}\n",
        ),
    ];
    let f = forbidden(&facade);
    assert_eq!(
        f.keys().collect::<Vec<_>>(),
        ["tools -> identity/slot"],
        "{f:?}"
    );
    assert_eq!(
        f["tools -> identity/slot"],
        ["src/tools/reset_slot.rs:1", "src/tools/reset_slot.rs:2"]
    );

    // A cycle through mod.rs: the folder's file uses a child, the child
    // uses an item the folder's file defines.
    let through_mod = [
        file(
            "pool/mod.rs",
            "mod lease;\npub struct Inner;\nfn f() { lease::Lease::new(); }\n",
        ),
        file("pool/lease.rs", "use super::Inner;\npub struct Lease;\n"),
    ];
    assert_eq!(
        cycles(&through_mod)
            .get("pool")
            .map(|c| c[0].iter().cloned().collect::<Vec<_>>()),
        Some(vec!["lease".to_string(), "mod.rs".to_string()])
    );
    // … but a re-export is the file that defines it: no cycle.
    let reexported = [
        file(
            "pool/mod.rs",
            "mod lease;\nmod slot;\npub use slot::Slot;\npub use lease::Lease;\n",
        ),
        file("pool/lease.rs", "use super::Slot;\npub struct Lease;\n"),
        file("pool/slot.rs", "pub struct Slot;\n"),
    ];
    assert!(cycles(&reexported).is_empty(), "{:?}", cycles(&reexported));

    // A grouped `use super::{…}` cycle between two siblings.
    let grouped = [
        file("mcp/mod.rs", "mod http;\nmod sse;\n"),
        file(
            "mcp/http.rs",
            "use super::{gate, sse::{Sessions, Stream as S}};\n",
        ),
        file("mcp/sse.rs", "use super::http::McpHttp;\n"),
        file("mcp/gate.rs", "pub fn reject() {}\n"),
    ];
    assert_eq!(
        cycles(&grouped)
            .get("mcp")
            .map(|c| c[0].iter().cloned().collect::<Vec<_>>()),
        Some(vec!["http".to_string(), "sse".to_string()])
    );

    // Third level, through `crate::` paths and `super::super`.
    let deep = [
        file("pool/mod.rs", "mod fleet;\n"),
        file("pool/fleet/mod.rs", "mod a;\nmod b;\n"),
        file(
            "pool/fleet/a.rs",
            "fn f() { crate::pool::fleet::b::g(); }\n",
        ),
        file("pool/fleet/b.rs", "use super::super::fleet::a::f;\n"),
    ];
    assert!(
        cycles(&deep).contains_key("pool/fleet"),
        "{:?}",
        cycles(&deep).keys()
    );

    // Strings, comments and tests' modules are not imports.
    let fine = [
        file(
            "pool/mod.rs",
            "mod lease;\nuse crate::identity::browser::SlotBrowser;\nfn f() { lease::go() }\n",
        ),
        file(
            "pool/lease.rs",
            "// super::Inner\nlet x = r#\"super::Inner\"#;\n#[cfg(test)]\nmod tests {\n    use super::super::Inner;\n}\n",
        ),
        file("mcp/http.rs", "use super::gate::reject;\n"),
        file("mcp/gate.rs", "use crate::auth::Role;\n"),
    ];
    assert!(forbidden(&fine).is_empty(), "{:?}", forbidden(&fine));
    // A test module is skipped, not everything after it.
    let after_tests = [file(
        "tools/scrape.rs",
        "#[cfg(test)]\nmod tests {\n    use crate::wire::x;\n    fn t() { let s = \"}\"; }\n}\nfn f() { crate::wire::http::send(); }\n",
    )];
    let f = forbidden(&after_tests);
    assert_eq!(
        f.keys().collect::<Vec<_>>(),
        ["tools -> wire/http"],
        "{f:?}"
    );
    assert_eq!(f["tools -> wire/http"], ["src/tools/scrape.rs:6"]);
    assert!(cycles(&fine).is_empty(), "{:?}", cycles(&fine));

    // A road outside the lease.
    let road = [
        file(
            "pool/live.rs",
            "async fn f(tab: &Tab) { tab.goto(url).await; }\n",
        ),
        file(
            "lease/handle.rs",
            "async fn f(tab: &Tab) { tab.goto(url).await; }\n",
        ),
        file("tools/map.rs", "// pool.fetch(req) in a comment\n"),
    ];
    assert_eq!(
        roads(&road).into_iter().collect::<Vec<_>>(),
        [("pool/live.rs".to_string(), vec![1])]
    );
}

/// Tools whose files name the pool (through any re-export): a tool gets
/// the one handle its `Run` names, and only the tool API (`tools/spec.rs`,
/// `tools/mod.rs`) takes it from the pool.
fn tools_naming_the_pool(files: &[Source]) -> Vec<String> {
    let (all, reexports, _) = imports(files);
    let mut found: Vec<String> = all
        .iter()
        .filter(|i| i.from.first().is_some_and(|m| m == "tools"))
        .filter(|i| !matches!(i.from.get(1).map(String::as_str), None | Some("spec")))
        .filter(|i| key_of(&through_reexports(&i.to, &reexports)) == Some("pool"))
        .map(|i| format!("src/{}:{}", i.file, i.line))
        .collect();
    found.dedup();
    found
}

#[test]
fn no_tool_but_the_tool_api_names_the_pool() {
    let found = tools_naming_the_pool(&library());
    assert!(found.is_empty(), "tools naming the pool: {found:?}");
    let bad = [
        file("pool/mod.rs", "pub struct Pool;\n"),
        file("tools/spec.rs", "use crate::pool::Pool;\n"),
        file(
            "tools/reset_slot.rs",
            "async fn run(p: &crate::pool::Pool) {}\n",
        ),
    ];
    assert_eq!(tools_naming_the_pool(&bad), ["src/tools/reset_slot.rs:1"]);
}

/// Files outside `lease/` and `identity/` whose code names the slot type
/// (`Slot`, as a word) or takes the slots themselves (`slots_for_tests`,
/// which only tests may call): only the lease holds an identity.
fn slots_outside_the_lease(files: &[Source]) -> Vec<String> {
    let mut found = Vec::new();
    for f in files {
        if f.rel.starts_with("lease/") || f.rel.starts_with("identity/") {
            continue;
        }
        for (n, line) in code_of(&f.text).lines().enumerate() {
            let names_slot = line.match_indices("Slot").any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + "Slot".len()..].chars().next();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            });
            if names_slot || line.contains("slots_for_tests") {
                found.push(format!("src/{}:{}", f.rel, n + 1));
            }
        }
    }
    found
}

#[test]
fn only_the_lease_holds_a_slot() {
    let found = slots_outside_the_lease(&library());
    assert!(found.is_empty(), "a slot outside the lease: {found:?}");
    let bad = [
        file(
            "services/live.rs",
            "fn f(s: &Arc<Slot>) {}\n// Slot in a comment\n",
        ),
        file(
            "daemon/metrics.rs",
            "let n = leases.slots_for_tests().len();\nlet e = SlotEnv::new();\n",
        ),
        file(
            "lease/state.rs",
            "pub fn slots_for_tests(&self) -> &[Arc<Slot>] {}\n",
        ),
    ];
    assert_eq!(
        slots_outside_the_lease(&bad),
        ["src/services/live.rs:1", "src/daemon/metrics.rs:1"]
    );
}

/// On the real tree: a tool that names `crate::pool::Slot` while the
/// facade re-exports the slot (as it once did) is refused.
#[test]
fn a_tool_reaching_a_slot_through_the_facade_is_refused() {
    let mut files = library();
    let pool = (files.iter_mut())
        .find(|f| f.rel == "pool/mod.rs")
        .expect("pool/mod.rs");
    pool.text
        .push_str("\npub use crate::identity::slot::Slot;\n");
    let tool = (files.iter_mut())
        .find(|f| f.rel == "tools/reset_slot.rs")
        .expect("a tool");
    tool.text.insert_str(0, "use crate::pool::Slot;\n");
    let found = forbidden(&files);
    let refused = found.get("tools -> identity/slot");
    assert!(
        refused.is_some_and(|at| at.contains(&"src/tools/reset_slot.rs:1".to_string())),
        "{found:?}"
    );
}

/// The daemon's build compiles no testbed code: the testbed is a crate of
/// its own (`crates/testbed`) that only the tests, examples and benches
/// depend on, and of idpool it reads only how a client looks on the wire
/// (`wire::fingerprint`, the same code the calibration judges with; its
/// binary also sets up logging through `diag`).
#[test]
fn the_daemon_builds_without_the_testbed() {
    let tree = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "--offline", "--locked", "--prefix", "none"])
            .args(args)
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
    let daemon = tree(&["-p", "idpool", "-e", "normal,build"]);
    assert!(daemon.starts_with("idpool v"), "{daemon}");
    assert!(
        !daemon.contains("idpool-testbed"),
        "the daemon's build pulls in the testbed:\n{daemon}"
    );
    let tests = tree(&["-p", "idpool", "-e", "dev", "--depth", "1"]);
    assert!(tests.contains("idpool-testbed v"), "{tests}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(!root.join("src/testbed").exists());
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs");
    assert!(!lib.contains("pub mod testbed"));
    // What the testbed takes of idpool.
    let files = sources(&root.join("crates/testbed/src"));
    assert!(files.len() > 5, "{} testbed files", files.len());
    let mut used = std::collections::BTreeSet::new();
    for f in &files {
        let code = code_of(&f.text);
        for (at, _) in code.match_indices("idpool::") {
            let path: String = code[at + "idpool::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let module = path.split("::").take(2).collect::<Vec<_>>().join("::");
            used.insert(format!("{}: {module}", f.rel));
        }
    }
    let allowed =
        |u: &str| u.ends_with(": wire::fingerprint") || u == "main.rs: diag::init_tracing";
    let other: Vec<&String> = used.iter().filter(|u| !allowed(u)).collect();
    assert!(
        other.is_empty(),
        "the testbed imports more of idpool: {other:?}"
    );
    assert!(used.iter().any(|u| allowed(u)), "{used:?}");
}

/// `scripts/bench.sh --versus-rev` builds an earlier commit in a worktree
/// under `.idpool/`: cargo must take it for a workspace of its own, not a
/// stray member of this one.
#[test]
fn an_earlier_commit_under_idpool_is_not_part_of_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(root.join(".idpool")).expect(".idpool");
    let dir = tempfile::Builder::new()
        .prefix("workspace-check-")
        .tempdir_in(root.join(".idpool"))
        .expect("tempdir");
    std::fs::create_dir_all(dir.path().join("src")).expect("src");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"earlier\"\nversion = \"0.0.0\"\nedition = \"2024\"\n",
    )
    .expect("manifest");
    std::fs::write(dir.path().join("src/lib.rs"), "").expect("lib.rs");
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "locate-project",
            "--workspace",
            "--message-format",
            "plain",
            "--offline",
        ])
        .current_dir(dir.path())
        .output()
        .expect("cargo locate-project");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        Path::new(String::from_utf8_lossy(&out.stdout).trim()),
        dir.path().join("Cargo.toml")
    );
}
