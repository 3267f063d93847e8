//! Finding 12: the private-address check missed IPv6 forms with an IPv4
//! inside and three ranges; and the note: an `allowed_origins` entry ending
//! in `:*` never matched. The addresses are judged by the guard the tiers
//! call, on IP literals and `security.resolve` names (no DNS, nothing
//! connects); the origins by a real daemon.

use idpool::config::{PrivateNetworks, SecurityConfig};
use idpool::error::ErrorKind;
use idpool::wire::http::Guard;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::daemon::{Daemon, Mcp};

/// Each is private, loopback, link-local or reserved, in a form the old
/// check let through.
const MISSED: &[&str] = &[
    // IPv4-compatible: ::127.0.0.1, ::169.254.169.254, ::10.0.0.1
    "::127.0.0.1",
    "::169.254.169.254",
    "::10.0.0.1",
    // IPv4-translated (RFC 2765)
    "::ffff:0:127.0.0.1",
    "::ffff:0:192.168.1.1",
    // NAT64: the well-known prefix around a metadata address, and the
    // local-use prefix
    "64:ff9b::169.254.169.254",
    "64:ff9b::7f00:1",
    "64:ff9b:1::a00:1",
    // 6to4 of 127.0.0.1, 10.0.0.1, 169.254.169.254
    "2002:7f00:1::1",
    "2002:a00:1::",
    "2002:a9fe:a9fe::",
    // site-local
    "fec0::1",
    // benchmarking, reserved, limited broadcast
    "198.18.0.1",
    "198.19.1.1",
    "240.0.0.1",
    "255.255.255.255",
];

fn bracketed(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    }
}

#[tokio::test]
async fn ipv6_forms_with_an_ipv4_inside_and_missing_ranges_are_private() {
    // The daemon's default: the open web, no private network.
    let guard = Guard::from_config(Vec::new(), &SecurityConfig::default());
    for ip in MISSED {
        // A literal in the URL: judged without any lookup.
        let url = url::Url::parse(&format!("http://{}:8080/x", bracketed(ip))).expect("url");
        let e = guard.check(&url).await.expect_err(ip);
        assert_eq!(e.kind(), ErrorKind::Refused, "{ip}: {e}");
        assert!(
            e.to_string().contains("allow_private_networks"),
            "{ip}: {e}"
        );
        // What a resolver answered for a name: the browser egress's and the
        // HTTP tier's resolver's check.
        let addr = ip.parse().expect("ip");
        assert!(
            guard.check_address("rebound.web.test", addr).is_err(),
            "{ip}"
        );
    }
    // A name that resolves to one of them (security.resolve: no DNS).
    let mut sec = SecurityConfig::default();
    sec.resolve.insert(
        "nat64.web.test".into(),
        "64:ff9b::a9fe:a9fe".parse().expect("ip"),
    );
    let guard = Guard::from_config(Vec::new(), &sec);
    let url = url::Url::parse("https://nat64.web.test/latest/meta-data").expect("url");
    let e = guard.check(&url).await.expect_err("nat64 name");
    assert!(e.to_string().contains("64:ff9b::a9fe:a9fe"), "{e}");

    // The same wrappers around a public IPv4 stay public (judged only).
    let open = Guard::from_config(Vec::new(), &SecurityConfig::default());
    for ip in [
        "::ffff:0:93.184.216.34",
        "64:ff9b::93.184.216.34",
        "2002:5db8:d822::1",
        "198.20.0.1",
    ] {
        assert!(
            open.check_address("public.web.test", ip.parse().expect("ip"))
                .is_ok(),
            "{ip}"
        );
    }
    // An address allowed one by one stays allowed.
    let sec = SecurityConfig {
        allow_private_networks: PrivateNetworks::Only(vec!["198.18.0.1".parse().expect("ip")]),
        ..SecurityConfig::default()
    };
    let guard = Guard::from_config(Vec::new(), &sec);
    assert!(
        guard
            .check_address("bench.test", "198.18.0.1".parse().expect("ip"))
            .is_ok()
    );
}

/// An MCP initialize with `Origin: origin`: its HTTP status.
async fn initialize_from(d: &Daemon, origin: &str) -> StatusCode {
    let c = Mcp::new(d, None);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "idpool-test", "version": "1"}}});
    let b = c
        .request(reqwest::Method::POST)
        .header("origin", origin)
        .body(body.to_string());
    c.send(b).await.status
}

#[tokio::test]
async fn an_allowed_origin_ending_in_colon_star_matches_any_port_of_its_scheme_and_host() {
    let env = crate::common::shop(1).await;
    let d = Daemon::start(
        &env,
        1,
        "allowed_origins = [\"http://localhost:*\", \"https://app.example.test:*\"]",
    )
    .await;
    // The brief's pair. (localhost is also admitted as loopback; a
    // subdomain of it is not.)
    assert_eq!(
        initialize_from(&d, "http://localhost:5173").await,
        StatusCode::OK
    );
    assert_eq!(
        initialize_from(&d, &format!("http://{}.localhost:5173", "evil")).await,
        StatusCode::FORBIDDEN
    );
    // A non-loopback host: only the wildcard admits it, on any port, with
    // its scheme and host only.
    for port in ["5173", "8443", "1"] {
        assert_eq!(
            initialize_from(&d, &format!("https://app.example.test:{port}")).await,
            StatusCode::OK,
            "{port}"
        );
    }
    assert_eq!(
        initialize_from(&d, "https://app.example.test").await,
        StatusCode::OK
    );
    for other in [
        "http://app.example.test:5173",
        "https://evil.app.example.test:5173",
        "https://app.example.test.evil.test:5173",
        "https://example.test:5173",
    ] {
        assert_eq!(
            initialize_from(&d, other).await,
            StatusCode::FORBIDDEN,
            "{other}"
        );
    }
    d.stop().await;
}
