//! What still differs between a browser's capture and its HTTP tier's,
//! by name: TLS (extensions, signature algorithms, ...), HTTP/2 frames and
//! priorities, header lists. [`compare`] makes the [`Report`];
//! [`explains_ja4_c`] says whether the residual accounts for JA4's part c.

use serde::{Deserialize, Serialize};

use super::calibration::{Capture, Observed};
use super::tls::{ClientHello, ja4_c};

/// One named difference between the browser and the calibrated HTTP tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Difference {
    /// What differs, e.g. `tls.extension` or `h2.priority.xhr`.
    pub what: String,
    /// The browser's side.
    pub browser: String,
    /// The HTTP tier's side.
    pub http: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: browser {}, http {}",
            self.what, self.browser, self.http
        )
    }
}

/// How close a slot's HTTP tier comes to its browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub browser_ja4: String,
    pub http_ja4: String,
    pub ja4_a_equal: bool,
    pub ja4_b_equal: bool,
    /// Part `c` of the browser's JA4, recomputed without what the residual
    /// names, equals the HTTP tier's: the residual is the whole difference.
    pub ja4_c_explained: bool,
    /// Same Akamai HTTP/2 fingerprint and navigation HEADERS priority.
    pub h2_equal: bool,
    /// Same navigation header list: names, order and values.
    pub headers_equal: bool,
    /// Same XHR header list.
    pub xhr_headers_equal: bool,
    /// Same HTTP/1.1 header lists (names, case, order, values) for both
    /// kinds; `None` when a capture has no HTTP/1.1 sample.
    #[serde(default)]
    pub h1_headers_equal: Option<bool>,
    /// Same header lists for both kinds on an origin that asked for every
    /// client hint; `None` when a capture has no such sample.
    #[serde(default)]
    pub asked_headers_equal: Option<bool>,
    pub residual: Vec<Difference>,
}

