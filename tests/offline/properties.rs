//! Property tests (proptest, on stable, in the suite) for every parser that
//! reads bytes someone else chose: the ClientHello, HTTP/2 frame + HPACK and
//! HTTP/1 parsers (any client of the calibration listener), strategy TOML,
//! extraction on arbitrary HTML and JSON (any website), session import
//! files (any user), and the bridge's SSE parser (the daemon's stream). Each
//! must never panic, and where a generator builds valid input, must read it
//! back exactly. `fuzz/` holds the same targets for `cargo fuzz`
//! (`scripts/fuzz.sh`); every crash either finds becomes a case here.

use crate::common;

use std::path::Path;

use idpool::identity::session;
use idpool::mcp::client::SseParser;
use idpool::request::SessionFormat as Format;
use idpool::strategy::{Strategy as _, TomlStrategy};
use idpool::wire::fingerprint::{h1, h2, tls};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn vec16(data: &[u8]) -> Vec<u8> {
    let mut v = u16::try_from(data.len())
        .unwrap_or(u16::MAX)
        .to_be_bytes()
        .to_vec();
    v.extend(data);
    v
}

/// A well-formed ClientHello body from its parts.
fn client_hello(ciphers: &[u16], exts: &[(u16, Vec<u8>)], session: &[u8]) -> Vec<u8> {
    let mut body = vec![0x03, 0x03];
    body.extend([7u8; 32]);
    body.push(session.len() as u8);
    body.extend(session);
    let c: Vec<u8> = ciphers.iter().flat_map(|s| s.to_be_bytes()).collect();
    body.extend(vec16(&c));
    body.extend([1, 0]);
    let mut e = Vec::new();
    for (ty, data) in exts {
        e.extend(ty.to_be_bytes());
        e.extend(vec16(data));
    }
    body.extend(vec16(&e));
    body
}

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn header_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,15}"
}

fn header_value() -> impl Strategy<Value = String> {
    "[ -~]{0,40}".prop_map(|v| v.trim().to_string())
}

fn testshop() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/testshop.toml"))
        .expect("bundled testshop")
}

/// A soup of tags, attributes, text and broken markup.
fn html_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{0,12}",
        Just("<div class=\"review\" data-review-id=\"R1\">".to_string()),
        Just("<span class=\"review-author\">".to_string()),
        Just("<span class=\"review-rating\">4.0 out of 5</span>".to_string()),
        Just("</div>".to_string()),
        Just("</span>".to_string()),
        Just("<li class=\"a-last\"><a href=\"?page=2\">".to_string()),
        Just("<div class=\"no-reviews\">".to_string()),
        Just("<!--".to_string()),
        Just("<script>".to_string()),
        Just("&amp;&#xFFFF;&#0;".to_string()),
        Just("<".to_string()),
        Just("\u{0}\u{feff}".to_string()),
        "<[a-z]{1,6}( [a-z-]{1,8}=\"[^\"]{0,8}\")?>",
    ];
    prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

