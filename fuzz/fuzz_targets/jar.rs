#![no_main]
//! The jar's roads in: arbitrary bytes as a `Set-Cookie` value from an
//! arbitrary request URL (through wreq's `CookieStore` adapter, as the HTTP
//! tier calls it), and as a session file imported into the jar. Whatever
//! goes in, nothing panics and no cookie the jar holds has a public suffix
//! as its Domain.
use idpool::identity::jar::{Jar, is_public_suffix};
use idpool::identity::session;
use idpool::request::SessionFormat as Format;
use wreq::cookie::CookieStore as _;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let jar = Jar::in_memory();
    // First line: the request URL; the rest: one Set-Cookie value a line.
    let text = String::from_utf8_lossy(data);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let url = url::Url::parse(first)
        .ok()
        .or_else(|| url::Url::parse(&format!("http://{first}/")).ok());
    if let Some(url) = url {
        if let Ok(uri) = url.as_str().parse::<http::Uri>() {
            let values: Vec<http::HeaderValue> = rest
                .lines()
                .filter_map(|l| http::HeaderValue::from_str(l).ok())
                .collect();
            jar.set_cookies(&mut values.iter(), &uri);
            let _ = jar.cookies(&uri, http::Version::HTTP_11);
        }
        for line in rest.lines() {
            let _ = jar.set_cookie(line, &url);
        }
    }
    // The same bytes as a session file, in every format.
    for f in [
        Format::Auto,
        Format::Netscape,
        Format::Json,
        Format::StorageState,
    ] {
        if let Ok(s) = session::parse(&text, f) {
            let (report, kept) = session::merge(&jar, &s);
            assert_eq!(report.taken + report.refused.len(), s.cookies.len());
            assert!(kept.cookies.len() <= s.cookies.len());
        }
    }
    for c in jar.export_all() {
        let bare = c.domain.trim_start_matches('[').trim_end_matches(']');
        let address = bare.parse::<std::net::IpAddr>().is_ok();
        assert!(
            c.host_only || address || !is_public_suffix(c.domain.trim_matches('.')),
            "a cookie for the public suffix `{}` got in",
            c.domain
        );
    }
});
