//! TLS ClientHellos: their JA4 fingerprint and the parts a calibration
//! compares (cipher suites, extensions, groups, signature algorithms, ALPN,
//! ALPS, certificate compression).
//!
//! JA4 = `a_b_c`: `a` is protocol, TLS version, SNI, cipher and extension counts
//! and ALPN; `b` hashes the sorted cipher list; `c` hashes the sorted extension
//! list (without SNI and ALPN) and the signature algorithms in order. GREASE
//! values are ignored everywhere, the signature-algorithm list included.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What we learned from one ClientHello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientHello {
    pub ja4: String,
    /// Our guess at the client family: `chrome`, `safari`, `firefox` or `other`.
    pub family: String,
    pub sni: Option<String>,
    pub alpn: Vec<String>,
    pub grease: bool,
    /// Cipher suites in the order sent, GREASE left out.
    pub ciphers: Vec<u16>,
    /// Extension types in the order sent (Chrome permutes it), GREASE left out.
    pub extensions: Vec<u16>,
    /// Signature algorithms in order, GREASE left out.
    pub sig_algs: Vec<u16>,
    /// A GREASE value inside `signature_algorithms`.
    #[serde(default)]
    pub sig_algs_grease: bool,
    /// `supported_groups`, GREASE left out.
    #[serde(default)]
    pub groups: Vec<u16>,
    /// Groups with a key share, GREASE left out.
    #[serde(default)]
    pub key_shares: Vec<u16>,
    /// TLS versions offered, GREASE left out.
    #[serde(default)]
    pub versions: Vec<u16>,
    /// ALPS (application settings) protocols, from either codepoint.
    #[serde(default)]
    pub alps: Vec<String>,
    /// `compress_certificate` algorithms.
    #[serde(default)]
    pub cert_compression: Vec<u16>,
    pub record_size_limit: Option<u16>,
}

impl ClientHello {
    /// Browsers pass the testbed's JA4 gate; curl, rustls, Go, Python... do not.
    pub fn is_browser(&self) -> bool {
        self.family != "other"
    }

    /// JA4 part `a`, `b` or `c` (0, 1, 2).
    pub fn ja4_part(&self, n: usize) -> &str {
        self.ja4.split('_').nth(n).unwrap_or("")
    }
}

/// JA4 part `c` of these extensions (any order) and signature algorithms.
pub fn ja4_c(extensions: &[u16], sig_algs: &[u16]) -> String {
    let exts: Vec<u16> = sorted(extensions)
        .into_iter()
        .filter(|e| *e != 0x0000 && *e != 0x0010)
        .collect();
    if exts.is_empty() {
        "000000000000".to_string()
    } else if sig_algs.is_empty() {
        hash12(&join_hex(&exts))
    } else {
        hash12(&format!("{}_{}", join_hex(&exts), join_hex(sig_algs)))
    }
}

/// BoringSSL's name of a signature algorithm (the `sigalgs_list` syntax).
pub fn sigalg_name(code: u16) -> Option<&'static str> {
    Some(match code {
        0x0201 => "rsa_pkcs1_sha1",
        0x0203 => "ecdsa_sha1",
        0x0401 => "rsa_pkcs1_sha256",
        0x0403 => "ecdsa_secp256r1_sha256",
        0x0501 => "rsa_pkcs1_sha384",
        0x0503 => "ecdsa_secp384r1_sha384",
        0x0601 => "rsa_pkcs1_sha512",
        0x0603 => "ecdsa_secp521r1_sha512",
        0x0804 => "rsa_pss_rsae_sha256",
        0x0805 => "rsa_pss_rsae_sha384",
        0x0806 => "rsa_pss_rsae_sha512",
        0x0807 => "ed25519",
        0x0904 => "mldsa44",
        0x0905 => "mldsa65",
        0x0906 => "mldsa87",
        _ => return None,
    })
}

/// Signature algorithms the HTTP tier's TLS library can offer.
pub fn sigalg_supported(code: u16) -> bool {
    !matches!(code, 0x0904..=0x0906) && sigalg_name(code).is_some()
}

/// BoringSSL's name of a named group (the `curves_list` syntax).
pub fn group_name(code: u16) -> Option<&'static str> {
    Some(match code {
        0x0017 => "P-256",
        0x0018 => "P-384",
        0x0019 => "P-521",
        0x001d => "X25519",
        0x11ec => "X25519MLKEM768",
        0x6399 => "X25519Kyber768Draft00",
        _ => return None,
    })
}

/// BoringSSL's name of a cipher suite (the `cipher_list` syntax).
pub fn cipher_name(code: u16) -> Option<&'static str> {
    Some(match code {
        0x1301 => "TLS_AES_128_GCM_SHA256",
        0x1302 => "TLS_AES_256_GCM_SHA384",
        0x1303 => "TLS_CHACHA20_POLY1305_SHA256",
        0xc02b => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        0xc02f => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        0xc02c => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        0xc030 => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        0xcca9 => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        0xcca8 => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        0xc013 => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        0xc014 => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        0xc009 => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        0xc00a => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        0x009c => "TLS_RSA_WITH_AES_128_GCM_SHA256",
        0x009d => "TLS_RSA_WITH_AES_256_GCM_SHA384",
        0x002f => "TLS_RSA_WITH_AES_128_CBC_SHA",
        0x0035 => "TLS_RSA_WITH_AES_256_CBC_SHA",
        _ => return None,
    })
}

