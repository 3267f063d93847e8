//! The sealed container of an identity bundle: a passphrase stretched by
//! Argon2id into a key for XChaCha20-Poly1305, the header bound to the
//! ciphertext as associated data. What is inside is the caller's (a JSON
//! document of the identity, `crate::services::bundles`).
//!
//! ```text
//! "IDPOOL-IDENTITY\n"  16 bytes
//! version              1 byte (1)
//! argon2id m, t, p     3 × u32 little-endian (KiB, passes, lanes)
//! salt                 16 bytes
//! nonce                24 bytes
//! ciphertext + tag     the rest (16-byte Poly1305 tag at the end)
//! ```
//!
//! A wrong passphrase and a changed byte anywhere are the same failure
//! (the tag does not verify); a cut file is too short or fails the same
//! way; another version is named. Opening a hostile file is bounded: its
//! Argon2 cost must be within [`MAX_M_KIB`] and [`MAX_T`], its size within
//! [`MAX_BYTES`].

use argon2::{Algorithm, Argon2, Params, Version};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

use crate::error::{Error, ErrorKind, Result};

const MAGIC: &[u8; 16] = b"IDPOOL-IDENTITY\n";
/// The format this build writes and reads.
pub const VERSION: u8 = 1;
const HEADER: usize = 16 + 1 + 12 + 16 + 24;
const TAG: usize = 16;

/// Argon2id cost of a new bundle: 64 MiB, 3 passes, 1 lane (RFC 9106's
/// second recommendation).
const M_KIB: u32 = 64 * 1024;
const T: u32 = 3;
const P: u32 = 1;
/// The most a bundle may ask its opener to spend.
pub const MAX_M_KIB: u32 = 1024 * 1024;
pub const MAX_T: u32 = 16;
const MAX_P: u32 = 16;
/// The largest bundle opened.
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

fn refused(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg)
}

fn key(passphrase: &str, salt: &[u8], m: u32, t: u32, p: u32) -> Result<Zeroizing<[u8; 32]>> {
    let params = Params::new(m, t, p, Some(32)).map_err(|e| {
        refused(format!(
            "identity bundle: its Argon2 parameters are not valid ({e})"
        ))
    })?;
    let mut key = Zeroizing::new([0u8; 32]);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase.as_bytes(), salt, key.as_mut())
        .map_err(|e| Error::new(ErrorKind::Internal, format!("identity bundle: Argon2: {e}")))?;
    Ok(key)
}

/// Seal `payload` with `passphrase`.
pub fn seal(payload: &[u8], passphrase: &str) -> Result<Vec<u8>> {
    seal_with(payload, passphrase, (M_KIB, T, P))
}

/// [`seal`] at a chosen Argon2 cost (tests).
pub fn seal_with(payload: &[u8], passphrase: &str, (m, t, p): (u32, u32, u32)) -> Result<Vec<u8>> {
    if passphrase.chars().count() < 8 {
        return Err(refused(
            "the passphrase is too short: give at least 8 characters",
        ));
    }
    let salt: [u8; 16] = rand::random();
    let nonce: [u8; 24] = rand::random();
    let mut out = Vec::with_capacity(HEADER + payload.len() + TAG);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    for v in [m, t, p] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&salt);
    out.extend_from_slice(&nonce);
    let key = key(passphrase, &salt, m, t, p)?;
    let cipher = XChaCha20Poly1305::new(key.as_ref().into());
    let sealed = cipher
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: payload,
                aad: &out,
            },
        )
        .map_err(|_| Error::new(ErrorKind::Internal, "identity bundle: encryption failed"))?;
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// Open a bundle: its payload, or why not (nothing else is touched).
pub fn open(bytes: &[u8], passphrase: &str) -> Result<Vec<u8>> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(refused(
            "not an idpool identity bundle (its first bytes are not IDPOOL-IDENTITY)",
        ));
    }
    if bytes.len() > MAX_BYTES {
        return Err(refused(format!(
            "the identity bundle is {} bytes, over the {MAX_BYTES} this idpool opens",
            bytes.len()
        )));
    }
    let version = bytes.get(16).copied().unwrap_or(0);
    if version != VERSION {
        return Err(refused(format!(
            "the identity bundle is format version {version}; this idpool reads version {VERSION}"
        )));
    }
    if bytes.len() < HEADER + TAG {
        return Err(refused(format!(
            "the identity bundle is cut short ({} bytes; a whole one has at least {})",
            bytes.len(),
            HEADER + TAG
        )));
    }
    let u32_at = |i: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&bytes[i..i + 4]);
        u32::from_le_bytes(b)
    };
    let (m, t, p) = (u32_at(17), u32_at(21), u32_at(25));
    if m > MAX_M_KIB || t > MAX_T || p > MAX_P {
        return Err(refused(format!(
            "the identity bundle asks for an Argon2 cost over this idpool's bound (m {m} KiB, t {t}, p {p})"
        )));
    }
    let salt = &bytes[29..45];
    let nonce = &bytes[45..HEADER];
    let key = key(passphrase, salt, m, t, p)?;
    let cipher = XChaCha20Poly1305::new(key.as_ref().into());
    cipher
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: &bytes[HEADER..],
                aad: &bytes[..HEADER],
            },
        )
        .map_err(|_| {
            refused(
                "the identity bundle does not open: the passphrase is wrong, or the file was changed or cut",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHEAP: (u32, u32, u32) = (64, 1, 1);

    #[test]
    fn seals_and_opens_and_refuses_every_damage() {
        let payload = br#"{"identity": "alice"}"#;
        let sealed = seal_with(payload, "correct horse", CHEAP).unwrap();
        assert_eq!(open(&sealed, "correct horse").unwrap(), payload);
        let said = |r: Result<Vec<u8>>| r.unwrap_err().to_string();
        assert!(said(open(&sealed, "wrong horse!")).contains("passphrase is wrong"));
        // Every byte matters: the header (bound as associated data), the
        // salt, the nonce, the ciphertext, the tag.
        for i in [17, 30, 50, HEADER + 2, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(open(&bad, "correct horse").is_err(), "byte {i} flipped");
        }
        for n in [10, 40, HEADER + 3, sealed.len() - 1] {
            assert!(open(&sealed[..n], "correct horse").is_err(), "cut at {n}");
        }
        let mut other = sealed.clone();
        other[16] = 2;
        assert!(said(open(&other, "correct horse")).contains("format version 2"));
        assert!(said(open(b"PK\x03\x04 a zip", "x")).contains("not an idpool identity bundle"));
        // A hostile cost is refused before any work.
        let mut costly = sealed.clone();
        costly[17..21].copy_from_slice(&(MAX_M_KIB + 1).to_le_bytes());
        assert!(said(open(&costly, "correct horse")).contains("over this idpool's bound"));
        assert!(said(seal(payload, "short")).contains("at least 8"));
        // Two seals of one payload differ (salt and nonce).
        assert_ne!(seal_with(payload, "correct horse", CHEAP).unwrap(), sealed);
    }
}
