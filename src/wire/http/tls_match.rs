//! The TLS options wreq exposes, set from the slot's browser's ClientHello:
//! cipher suites, signature algorithms and groups (what the TLS library
//! knows, in the browser's order), ALPN, ALPS and its codepoint, GREASE, ECH
//! GREASE, OCSP stapling, SCTs, session tickets and the record size limit.
//! The extension order stays the emulation's (Chrome permutes it per
//! connection); what the library cannot send shows up in the residual.

use std::borrow::Cow;

use wreq::tls::{AlpnProtocol, AlpsProtocol};

use crate::wire::fingerprint::tls::{
    ClientHello, cipher_name, group_name, sigalg_name, sigalg_supported,
};

/// Names joined with `:` when every code has one, else `None`.
fn all_named(codes: &[u16], name: fn(u16) -> Option<&'static str>) -> Option<String> {
    let names: Option<Vec<&str>> = codes.iter().map(|c| name(*c)).collect();
    names.filter(|n| !n.is_empty()).map(|n| n.join(":"))
}

fn alpn(p: &str) -> Option<AlpnProtocol> {
    match p {
        "h2" => Some(AlpnProtocol::HTTP2),
        "http/1.1" => Some(AlpnProtocol::HTTP1),
        "h3" => Some(AlpnProtocol::HTTP3),
        _ => None,
    }
}

fn alps(p: &str) -> Option<AlpsProtocol> {
    match p {
        "h2" => Some(AlpsProtocol::HTTP2),
        "http/1.1" => Some(AlpsProtocol::HTTP1),
        "h3" => Some(AlpsProtocol::HTTP3),
        _ => None,
    }
}

/// Bring the emulation's ClientHello closer to `hello`.
pub fn apply(emulation: &mut wreq::Emulation, hello: &ClientHello) {
    let Some(tls) = emulation.tls_options.as_mut() else {
        return;
    };
    let has = |e: u16| hello.extensions.contains(&e);
    if let Some(list) = all_named(&hello.ciphers, cipher_name) {
        tls.cipher_list = Some(Cow::Owned(list));
    }
    let sigalgs: Vec<u16> = hello
        .sig_algs
        .iter()
        .copied()
        .filter(|s| sigalg_supported(*s))
        .collect();
    if let Some(list) = all_named(&sigalgs, sigalg_name) {
        tls.sigalgs_list = Some(Cow::Owned(list));
    }
    let groups: Vec<u16> = hello
        .groups
        .iter()
        .copied()
        .filter(|g| group_name(*g).is_some())
        .collect();
    if let Some(list) = all_named(&groups, group_name) {
        tls.curves_list = Some(Cow::Owned(list));
    }
    let protos: Option<Vec<AlpnProtocol>> = hello.alpn.iter().map(|p| alpn(p)).collect();
    if let Some(protos) = protos.filter(|p| !p.is_empty()) {
        tls.alpn_protocols = Some(Cow::Owned(protos));
    }
    if has(0x44cd) || has(0x4469) {
        let protos: Option<Vec<AlpsProtocol>> = hello.alps.iter().map(|p| alps(p)).collect();
        if let Some(protos) = protos.filter(|p| !p.is_empty()) {
            tls.alps_protocols = Some(Cow::Owned(protos));
            tls.alps_use_new_codepoint = has(0x44cd);
        }
    } else {
        tls.alps_protocols = None;
    }
    tls.grease_enabled = Some(hello.grease);
    tls.enable_ech_grease = has(0xfe0d);
    tls.enable_ocsp_stapling = has(0x0005);
    tls.enable_signed_cert_timestamps = has(0x0012);
    tls.session_ticket = has(0x0023);
    tls.record_size_limit = hello.record_size_limit;
    // An extension the library cannot send (Chromium's trust_anchors) would
    // leave the extension count, JA4 part a, one short: record_size_limit
    // takes its place. Part c differs either way; the residual names both.
    if hello.record_size_limit.is_none() && hello.extensions.iter().any(|e| UNSENDABLE.contains(e))
    {
        tls.record_size_limit = Some(FILLER_RECORD_SIZE_LIMIT);
    }
}

/// Extensions browsers send that the TLS library has no option for.
pub const UNSENDABLE: [u16; 1] = [0xca34];

/// The record size limit sent as the stand-in extension (Firefox's value).
const FILLER_RECORD_SIZE_LIMIT: u16 = 0x4001;
