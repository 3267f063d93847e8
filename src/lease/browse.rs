//! What a browser call does beyond loading the page, and how the page's
//! answer reads as the lease's (headers, the egress's refusals).

use crate::error::{Error, Result};

/// How a browser call treats the page beyond loading it.
#[derive(Debug, Clone, Default)]
pub struct BrowseOptions {
    /// CSS selector to wait for.
    pub wait_for: Option<String>,
    /// Steps on the page before it is read.
    pub actions: Vec<crate::request::Action>,
    pub capture: crate::request::Capture,
}

/// The main document's response headers, as the browser reported them.
pub(super) fn page_headers(pairs: &[(String, String)]) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (k, v) in pairs {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v),
        ) {
            headers.append(k, v);
        }
    }
    headers
}

/// A navigation whose main document the egress refused (the page itself, or
/// where a redirect sent it) is the guard's refusal, not the site's answer:
/// the egress's `403` would otherwise read as a block, its failed tunnel as a
/// network error.
pub(super) fn refused_main_document(
    page: Result<crate::identity::browser::PageResult>,
    refusals: &[crate::wire::egress::Refusal],
) -> Result<crate::identity::browser::PageResult> {
    let refusal = |what: &str, r: &crate::wire::egress::Refusal| {
        Error::refused(format!("{what}; the browser's egress refused {r}")).retryable(false)
    };
    match page {
        Ok(page) => {
            let landed = url::Url::parse(&page.final_url)
                .ok()
                .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)));
            match refusals.iter().find(|r| Some(&r.target) == landed.as_ref()) {
                Some(r) => Err(refusal(
                    &format!("the browser was sent to {}", page.final_url),
                    r,
                )),
                None => Ok(page),
            }
        }
        Err(e) if e.net() == Some(crate::error::NetError::TunnelFailed) => match refusals.last() {
            Some(r) => Err(refusal(e.message(), r)),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::refused_main_document;
    use crate::error::{Error, ErrorKind, NetError};
    use crate::wire::egress::Refusal;

    #[test]
    fn a_tunnel_the_egress_refused_is_the_guards_refusal_by_its_kind_not_its_text() {
        let refusals = [Refusal {
            seq: 1,
            target: "127.0.0.9:443".into(),
            reason: "private address".into(),
        }];
        // The kind decides, whatever the message says.
        let tunnel =
            Error::new(ErrorKind::Network, "navigation failed").with_net(NetError::TunnelFailed);
        let e = refused_main_document(Err(tunnel), &refusals).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Refused, "{e}");
        assert!(e.message().contains("127.0.0.9:443"), "{e}");
        // A message naming the code without the kind is not a refusal.
        let text = Error::new(ErrorKind::Network, "net::ERR_TUNNEL_CONNECTION_FAILED");
        let e = refused_main_document(Err(text), &refusals).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Network);
        // No refusal on record: the network error stands.
        let tunnel = Error::new(ErrorKind::Network, "x").with_net(NetError::TunnelFailed);
        let e = refused_main_document(Err(tunnel), &[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Network);
    }
}