/// GREASE values (RFC 8701): 0x?a?a with equal bytes.
pub fn is_grease(v: u16) -> bool {
    (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff)
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
}

fn u16s(data: &[u8]) -> Vec<u16> {
    data.chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

/// Parse a ClientHello handshake message body (after the 4-byte handshake header).
pub fn parse_client_hello(body: &[u8]) -> Option<ClientHello> {
    let mut r = Reader { buf: body };
    let legacy_version = r.u16()?;
    r.take(32)?; // random
    r.vec8()?; // session id
    let all_ciphers = u16s(r.vec16()?);
    r.vec8()?; // compression methods
    let mut h = ClientHello {
        ja4: String::new(),
        family: String::new(),
        sni: None,
        alpn: Vec::new(),
        grease: all_ciphers.iter().any(|c| is_grease(*c)),
        ciphers: all_ciphers.into_iter().filter(|c| !is_grease(*c)).collect(),
        extensions: Vec::new(),
        sig_algs: Vec::new(),
        sig_algs_grease: false,
        groups: Vec::new(),
        key_shares: Vec::new(),
        versions: Vec::new(),
        alps: Vec::new(),
        cert_compression: Vec::new(),
        record_size_limit: None,
    };
    if let Some(exts) = r.vec16() {
        let mut e = Reader { buf: exts };
        while !e.buf.is_empty() {
            let ty = e.u16()?;
            let data = e.vec16()?;
            if is_grease(ty) {
                h.grease = true;
                continue;
            }
            h.extensions.push(ty);
            h.read_extension(ty, Reader { buf: data });
        }
    }
    h.ja4 = format!(
        "{}_{}_{}",
        h.ja4_a(legacy_version),
        hash12(&join_hex(&sorted(&h.ciphers))),
        ja4_c(&h.extensions, &h.sig_algs)
    );
    h.family = h.guess_family().to_string();
    Some(h)
}

impl ClientHello {
    /// What one extension tells (those JA4 and the family guess read).
    fn read_extension(&mut self, ty: u16, mut d: Reader<'_>) {
        let strings = |list: Option<&[u8]>, out: &mut Vec<String>| {
            let mut l = Reader {
                buf: list.unwrap_or_default(),
            };
            while let Some(p) = l.vec8() {
                out.push(String::from_utf8_lossy(p).into_owned());
            }
        };
        let no_grease = |v: Vec<u16>| v.into_iter().filter(|x| !is_grease(*x)).collect();
        match ty {
            0x0000 => {
                // server_name_list: type(1) name(vec16)
                let mut l = Reader {
                    buf: d.vec16().unwrap_or_default(),
                };
                if l.u8() == Some(0) {
                    self.sni = l.vec16().map(|n| String::from_utf8_lossy(n).into_owned());
                }
            }
            0x0010 => strings(d.vec16(), &mut self.alpn),
            0x002b => self.versions = no_grease(d.vec8().map(u16s).unwrap_or_default()),
            0x000d => {
                let all = d.vec16().map(u16s).unwrap_or_default();
                self.sig_algs_grease = all.iter().any(|s| is_grease(*s));
                self.sig_algs = no_grease(all);
            }
            0x000a => self.groups = no_grease(d.vec16().map(u16s).unwrap_or_default()),
            0x0033 => {
                let mut l = Reader {
                    buf: d.vec16().unwrap_or_default(),
                };
                while let (Some(group), Some(_)) = (l.u16(), l.vec16()) {
                    if !is_grease(group) {
                        self.key_shares.push(group);
                    }
                }
            }
            0x4469 | 0x44cd => strings(d.vec16(), &mut self.alps),
            0x001b => self.cert_compression = d.vec8().map(u16s).unwrap_or_default(),
            0x001c => self.record_size_limit = d.u16(),
            _ => {}
        }
    }

    /// JA4 part a: protocol, version, SNI, cipher and extension counts, ALPN.
    fn ja4_a(&self, legacy_version: u16) -> String {
        let version = self
            .versions
            .iter()
            .copied()
            .max()
            .unwrap_or(legacy_version);
        let ver = match version {
            0x0304 => "13",
            0x0303 => "12",
            0x0302 => "11",
            0x0301 => "10",
            0x0300 => "s3",
            _ => "00",
        };
        let alpn_code = match self.alpn.first().map(String::as_bytes) {
            Some([]) | None => "00".to_string(),
            Some(v) => {
                let (first, last) = (v[0], v[v.len() - 1]);
                if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() {
                    format!("{}{}", first as char, last as char)
                } else {
                    let h = hex::encode(v);
                    format!("{}{}", &h[..1], &h[h.len() - 1..])
                }
            }
        };
        format!(
            "t{ver}{}{:02}{:02}{alpn_code}",
            if self.sni.is_some() { 'd' } else { 'i' },
            self.ciphers.len().min(99),
            self.extensions.len().min(99)
        )
    }

    /// GREASE + certificate compression + ALPS = chrome; GREASE + certificate
    /// compression = safari; record size limit + delegated credentials
    /// without GREASE = firefox.
    fn guess_family(&self) -> &'static str {
        let has = |e: u16| self.extensions.contains(&e);
        if self.grease && has(0x001b) && (has(0x4469) || has(0x44cd)) {
            "chrome"
        } else if self.grease && has(0x001b) {
            "safari"
        } else if !self.grease && has(0x001c) && has(0x0022) {
            "firefox"
        } else {
            "other"
        }
    }
}

