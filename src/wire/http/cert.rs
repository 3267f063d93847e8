//! Certificates the daemon trusts beyond the public roots
//! (`security.extra_root_certs`): read from PEM files once, handed to the
//! HTTP tier as a root store and to Chromium as SPKI pins (the form
//! `--ignore-certificate-errors-spki-list` takes).

use std::path::PathBuf;

use base64::Engine;
use sha2::{Digest, Sha256};
use wreq::tls::trust::CertStore;

use crate::error::{Error, ErrorKind, Result};

/// The trusted roots: the public ones plus `security.extra_root_certs`.
/// wreq's `tls_cert_store` replaces its defaults, so both go in here.
#[derive(Clone)]
pub struct RootStore(pub(crate) CertStore);

impl RootStore {
    /// Only the certificates of `pem` (the calibration listener's own).
    pub fn only(pem: &str) -> Result<Self> {
        CertStore::builder()
            .add_stack_pem_certs(pem.as_bytes())
            .build()
            .map(RootStore)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("certificate ({e})")))
    }

    /// Public roots (webpki) plus every PEM certificate in `extra`.
    pub fn new(extra: &[PathBuf]) -> Result<Self> {
        let mut builder = CertStore::builder().add_der_certs(
            webpki_root_certs::TLS_SERVER_ROOT_CERTS
                .iter()
                .map(|c| c.as_ref()),
        );
        for path in extra {
            let pem = std::fs::read(path).map_err(|e| {
                Error::io(
                    format!("security.extra_root_certs: cannot read {}", path.display()),
                    e,
                )
            })?;
            builder = builder.add_stack_pem_certs(pem);
        }
        builder.build().map(RootStore).map_err(|e| {
            Error::config(format!(
                "security.extra_root_certs: invalid certificate ({e})"
            ))
        })
    }
}

/// base64(SHA-256(SubjectPublicKeyInfo)) of every certificate in the PEM files,
/// the form `--ignore-certificate-errors-spki-list` takes.
pub fn spki_hashes(pem_files: &[PathBuf]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for path in pem_files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        for der in pem_blocks(&text) {
            let spki = spki_of(&der).ok_or_else(|| {
                Error::config(format!(
                    "{}: a certificate could not be parsed",
                    path.display()
                ))
            })?;
            out.push(base64::engine::general_purpose::STANDARD.encode(Sha256::digest(spki)));
        }
    }
    Ok(out)
}

/// Every certificate of the PEM files, DER-encoded (for the browser's own
/// trust store).
pub fn root_ders(pem_files: &[PathBuf]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for path in pem_files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        out.extend(pem_blocks(&text));
    }
    Ok(out)
}

/// base64(SHA-256(SubjectPublicKeyInfo)) of one DER certificate.
pub fn spki_hash_der(der: &[u8]) -> Option<String> {
    spki_of(der).map(|spki| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(spki)))
}

/// The DER bytes of every `CERTIFICATE` block of a PEM text.
pub fn pem_blocks(text: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            cur = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            if let Some(b64) = cur.take()
                && let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64)
            {
                out.push(der);
            }
        } else if let Some(c) = cur.as_mut() {
            c.push_str(line);
        }
    }
    out
}

/// One DER element.
struct Der<'a> {
    tag: u8,
    /// Header and contents.
    whole: &'a [u8],
    contents: &'a [u8],
    /// What follows the element.
    rest: &'a [u8],
}

fn der_next(buf: &[u8]) -> Option<Der<'_>> {
    let tag = *buf.first()?;
    let first = *buf.get(1)?;
    let (len, hdr) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | usize::from(*buf.get(2 + i)?);
        }
        (len, 2 + n)
    };
    let end = hdr.checked_add(len)?;
    if buf.len() < end {
        return None;
    }
    Some(Der {
        tag,
        whole: &buf[..end],
        contents: &buf[hdr..end],
        rest: &buf[end..],
    })
}

/// The SubjectPublicKeyInfo element of a DER certificate.
fn spki_of(cert: &[u8]) -> Option<&[u8]> {
    let cert_body = der_next(cert)?.contents;
    let mut tbs = der_next(cert_body)?.contents;
    // Optional [0] version, then serial, signature, issuer, validity, subject, SPKI.
    let first = der_next(tbs)?;
    if first.tag == 0xa0 {
        tbs = first.rest;
    }
    for _ in 0..5 {
        tbs = der_next(tbs)?.rest;
    }
    let spki = der_next(tbs)?;
    (spki.tag == 0x30).then_some(spki.whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spki_hash_matches_openssl() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x.test".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let pem = dir.path().join("c.pem");
        std::fs::write(&pem, cert.pem()).unwrap();
        let ours = spki_hashes(std::slice::from_ref(&pem)).unwrap();
        assert_eq!(ours.len(), 1);
        // The public key DER is exactly the SPKI.
        let expect =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(key.public_key_der()));
        assert_eq!(ours[0], expect);
    }
}