fn hex_list(v: &[u16]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(|x| {
            let name = extension_name(*x)
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            format!("0x{x:04x}{name}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn plain_hex(v: &[u16]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(|x| format!("0x{x:04x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// IANA names of the TLS extensions browsers send.
pub fn extension_name(ty: u16) -> Option<&'static str> {
    Some(match ty {
        0x0000 => "server_name",
        0x0005 => "status_request",
        0x000a => "supported_groups",
        0x000b => "ec_point_formats",
        0x000d => "signature_algorithms",
        0x0010 => "alpn",
        0x0012 => "signed_certificate_timestamp",
        0x0015 => "padding",
        0x0017 => "extended_master_secret",
        0x001b => "compress_certificate",
        0x001c => "record_size_limit",
        0x0022 => "delegated_credentials",
        0x0023 => "session_ticket",
        0x0029 => "pre_shared_key",
        0x002b => "supported_versions",
        0x002d => "psk_key_exchange_modes",
        0x0033 => "key_share",
        0x4469 => "application_settings_old",
        0x44cd => "application_settings",
        0xca34 => "trust_anchors",
        0xfe0d => "encrypted_client_hello",
        0xff01 => "renegotiation_info",
        _ => return None,
    })
}

/// Items of `a` missing from `b`, in `a`'s order.
fn minus(a: &[u16], b: &[u16]) -> Vec<u16> {
    a.iter().copied().filter(|x| !b.contains(x)).collect()
}

fn tls_differences(b: &ClientHello, h: &ClientHello, out: &mut Vec<Difference>) {
    let mut push = |what: &str, browser: String, http: String| {
        out.push(Difference {
            what: what.into(),
            browser,
            http,
        })
    };
    let (only_b, only_h) = (
        minus(&b.extensions, &h.extensions),
        minus(&h.extensions, &b.extensions),
    );
    if !only_b.is_empty() || !only_h.is_empty() {
        push(
            "tls.extensions",
            format!("also sends {}", hex_list(&only_b)),
            format!("also sends {}", hex_list(&only_h)),
        );
    }
    let mut bc = b.ciphers.clone();
    let mut hc = h.ciphers.clone();
    if bc != hc {
        bc.sort_unstable();
        hc.sort_unstable();
        let what = if bc == hc {
            "tls.cipher_order"
        } else {
            "tls.ciphers"
        };
        push(what, plain_hex(&b.ciphers), plain_hex(&h.ciphers));
    }
    if b.sig_algs != h.sig_algs {
        let (ob, oh) = (
            minus(&b.sig_algs, &h.sig_algs),
            minus(&h.sig_algs, &b.sig_algs),
        );
        if ob.is_empty() && oh.is_empty() {
            push(
                "tls.signature_algorithm_order",
                plain_hex(&b.sig_algs),
                plain_hex(&h.sig_algs),
            );
        } else {
            push(
                "tls.signature_algorithms",
                format!("also offers {}", sigalg_list(&ob)),
                format!("also offers {}", sigalg_list(&oh)),
            );
        }
    }
    if b.sig_algs_grease != h.sig_algs_grease {
        push(
            "tls.signature_algorithms_grease",
            b.sig_algs_grease.to_string(),
            h.sig_algs_grease.to_string(),
        );
    }
    if b.grease != h.grease {
        push("tls.grease", b.grease.to_string(), h.grease.to_string());
    }
    for (what, bv, hv) in [
        ("tls.groups", &b.groups, &h.groups),
        ("tls.key_shares", &b.key_shares, &h.key_shares),
        ("tls.versions", &b.versions, &h.versions),
        (
            "tls.certificate_compression",
            &b.cert_compression,
            &h.cert_compression,
        ),
    ] {
        if bv != hv {
            push(what, plain_hex(bv), plain_hex(hv));
        }
    }
    if b.alpn != h.alpn {
        push("tls.alpn", b.alpn.join(","), h.alpn.join(","));
    }
    if b.alps != h.alps {
        push("tls.alps", b.alps.join(","), h.alps.join(","));
    }
    if b.record_size_limit != h.record_size_limit {
        push(
            "tls.record_size_limit",
            format!("{:?}", b.record_size_limit),
            format!("{:?}", h.record_size_limit),
        );
    }
}

/// Signature algorithm codes with their names.
fn sigalg_list(v: &[u16]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(|x| match crate::wire::fingerprint::tls::sigalg_name(*x) {
            Some(n) => format!("0x{x:04x} ({n})"),
            None => format!("0x{x:04x}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn header_differences(kind: &str, b: &Observed, h: &Observed, out: &mut Vec<Difference>) -> bool {
    let names =
        |o: &Observed| -> Vec<String> { o.headers.iter().map(|(k, _)| k.clone()).collect() };
    let (bn, hn) = (names(b), names(h));
    let mut equal = true;
    if bn != hn {
        equal = false;
        out.push(Difference {
            what: format!("headers.{kind}.order"),
            browser: bn.join(","),
            http: hn.join(","),
        });
    }
    for (k, v) in &b.headers {
        let theirs = h.headers.iter().find(|(hk, _)| hk == k).map(|(_, v)| v);
        if let Some(hv) = theirs
            && hv != v
        {
            equal = false;
            out.push(Difference {
                what: format!("headers.{kind}.{k}"),
                browser: v.clone(),
                http: hv.clone(),
            });
        }
    }
    equal
}

/// Part c of the browser's JA4 once the residual's TLS items are applied to
/// its hello: the extensions and signature algorithms it names as only the
/// browser's are taken out, those it names as only the HTTP tier's put in.
/// Equal to the HTTP tier's part c when the residual is the whole difference.
pub fn explains_ja4_c(browser: &ClientHello, residual: &[Difference]) -> String {
    let codes = |text: &str| -> Vec<u16> {
        text.split(|c: char| c == ',' || c.is_whitespace())
            .filter_map(|w| w.strip_prefix("0x"))
            .filter_map(|h| u16::from_str_radix(h, 16).ok())
            .collect()
    };
    let mut exts = browser.extensions.clone();
    let mut sigs = browser.sig_algs.clone();
    for d in residual {
        match d.what.as_str() {
            "tls.extensions" => {
                let gone = codes(&d.browser);
                exts.retain(|e| !gone.contains(e));
                exts.extend(codes(&d.http));
            }
            "tls.signature_algorithms" => {
                let gone = codes(&d.browser);
                sigs.retain(|s| !gone.contains(s));
                sigs.extend(codes(&d.http));
            }
            "tls.signature_algorithm_order" => sigs = codes(&d.http),
            _ => {}
        }
    }
    ja4_c(&exts, &sigs)
}

/// Every difference between the browser's capture and the HTTP tier's.
pub fn compare(browser: &Capture, http: &Capture) -> Report {
    let mut residual = Vec::new();
    let (bh, hh) = (&browser.navigation.hello, &http.navigation.hello);
    let ja4 = |h: &Option<ClientHello>| h.as_ref().map_or("-".to_string(), |h| h.ja4.clone());
    let part = |h: &Option<ClientHello>, n: usize| {
        h.as_ref()
            .map(|h| h.ja4_part(n).to_string())
            .unwrap_or_default()
    };
    let mut ja4_c_explained = false;
    if let (Some(b), Some(h)) = (bh, hh) {
        let first = residual.len();
        tls_differences(b, h, &mut residual);
        ja4_c_explained = explains_ja4_c(b, &residual[first..]) == h.ja4_part(2);
    } else if bh != hh {
        residual.push(Difference {
            what: "tls".into(),
            browser: ja4(bh),
            http: ja4(hh),
        });
    }
    let (bn, hn) = (&browser.navigation, &http.navigation);
    if bn.protocol != hn.protocol {
        residual.push(Difference {
            what: "protocol".into(),
            browser: bn.protocol.clone(),
            http: hn.protocol.clone(),
        });
    }
    let opt = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    let mut h2_equal = true;
    if bn.akamai != hn.akamai {
        h2_equal = false;
        residual.push(Difference {
            what: "h2.fingerprint".into(),
            browser: opt(&bn.akamai),
            http: opt(&hn.akamai),
        });
    }
    if bn.priority != hn.priority {
        h2_equal = false;
        residual.push(Difference {
            what: "h2.priority.navigation".into(),
            browser: opt(&bn.priority),
            http: opt(&hn.priority),
        });
    }
    if browser.xhr.priority != http.xhr.priority {
        residual.push(Difference {
            what: "h2.priority.xhr".into(),
            browser: opt(&browser.xhr.priority),
            http: opt(&http.xhr.priority),
        });
    }
    let headers_equal = header_differences("navigation", bn, hn, &mut residual);
    let xhr_headers_equal = header_differences("xhr", &browser.xhr, &http.xhr, &mut residual);
    let h1_headers_equal = sample("h1", &browser.h1, &http.h1, &mut residual);
    let asked_headers_equal = sample("asked", &browser.asked, &http.asked, &mut residual);
    Report {
        browser_ja4: ja4(bh),
        http_ja4: ja4(hh),
        ja4_a_equal: !part(bh, 0).is_empty() && part(bh, 0) == part(hh, 0),
        ja4_b_equal: !part(bh, 1).is_empty() && part(bh, 1) == part(hh, 1),
        ja4_c_explained,
        h2_equal,
        headers_equal,
        xhr_headers_equal,
        h1_headers_equal,
        asked_headers_equal,
        residual,
    }
}

/// A second sample's header lists (`h1`, `asked`): equal or not, `None`
/// when neither side has one.
fn sample(
    what: &str,
    b: &Option<Box<Capture>>,
    h: &Option<Box<Capture>>,
    residual: &mut Vec<Difference>,
) -> Option<bool> {
    match (b, h) {
        (Some(b), Some(h)) => {
            let nav = header_differences(
                &format!("{what}.navigation"),
                &b.navigation,
                &h.navigation,
                residual,
            );
            let xhr = header_differences(&format!("{what}.xhr"), &b.xhr, &h.xhr, residual);
            Some(nav && xhr)
        }
        (None, None) => None,
        (b, h) => {
            residual.push(Difference {
                what: what.into(),
                browser: if b.is_some() { "sampled" } else { "-" }.into(),
                http: if h.is_some() { "sampled" } else { "-" }.into(),
            });
            Some(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fingerprint::calibration::Observed;

    fn h(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    fn observed(headers: Vec<(String, String)>, priority: &str) -> Observed {
        Observed {
            hello: None,
            protocol: "h2".into(),
            akamai: Some("1:65536|15663105|0|m,a,s,p".into()),
            priority: Some(priority.into()),
            headers,
        }
    }

    #[test]
    fn compare_names_every_difference() {
        let nav = vec![h("user-agent", "UA"), h("accept", "text/html")];
        let browser = Capture {
            navigation: observed(nav.clone(), "256:1:0"),
            xhr: observed(nav.clone(), "220:1:0"),
            h1: None,
            asked: None,
        };
        let same = compare(&browser, &browser);
        assert!(same.residual.is_empty(), "{:?}", same.residual);
        assert!(same.h2_equal && same.headers_equal && same.xhr_headers_equal);
        let http = Capture {
            navigation: observed(
                vec![h("accept", "text/html"), h("user-agent", "UA")],
                "220:1:0",
            ),
            xhr: observed(
                vec![h("user-agent", "UA2"), h("accept", "text/html")],
                "256:1:0",
            ),
            h1: None,
            asked: None,
        };
        let r = compare(&browser, &http);
        let what: Vec<&str> = r.residual.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "h2.priority.navigation",
                "h2.priority.xhr",
                "headers.navigation.order",
                "headers.xhr.user-agent"
            ]
        );
        assert!(!r.h2_equal && !r.headers_equal && !r.xhr_headers_equal);
        assert_eq!(r.h1_headers_equal, None);
        // Over HTTP/1.1 a name's case is part of the head.
        let h1 = |ua: &str| {
            let o = observed(vec![h("Host", "a"), h(ua, "UA")], "");
            Some(Box::new(Capture {
                navigation: o.clone(),
                xhr: o,
                h1: None,
                asked: None,
            }))
        };
        let (mut b, mut t) = (browser.clone(), browser.clone());
        b.h1 = h1("User-Agent");
        t.h1 = h1("user-agent");
        let r = compare(&b, &t);
        let what: Vec<&str> = r.residual.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(
            what,
            ["headers.h1.navigation.order", "headers.h1.xhr.order"]
        );
        assert_eq!(r.h1_headers_equal, Some(false));
        assert_eq!(compare(&b, &b).h1_headers_equal, Some(true));
        t.h1 = None;
        assert_eq!(compare(&b, &t).residual[0].what, "h1");
    }

    fn hello(exts: &[u16], sigs: &[u16]) -> ClientHello {
        ClientHello {
            ja4: format!("t13d0000h2_000000000000_{}", ja4_c(exts, sigs)),
            family: "chrome".into(),
            sni: None,
            alpn: vec!["h2".into()],
            grease: true,
            ciphers: vec![0x1301],
            extensions: exts.to_vec(),
            sig_algs: sigs.to_vec(),
            sig_algs_grease: false,
            groups: vec![],
            key_shares: vec![],
            versions: vec![0x0304],
            alps: vec![],
            cert_compression: vec![],
            record_size_limit: None,
        }
    }

    fn with_hello(hello: ClientHello) -> Capture {
        let mut o = observed(vec![h("user-agent", "UA")], "256:1:0");
        o.hello = Some(hello);
        Capture {
            navigation: o.clone(),
            xhr: o,
            h1: None,
            asked: None,
        }
    }

    #[test]
    fn the_residual_explains_ja4_c_only_when_it_is_the_whole_difference() {
        let browser = with_hello(hello(&[0x000a, 0x000d, 0xca34], &[0x0904, 0x0403, 0x0804]));
        let http = with_hello(hello(&[0x000a, 0x000d, 0x001c], &[0x0403, 0x0804]));
        let r = compare(&browser, &http);
        assert!(r.ja4_c_explained, "{:?}", r.residual);
        assert_eq!(r.residual[0].browser, "also sends 0xca34 (trust_anchors)");
        // Signatures missing *and* reordered: the residual names the missing
        // one only, which does not account for part c.
        let http = with_hello(hello(&[0x000a, 0x000d, 0x001c], &[0x0804, 0x0403]));
        let r = compare(&browser, &http);
        assert!(!r.ja4_c_explained, "{:?}", r.residual);
    }
}