/// Pieces of structured data as shops write it, and as a hostile page might.
fn structured_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z0-9 .,]{0,8}",
        Just(r#"{"@context":"https://schema.org","@type":"Product","name":"x","#.to_string()),
        Just(r#""aggregateRating":{"@type":"AggregateRating","ratingValue":"#.to_string()),
        Just(r#""review":[{"@type":"Review","reviewRating":{"ratingValue":"#.to_string()),
        Just(r#""bestRating":"0","worstRating":"9"}"#.to_string()),
        Just(r##"{"@id":"#a"},{"@id":"#a","itemReviewed":{"@id":"#a"}}"##.to_string()),
        Just(r#""@graph":["#.to_string()),
        Just("}]".to_string()),
        Just("<div itemscope itemtype=\"https://schema.org/Review\" itemref=\"r\" id=\"r\">".to_string()),
        Just("<span itemprop=\"reviewRating\" itemscope><meta itemprop=\"ratingValue\" content=\"7\">".to_string()),
        Just("<div vocab=\"https://schema.org/\" typeof=\"Product\"><span property=\"review\" typeof=\"Review\">".to_string()),
        Just("</span></div>".to_string()),
        Just("//<![CDATA[ /* */ ]]>".to_string()),
        Just("&amp;#038;\u{0}".to_string()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        "[ -~]{0,20}".prop_map(serde_json::Value::String),
        html_soup().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("html".to_string()),
                    Just("total".to_string()),
                    Just("has_more".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn client_hello_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        let _ = tls::parse_client_hello(&bytes);
    }

    #[test]
    fn a_well_formed_client_hello_is_read_back(
        ciphers in prop::collection::vec(any::<u16>(), 1..40),
        exts in prop::collection::vec((any::<u16>(), prop::collection::vec(any::<u8>(), 0..40)), 0..20),
        session in prop::collection::vec(any::<u8>(), 0..32),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let body = client_hello(&ciphers, &exts, &session);
        let hello = tls::parse_client_hello(&body);
        prop_assert!(hello.is_some(), "a well-formed ClientHello was refused");
        // Mutated and truncated copies: no panic, whatever they give.
        let mut bent = body.clone();
        for (i, b) in &flips {
            let at = i.index(bent.len());
            bent[at] = *b;
        }
        let _ = tls::parse_client_hello(&bent);
        let _ = tls::parse_client_hello(&body[..cut.index(body.len() + 1)]);
    }

    #[test]
    fn h2_frames_and_hpack_never_panic(
        frames in prop::collection::vec((0u8..12, any::<u8>(), any::<u32>(), prop::collection::vec(any::<u8>(), 0..64)), 0..16),
    ) {
        let mut b = PREFACE.to_vec();
        for (kind, flags, stream, payload) in &frames {
            b.extend(h2_frame(*kind, *flags, *stream, payload));
        }
        let _ = h2::parse(&b);
        let _ = h2::parse(&b[PREFACE.len()..]);
    }

    #[test]
    fn h2_headers_are_read_back_in_order(
        headers in prop::collection::vec((header_name(), header_value()), 0..12),
        path in "/[a-z0-9/]{0,20}",
    ) {
        let mut list: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b":method".to_vec(), b"GET".to_vec()),
            (b":authority".to_vec(), b"shop.test".to_vec()),
            (b":scheme".to_vec(), b"https".to_vec()),
            (b":path".to_vec(), path.clone().into_bytes()),
        ];
        list.extend(headers.iter().map(|(k, v)| (k.clone().into_bytes(), v.clone().into_bytes())));
        let mut enc = loona_hpack::Encoder::new();
        let block = enc.encode(list.iter().map(|(k, v)| (&k[..], &v[..])));
        let mut b = PREFACE.to_vec();
        b.extend(h2_frame(0x4, 0, 0, &[]));
        b.extend(h2_frame(0x1, 0x4 | 0x1, 1, &block));
        let c = h2::parse(&b);
        prop_assert_eq!(c.requests.len(), 1);
        prop_assert_eq!(c.requests[0].pseudo(":path"), Some(path.as_str()));
        let got: Vec<(String, String)> = c.requests[0].headers[4..].to_vec();
        prop_assert_eq!(got, headers);
    }

    #[test]
    fn h1_heads_are_read_back_and_junk_never_panics(
        headers in prop::collection::vec((header_name(), header_value()), 0..12),
        junk in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut req = String::from("GET /x HTTP/1.1\r\n");
        for (k, v) in &headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        let heads = h1::parse(req.as_bytes());
        prop_assert_eq!(heads.len(), 1);
        prop_assert_eq!(&heads[0].headers, &headers);
        let _ = h1::parse(&junk);
        let mut both = req.into_bytes();
        both.extend(&junk);
        let _ = h1::parse(&both);
    }

    #[test]
    fn strategy_toml_never_panics_when_mangled(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, "[ -~\n]{0,6}"), 1..8),
    ) {
        let mut text = testshop();
        for (at, op, s) in &edits {
            let mut i = at.index(text.len());
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            match op {
                0 => text.insert_str(i, s),
                1 => {
                    let mut end = (i + s.len()).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.replace_range(i..end, "");
                }
                _ => text.replace_range(i..i, s),
            }
        }
        let _ = TomlStrategy::parse(Path::new("mangled.toml"), &text);
    }

    #[test]
    fn extraction_never_panics_on_any_page(html in html_soup(), json in json_value()) {
        let s = TomlStrategy::parse(Path::new("testshop.toml"), &testshop()).expect("bundled");
        let url = url::Url::parse("https://shop.test/product-reviews/B0X?page=1").expect("url");
        let body = json.to_string();
        for op in s.operations().values() {
            for tier in &op.tiers {
                let _ = tier.extractor.extract(&html, tier.html_pointer.as_deref(), &url);
                let _ = tier.extractor.extract(&body, tier.html_pointer.as_deref(), &url);
            }
        }
    }

    #[test]
    fn session_files_never_panic(
        text in "[ -~\t\n]{0,400}",
        cookies in prop::collection::vec(("[a-z]{1,8}", "[ -~]{0,12}", "[a-z.]{1,12}", any::<i64>()), 0..6),
    ) {
        for f in [Format::Auto, Format::Netscape, Format::Json, Format::StorageState] {
            let _ = session::parse(&text, f);
        }
        let _ = session::detect(&text);
        // Shaped like the real formats, with values anyone may put there.
        let txt: String = cookies
            .iter()
            .map(|(n, v, d, e)| format!("{d}\tTRUE\t/\tFALSE\t{e}\t{n}\t{v}\n"))
            .collect();
        let arr: Vec<serde_json::Value> = cookies
            .iter()
            .map(|(n, v, d, e)| serde_json::json!({"name": n, "value": v, "domain": d, "expirationDate": e}))
            .collect();
        let state = serde_json::json!({"cookies": arr, "origins": [{"origin": "https://x.test", "localStorage": [{"name": 1}]}]});
        for t in [txt, serde_json::Value::Array(arr.clone()).to_string(), state.to_string()] {
            for f in [Format::Auto, Format::Netscape, Format::Json, Format::StorageState] {
                let _ = session::parse(&t, f);
            }
        }
    }

    #[test]
    fn sse_events_are_the_same_however_the_stream_is_cut(
        events in prop::collection::vec("[ -~]{1,30}", 1..10),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        junk in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut stream = String::from(": ping\n\n");
        for e in &events {
            stream.push_str(&format!("event: message\r\ndata: {e}\n\n"));
        }
        let bytes = stream.as_bytes();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len())).collect();
        at.sort_unstable();
        let mut p = SseParser::default();
        let mut got = Vec::new();
        let mut from = 0;
        for cut in at.into_iter().chain([bytes.len()]) {
            got.extend(p.push(&bytes[from..cut]));
            from = cut;
        }
        prop_assert_eq!(got, events);
        let _ = SseParser::default().push(&junk);
    }
}

