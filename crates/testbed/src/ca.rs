//! The testbed's own CA and server certificate, generated at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Server TLS configs plus where the CA certificate was written.
pub struct Tls {
    /// Sends the leaf and the CA (so SPKI pinning of the CA works).
    pub config: Arc<rustls::ServerConfig>,
    /// Sends the leaf alone, as almost every real server does: a client
    /// must trust the CA itself.
    pub leaf_only: Arc<rustls::ServerConfig>,
    pub ca_path: PathBuf,
    pub ca_pem: String,
}

fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Make a CA and a certificate for `localhost`, `127.0.0.1`, `::1`, `*.shop.test`
/// and `*.web.test`;
/// write the CA to `<dir>/ca.pem`.
pub fn generate(dir: &Path) -> std::io::Result<Tls> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "idpool testbed CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = rcgen::date_time_ymd(2025, 1, 1);
    ca.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;

    let names = vec![
        "localhost".to_string(),
        "127.0.0.1".into(),
        "::1".into(),
        "shop.test".into(),
        "*.shop.test".into(),
        // The open web's stand-ins (resolved by `security.resolve` in tests).
        "web.test".into(),
        "*.web.test".into(),
    ];
    let mut leaf = CertificateParams::new(names).map_err(err)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "idpool testbed");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.not_before = rcgen::date_time_ymd(2025, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2027, 12, 1);
    let leaf_key = KeyPair::generate().map_err(err)?;
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).map_err(err)?;

    std::fs::create_dir_all(dir)?;
    let ca_path = dir.join("ca.pem");
    let ca_pem = ca_cert.pem();
    std::fs::write(&ca_path, &ca_pem)?;

    let leaf_der = CertificateDer::from(leaf_cert.der().to_vec());
    let full = server_config(
        vec![
            leaf_der.clone(),
            CertificateDer::from(ca_cert.der().to_vec()),
        ],
        &leaf_key,
    )?;
    let leaf_only = server_config(vec![leaf_der], &leaf_key)?;
    Ok(Tls {
        config: full,
        leaf_only,
        ca_path,
        ca_pem,
    })
}

/// A server config presenting `chain` (h2 and HTTP/1.1 offered).
fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: &KeyPair,
) -> std::io::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(err)?
        .with_no_client_auth()
        .with_single_cert(
            chain,
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(err)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
