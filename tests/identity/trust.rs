//! Browser trust for `security.extra_root_certs` (issue 15, item 6): a
//! server that sends only its leaf certificate, as almost every server does,
//! is trusted by the slot's Chromium when its CA is configured, and refused
//! with the certificate error named when it is not.

use crate::common;

use common::{shop, shutdown_and_check};
use idpool::request::FetchRequest;

#[tokio::test]
async fn a_leaf_only_server_is_trusted_through_extra_root_certs_and_only_through_them() {
    let env = shop(1).await;
    let leaf = env.testbed.https_leaf_url().expect("leaf-only listener");
    let url = |path: &str| url::Url::parse(&format!("{leaf}{path}")).expect("url");
    let pool = env.pool();
    // The HTTP tier trusts the CA as a root.
    let f = pool
        .fetch(FetchRequest::get(url("/product/B0LEAF")), Some(0))
        .await
        .expect("HTTP tier over the leaf-only port");
    assert_eq!(f.response.status, 200);
    // So does the slot's Chromium.
    let page = pool
        .browse(
            url("/product/B0LEAF"),
            Some("#productTitle".into()),
            Some(0),
        )
        .await
        .expect("browser tier over the leaf-only port");
    assert_eq!(page.response.status, 200);
    shutdown_and_check(&pool).await;
    drop(pool);

    // Without the CA: refused, and the error says why.
    env.write_config(1, false);
    let pool = env.pool();
    let e = pool
        .browse(
            url("/product/B0LEAF"),
            Some("#productTitle".into()),
            Some(0),
        )
        .await
        .expect_err("untrusted");
    assert!(e.to_string().contains("ERR_CERT_AUTHORITY_INVALID"), "{e}");
    shutdown_and_check(&pool).await;
}