/// The same bodies as the `html_convert`, `selector` and `jar` fuzz targets
/// (`scripts/fuzz.sh --smoke` runs those under libFuzzer), on stable, on
/// generated input shaped like what a hostile site or caller sends.
fn hostile_config() -> ProptestConfig {
    ProptestConfig {
        cases: 48,
        ..config()
    }
}

/// A page nested `depth` deep around a soup, as `html_convert` feeds it.
fn deep_page(depth: usize, tag: &str, soup: &str) -> String {
    format!(
        "<html><body>{}{soup}{}</body></html>",
        format!("<{tag}>").repeat(depth),
        format!("</{tag}>").repeat(depth / 2)
    )
}

/// Run `f` on a thread with the page workers' stack (64 MiB): the
/// conversions recurse up to the depth cap, as they do in the daemon.
fn on_page_worker(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(f)
        .expect("a thread")
        .join()
        .expect("the conversion panicked");
}

/// Selector text with runs of nesting, as a caller may send.
fn selector_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z.#>+~ *]{0,8}",
        (1usize..1500).prop_map(|n| ":not(".repeat(n)),
        (1usize..200).prop_map(|n| "[a=".repeat(n)),
        (1usize..100).prop_map(|n| ":is(".repeat(n)),
        Just(")".to_string()),
        Just("]".to_string()),
        Just("div".to_string()),
        Just(":has(> p)".to_string()),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