fn sorted(v: &[u16]) -> Vec<u16> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

fn join_hex(v: &[u16]) -> String {
    v.iter()
        .map(|x| format!("{x:04x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn hash12(s: &str) -> String {
    if s.is_empty() {
        return "000000000000".into();
    }
    hex::encode(Sha256::digest(s.as_bytes()))[..12].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(ty: u16, data: &[u8]) -> Vec<u8> {
        let mut v = ty.to_be_bytes().to_vec();
        v.extend((data.len() as u16).to_be_bytes());
        v.extend(data);
        v
    }

    fn vec16(data: &[u8]) -> Vec<u8> {
        let mut v = (data.len() as u16).to_be_bytes().to_vec();
        v.extend(data);
        v
    }

    /// A ClientHello shaped like the JA4 spec's worked example, with GREASE sprinkled in.
    fn hello(grease: bool) -> Vec<u8> {
        let mut ciphers: Vec<u16> = vec![0x1301, 0x1302, 0x1303, 0xc02b];
        let mut sig: Vec<u16> = vec![0x0403, 0x0804, 0x0401];
        if grease {
            ciphers.insert(0, 0x3a3a);
            sig.insert(1, 0x2a2a);
        }
        let mut exts = Vec::new();
        if grease {
            exts.extend(ext(0x1a1a, &[]));
        }
        let mut sni = vec![0u8];
        sni.extend(vec16(b"shop.test"));
        exts.extend(ext(0x0000, &vec16(&sni)));
        let mut alpn = vec![2u8];
        alpn.extend(b"h2");
        alpn.push(8);
        alpn.extend(b"http/1.1");
        exts.extend(ext(0x0010, &vec16(&alpn)));
        let mut versions = vec![];
        if grease {
            versions.extend(0x7a7au16.to_be_bytes());
        }
        versions.extend(0x0304u16.to_be_bytes());
        versions.extend(0x0303u16.to_be_bytes());
        let mut sv = vec![versions.len() as u8];
        sv.extend(versions);
        exts.extend(ext(0x002b, &sv));
        let sig_bytes: Vec<u8> = sig.iter().flat_map(|s| s.to_be_bytes()).collect();
        exts.extend(ext(0x000d, &vec16(&sig_bytes)));
        exts.extend(ext(0x001b, &[2, 0, 2]));
        exts.extend(ext(0x44cd, &[]));
        let mut body = vec![0x03, 0x03];
        body.extend([0u8; 32]);
        body.push(0);
        let c: Vec<u8> = ciphers.iter().flat_map(|s| s.to_be_bytes()).collect();
        body.extend(vec16(&c));
        body.extend([1, 0]);
        body.extend(vec16(&exts));
        body
    }

    #[test]
    fn grease_is_ignored_everywhere() {
        let with = parse_client_hello(&hello(true)).unwrap();
        let without = parse_client_hello(&hello(false)).unwrap();
        assert_eq!(with.ja4, without.ja4, "GREASE changed the fingerprint");
        assert!(with.grease && !without.grease);
        assert_eq!(with.sig_algs, vec![0x0403, 0x0804, 0x0401]);
        assert!(with.ja4.starts_with("t13d0406h2_"), "{}", with.ja4);
        assert_eq!(with.sni.as_deref(), Some("shop.test"));
        assert_eq!(with.family, "chrome");
        assert_eq!(without.family, "other");
    }

    #[test]
    fn cipher_hash_matches_the_spec_construction() {
        let h = parse_client_hello(&hello(false)).unwrap();
        let b = h.ja4.split('_').nth(1).unwrap();
        assert_eq!(
            b,
            &hex::encode(Sha256::digest(b"1301,1302,1303,c02b"))[..12]
        );
        let c = h.ja4.split('_').nth(2).unwrap();
        let expect = hex::encode(Sha256::digest(b"000d,001b,002b,44cd_0403,0804,0401"));
        assert_eq!(c, &expect[..12]);
    }

    #[test]
    fn truncated_hello_is_none_not_a_panic() {
        let full = hello(true);
        for n in 0..full.len() {
            let _ = parse_client_hello(&full[..n]);
        }
        assert!(parse_client_hello(&full[..10]).is_none());
    }
}
