//! Acceptance: no test reaches an address outside 127.0.0.0/8.
//!
//! Two layers: `scripts/test.sh` runs the suite in a network namespace that has only
//! a loopback interface, so nothing else is reachable at all; and this test reads
//! every test, script and bundled strategy for URLs or addresses that point
//! elsewhere, so a slip is caught by name even where the namespace is unavailable.

use std::path::Path;

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == "node_modules") {
            // Third-party packages (tests/mcp-js), installed by npm, not ours.
            continue;
        }
        if p.is_dir() {
            files(&p, out);
        } else if p
            .extension()
            .is_some_and(|x| x == "rs" || x == "sh" || x == "toml")
        {
            out.push(p);
        }
    }
}

fn allowed_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host.starts_with("127.")
        || host == "::1"
        || host.ends_with(".test") // RFC 2606: never resolves; used for refusals and parsing
        || host.contains('{') // format! templates filled with a loopback address
        || host.is_empty()
        // The vocabulary's name in structured data (`@context`, `itemtype`,
        // `vocab`), as every shop page writes it; the reader never fetches a
        // context (src/strategy/structured/).
        || host == "schema.org"
        || host == "www.schema.org"
}

#[test]
fn tests_scripts_and_strategies_name_only_loopback_hosts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for d in ["tests", "scripts", "strategies"] {
        files(&root.join(d), &mut all);
    }
    assert!(all.len() > 5, "found too few files: {all:?}");
    let mut bad = Vec::new();
    // Files that name real sites only as data: the amazon strategy itself, and its
    // fixture test, which parses URLs and HTML offline and never fetches (the test
    // namespace could not reach them anyway).
    // The amazon fixtures (`idpool strategy test`) are judged offline too.
    // The search engines' strategies and fixtures, likewise: their hosts are
    // data; the tests aim copies of them at `*.web.test` names.
    let data_only = [
        "strategies/amazon.toml",
        "strategies/duckduckgo.toml",
        "strategies/bing.toml",
        "tests/strategies/amazon.rs",
    ];
    let fixtures =
        ["amazon", "duckduckgo", "bing"].map(|s| root.join("strategies/fixtures").join(s));
    for path in all {
        if data_only.iter().any(|d| path.ends_with(d))
            || fixtures.iter().any(|f| path.starts_with(f))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            for scheme in ["http://", "https://", "socks5://", "wss://", "ws://"] {
                for (i, _) in line.match_indices(scheme) {
                    let rest = &line[i + scheme.len()..];
                    let authority = rest
                        .split(['/', '"', '\'', ' ', ')', '?', '`', '\\'])
                        .next()
                        .unwrap_or("");
                    let host_port = authority.rsplit('@').next().unwrap_or("");
                    let host = if host_port.starts_with('[') {
                        host_port
                            .split(']')
                            .next()
                            .map(|h| format!("{h}]"))
                            .unwrap_or_default()
                    } else {
                        host_port.split(':').next().unwrap_or("").to_string()
                    };
                    if !allowed_host(&host) {
                        bad.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "non-loopback addresses in tests/scripts/strategies:\n{}",
        bad.join("\n")
    );
}

#[test]
fn inside_the_test_namespace_only_loopback_is_up() {
    // scripts/test.sh sets this when it runs the suite under `unshare --net`.
    if std::env::var_os("IDPOOL_TEST_NETNS").is_none() {
        eprintln!("not in the isolated namespace (run through scripts/test.sh); skipping");
        return;
    }
    let net = std::fs::read_to_string("/proc/net/dev").expect("/proc/net/dev");
    let ifaces: Vec<&str> = net
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, ["lo"], "interfaces besides loopback: {ifaces:?}");
}