/// Deepest `(`/`[` nesting of a selector's text.
fn nesting(css: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for c in css.chars() {
        match c {
            '(' | '[' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

proptest! {
    #![proptest_config(hostile_config())]

    #[test]
    fn html_conversions_stay_bounded_however_deep(
        depth in prop_oneof![0usize..600, 600usize..6000],
        tag in prop_oneof![Just("div"), Just("b"), Just("table"), Just("li"), Just("p")],
        soup in html_soup(),
    ) {
        let html = deep_page(depth, tag, &soup);
        on_page_worker(move || {
            let url = url::Url::parse("https://site.test/a/b").expect("url");
            let parsed = idpool::dom::document(&html);
            assert!(idpool::dom::depth(&parsed.html) <= idpool::dom::MAX_DEPTH + 1);
            let page = idpool::web::Page::parse(&html, &url);
            let sel = |c: &str| scraper::Selector::parse(c).expect("selector");
            let picks = [
                idpool::web::Pick::main(false),
                idpool::web::Pick::main(true),
                // include_tags / exclude_tags on the nested tag itself.
                idpool::web::Pick {
                    only_main: true,
                    include: vec![sel(tag), sel("p")],
                    exclude: vec![sel("b")],
                },
            ];
            for pick in &picks {
                let _ = page.markdown(pick);
                let _ = page.text(pick);
                let _ = page.cleaned_html(pick);
            }
            let _ = page.links();
            let f = idpool::dom::fragment(&html);
            assert!(idpool::dom::depth(&f.html) <= idpool::dom::MAX_DEPTH + 1);
        });
    }

    #[test]
    fn structured_data_reads_stay_bounded_and_ratings_on_scale(
        nest in prop_oneof![0usize..64, 64usize..20_000],
        soup in structured_soup(),
    ) {
        // As the `structured` fuzz target feeds it: the soup as a page, and
        // as a JSON-LD block, around arrays nested `nest` deep.
        let json = format!("{}{soup}{}", "[".repeat(nest), "]".repeat(nest / 2));
        on_page_worker(move || {
            let url = url::Url::parse("https://shop.test/item/1").expect("url");
            let block = format!("<script type=\"application/ld+json\">{json}</script>");
            for page in [soup.as_str(), block.as_str()] {
                let found = idpool::strategy::structured::read_text(page, Some(&url));
                let reviews = found.products.iter().flat_map(|p| p.reviews.iter());
                for r in reviews.chain(found.reviews.iter().map(|(_, r)| r)) {
                    if let Some(rating) = r.rating {
                        assert!((0.0..=5.0).contains(&rating.stars), "{rating:?}");
                    }
                }
            }
        });
    }

    #[test]
    fn selectors_are_checked_before_they_are_parsed(css in selector_soup()) {
        // On the test thread's own small stack: a nested selector that got
        // past the check would overflow it and abort the binary.
        let checked = idpool::dom::selector::parse(&css);
        if nesting(&css) > idpool::dom::selector::MAX_NESTING
            || css.len() > idpool::dom::selector::MAX_BYTES
        {
            prop_assert!(checked.is_err(), "{} bytes passed the check", css.len());
        }
        let _ = idpool::diag::css_problem(&css);
        if let Ok(sel) = checked {
            let page = idpool::dom::document("<html><body><div id=a class=b><p>x</p></div></body></html>");
            let _ = page.html.select(&sel).count();
        }
    }

    #[test]
    fn no_public_suffix_and_no_plain_http_secure_cookie_gets_in(
        lines in prop::collection::vec((
            "[a-zA-Z_-]{1,8}",
            prop_oneof![Just(""), Just("__Host-"), Just("__Secure-")],
            prop_oneof![Just(""), Just("test"), Just(".test"), Just("site.test"), Just("a.site.test"),
                        Just("co.uk"), Just("com"), Just("victim.test"), Just("127.0.0.1")],
            prop_oneof![Just(""), Just("; Secure"), Just("; Path=/"), Just("; Path=/x; Secure"), Just("; HttpOnly")],
            prop_oneof![Just("http"), Just("https")],
        ), 1..12),
    ) {
        let jar = idpool::identity::jar::Jar::in_memory();
        for (name, prefix, domain, attrs, scheme) in &lines {
            let url = url::Url::parse(&format!("{scheme}://a.site.test/p")).expect("url");
            let domain = if domain.is_empty() { String::new() } else { format!("; Domain={domain}") };
            let _ = jar.set_cookie(&format!("{prefix}{name}=v{domain}{attrs}"), &url);
        }
        for c in jar.export_all() {
            let bare = c.domain.trim_matches('.');
            prop_assert!(
                c.host_only || !idpool::identity::jar::is_public_suffix(bare),
                "a cookie for the public suffix `{}` got in", c.domain
            );
            prop_assert!(
                c.domain.trim_start_matches('.').ends_with("site.test"),
                "a.site.test set a cookie for `{}`", c.domain
            );
            if c.name.starts_with("__Host-") {
                prop_assert!(c.host_only && c.secure && c.path == "/", "{c:?}");
            }
            if c.name.starts_with("__Secure-") {
                prop_assert!(c.secure, "{c:?}");
            }
        }
        // Secure cookies only from https: replay the http lines alone.
        let plain = idpool::identity::jar::Jar::in_memory();
        let url = url::Url::parse("http://a.site.test/p").expect("url");
        for (name, prefix, _, attrs, _) in &lines {
            let _ = plain.set_cookie(&format!("{prefix}{name}=v{attrs}"), &url);
        }
        prop_assert!(plain.export_all().iter().all(|c| !c.secure), "a Secure cookie over http");
    }
}

/// JSON-RPC messages shaped like MCP's, with anything in their fields.
fn rpc_message() -> impl Strategy<Value = serde_json::Value> {
    let method = prop_oneof![
        Just("tools/call"),
        Just("tools/list"),
        Just("resources/read"),
        Just("prompts/get"),
        Just("initialize"),
        Just("ping"),
        Just("notifications/cancelled"),
        Just("completion/complete"),
        Just("nope/nothing"),
    ];
    let tool = prop_oneof![
        Just("scrape".to_string()),
        Just("get_reviews".to_string()),
        Just("extract".to_string()),
        Just("pool_status".to_string()),
        Just("crawl_status".to_string()),
        Just("list_strategies".to_string()),
        "[a-z_]{1,10}",
    ];
    let id = prop_oneof![
        any::<i64>().prop_map(|i| serde_json::json!(i)),
        "[ -~]{0,8}".prop_map(serde_json::Value::String),
        Just(serde_json::Value::Null),
        json_value(),
    ];
    (method, tool, id, json_value(), any::<bool>(), any::<bool>()).prop_map(
        |(method, tool, id, args, shaped, with_id)| {
            let params = if shaped {
                serde_json::json!({"name": tool, "arguments": args, "uri": "idpool://slots"})
            } else {
                args
            };
            let mut m = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
            if with_id {
                m["id"] = id;
            }
            m
        },
    )
}

/// The dispatcher and both HTTP transports take any message: every answer is
/// an HTTP answer below 500 (a JSON-RPC or tool error, never a dropped
/// connection), and the daemon serves a normal call after 400 of them.
#[tokio::test]
async fn the_dispatcher_takes_arbitrary_messages() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let env = common::shop(1).await;
    let d = common::daemon::Daemon::start(&env, 1, "").await;
    let mut c = common::daemon::Mcp::new(&d, None);
    assert!(c.initialize().await.status.is_success());
    let http = reqwest::Client::new();
    let mut runner = TestRunner::deterministic();
    let messages = rpc_message();
    let raw = prop::collection::vec(any::<u8>(), 0..300);
    for i in 0..400 {
        let body = if i % 5 == 4 {
            raw.new_tree(&mut runner).expect("bytes").current()
        } else {
            messages
                .new_tree(&mut runner)
                .expect("message")
                .current()
                .to_string()
                .into_bytes()
        };
        let r = c
            .request(reqwest::Method::POST)
            .body(body.clone())
            .timeout(std::time::Duration::from_secs(30))
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "message {i} dropped the connection: {e}: {}",
                    String::from_utf8_lossy(&body)
                )
            });
        assert!(
            r.status().as_u16() < 500,
            "message {i}: HTTP {}: {}",
            r.status(),
            String::from_utf8_lossy(&body)
        );
        let _ = r.bytes().await;
        // The same on the legacy transport's message route (unknown session: 404).
        if i % 20 == 0 {
            let r = http
                .post(d.url("/messages?session_id=x"))
                .body(body)
                .send()
                .await
                .expect("legacy route answers");
            assert!(r.status().as_u16() < 500, "legacy: HTTP {}", r.status());
        }
    }
    let r = c
        .tool(9_999, "list_strategies", serde_json::json!({}))
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    d.stop().await;
}
