//! What a slot's HTTP tier takes from its own browser: the navigation header
//! list (names, values, order, with the cookie in the browser's place) and the
//! HTTP/2 HEADERS priority, captured from one real navigation.

use serde::{Deserialize, Serialize};

/// Headers the client library sets itself, never copied.
const OWN: [&str; 3] = ["host", "content-length", "connection"];

/// A browser navigation, as the HTTP tier should repeat it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NavigationProfile {
    /// In the browser's order, pseudo-headers left out; `cookie` keeps its
    /// place with an empty value (the slot's jar fills it per request), or
    /// takes Chromium's (before `priority`) when the capture had none.
    pub headers: Vec<(String, String)>,
    /// HEADERS priority: weight 1–256, exclusive, parent stream.
    pub priority: Option<(u16, bool, u32)>,
}

impl NavigationProfile {
    /// From a captured header list and `weight:exclusive:depends_on` priority;
    /// `None` when the list holds no user agent (not a browser navigation).
    pub fn from_capture(headers: &[(String, String)], priority: Option<&str>) -> Option<Self> {
        let headers: Vec<(String, String)> = headers
            .iter()
            .filter(|(k, _)| !k.starts_with(':') && !OWN.contains(&k.to_ascii_lowercase().as_str()))
            .map(|(k, v)| {
                let k = k.to_ascii_lowercase();
                let v = if k == "cookie" {
                    String::new()
                } else {
                    v.clone()
                };
                (k, v)
            })
            .collect();
        if !headers.iter().any(|(k, _)| k == "user-agent") {
            return None;
        }
        let mut headers = headers;
        if !headers.iter().any(|(k, _)| k == "cookie") {
            // A capture without cookies (a fresh host): Chromium sends the
            // cookie right before `priority`, the last header of a navigation.
            let at = headers
                .iter()
                .position(|(k, _)| k == "priority")
                .unwrap_or(headers.len());
            headers.insert(at, ("cookie".into(), String::new()));
        }
        let priority = priority.and_then(|p| {
            let mut it = p.split(':');
            let weight = it.next()?.parse().ok()?;
            let exclusive = it.next()? == "1";
            let dep = it.next()?.parse().ok()?;
            Some((weight, exclusive, dep))
        });
        Some(NavigationProfile { headers, priority })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_and_own_headers_are_left_out_and_the_cookie_keeps_its_place() {
        let h = |k: &str, v: &str| (k.to_string(), v.to_string());
        let nav = NavigationProfile::from_capture(
            &[
                h(":method", "GET"),
                h(":path", "/x"),
                h("user-agent", "UA"),
                h("accept", "text/html"),
                h("cookie", "a=b"),
                h("priority", "u=0, i"),
            ],
            Some("256:1:0"),
        )
        .unwrap();
        assert_eq!(
            nav.headers,
            [
                h("user-agent", "UA"),
                h("accept", "text/html"),
                h("cookie", ""),
                h("priority", "u=0, i")
            ]
        );
        assert_eq!(nav.priority, Some((256, true, 0)));
        assert!(NavigationProfile::from_capture(&[h("accept", "x")], None).is_none());
        // Without a cookie in the capture, it goes before `priority`.
        let nav = NavigationProfile::from_capture(
            &[
                h("user-agent", "UA"),
                h("accept", "*/*"),
                h("priority", "u=0, i"),
            ],
            None,
        )
        .unwrap();
        assert_eq!(nav.headers[2], h("cookie", ""));
    }
}
