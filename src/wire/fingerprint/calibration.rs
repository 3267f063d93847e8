//! What a slot's HTTP tier takes from its own browser, and what still differs.
//!
//! A [`Capture`] is one client's calibration run as the listener saw it: a
//! navigation and an XHR-style request, each with its ClientHello, HTTP/2
//! fingerprint, HEADERS priority and header list. [`Calibration::from_browser`]
//! turns the browser's capture into header sets per request kind;
//! [`compare`] lists every remaining difference between two captures by name.

use serde::{Deserialize, Serialize};

use super::tls::ClientHello;

/// Headers the client library sets itself, never copied.
const OWN: [&str; 2] = ["host", "connection"];

/// Headers whose value belongs to one request (the jar's cookie, the page an
/// XHR comes from, its body): their place is kept, their value is not.
pub const PER_REQUEST: [&str; 6] = [
    "cookie",
    "content-length",
    "content-type",
    "origin",
    "referer",
    "x-requested-with",
];

/// One request as the calibration listener saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// The ClientHello of the connection that carried it.
    pub hello: Option<ClientHello>,
    /// `h2` or `http/1.1`.
    pub protocol: String,
    pub akamai: Option<String>,
    /// HEADERS priority `weight:exclusive:depends_on`.
    pub priority: Option<String>,
    /// Names and values in order, pseudo-headers included.
    pub headers: Vec<(String, String)>,
}

/// One client's calibration run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    /// A top-level navigation typed into the browser (tier 2 repeats it).
    pub navigation: Observed,
    /// A same-origin `fetch` POST with a form body (tier 1 repeats it).
    pub xhr: Observed,
    /// Both again over HTTP/1.1 (`None` in records made before it was
    /// captured, and inside this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h1: Option<Box<Capture>>,
    /// Both again on an origin that asked for every client hint with
    /// `Accept-CH` (`None` in records made before it was captured, and
    /// inside this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Box<Capture>>,
}

/// The client hints the calibration asks for: every one Chromium knows. It
/// sends those it has; the HTTP tier replays each as captured, to an origin
/// that asked for it.
pub const ASK_ALL: &str = "Sec-CH-UA-Arch, Sec-CH-UA-Bitness, Sec-CH-UA-Full-Version, \
Sec-CH-UA-Full-Version-List, Sec-CH-UA-Model, Sec-CH-UA-Platform-Version, Sec-CH-UA-WoW64, \
Sec-CH-UA-Form-Factors, Sec-CH-Prefers-Color-Scheme, Sec-CH-Prefers-Reduced-Motion, \
Sec-CH-Prefers-Reduced-Transparency, Sec-CH-Device-Memory, Sec-CH-DPR, Sec-CH-Viewport-Width, \
Sec-CH-Viewport-Height, Device-Memory, DPR, Viewport-Width, RTT, Downlink, ECT";

/// One kind of request as the HTTP tier should send it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestProfile {
    /// In the browser's order, pseudo-headers left out. [`PER_REQUEST`]
    /// headers keep their place with an empty value; `cookie` takes Chromium's
    /// place (before `priority`) when the capture had none.
    pub headers: Vec<(String, String)>,
    /// HEADERS priority: weight 1–256, exclusive, parent stream.
    pub priority: Option<(u16, bool, u32)>,
}

/// A navigation profile (tier 2).
pub type NavigationProfile = RequestProfile;

/// Chromium's own `accept` for a fetch/XHR whose script sets none (the Fetch
/// standard's default). The calibration XHR sets one, as shops' AJAX calls
/// do, to learn where Chromium puts it.
pub const XHR_DEFAULT_ACCEPT: &str = "*/*";

impl RequestProfile {
    /// From a captured header list and `weight:exclusive:depends_on` priority;
    /// `None` when the list holds no user agent (not a browser request).
    pub fn from_capture(headers: &[(String, String)], priority: Option<&str>) -> Option<Self> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in headers {
            let k = k.to_ascii_lowercase();
            if k.starts_with(':') || OWN.contains(&k.as_str()) {
                continue;
            }
            let v = if PER_REQUEST.contains(&k.as_str()) {
                String::new()
            } else {
                v.clone()
            };
            out.push((k, v));
        }
        if !out.iter().any(|(k, _)| k == "user-agent") {
            return None;
        }
        if !out.iter().any(|(k, _)| k == "cookie") {
            // A capture without cookies (a fresh host): Chromium sends the
            // cookie right before `priority`, the last header.
            let at = out
                .iter()
                .position(|(k, _)| k == "priority")
                .unwrap_or(out.len());
            out.insert(at, ("cookie".into(), String::new()));
        }
        Some(RequestProfile {
            headers: out,
            priority: priority.and_then(parse_priority),
        })
    }

    /// The value a header takes by default (`None` for per-request headers
    /// and headers the profile lacks).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

fn parse_priority(p: &str) -> Option<(u16, bool, u32)> {
    let mut it = p.split(':');
    let weight = it.next()?.parse().ok()?;
    let exclusive = it.next()? == "1";
    let dep = it.next()?.parse().ok()?;
    Some((weight, exclusive, dep))
}

/// What the HTTP tier copies from its browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    /// Tier 2: a navigation.
    pub navigation: RequestProfile,
    /// Tier 1: a same-origin fetch/XHR.
    pub xhr: Option<RequestProfile>,
    /// The browser's ClientHello, for the TLS options wreq exposes.
    pub hello: Option<ClientHello>,
    /// Over HTTP/1.1: the header names as Chromium writes them (case and
    /// order, `Host` and `Connection` included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h1: Option<H1Names>,
    /// On an origin that asked for client hints (`Accept-CH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Asked>,
}

/// What the HTTP tier sends to an origin that asked for client hints:
/// Chromium's header lists there (their order is not the unasked one), and
/// which names are the hints, each sent only where it was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    pub navigation: RequestProfile,
    pub xhr: Option<RequestProfile>,
    /// Lower case: the names the asked navigation or XHR carries and the
    /// unasked one does not.
    pub hints: Vec<String>,
}

impl Asked {
    fn from_capture(
        asked: &Capture,
        navigation: &RequestProfile,
        xhr: Option<&RequestProfile>,
    ) -> Option<Self> {
        let nav = RequestProfile::from_capture(
            &asked.navigation.headers,
            asked.navigation.priority.as_deref(),
        )?;
        let ax = RequestProfile::from_capture(&asked.xhr.headers, asked.xhr.priority.as_deref())
            .map(xhr_default_accept);
        let mut hints: Vec<String> = Vec::new();
        let added = |p: &RequestProfile, base: Option<&RequestProfile>, hints: &mut Vec<String>| {
            for (k, _) in &p.headers {
                let known = base.is_some_and(|b| b.headers.iter().any(|(bk, _)| bk == k));
                if !known && !hints.contains(k) {
                    hints.push(k.clone());
                }
            }
        };
        added(&nav, Some(navigation), &mut hints);
        if let Some(ax) = &ax {
            added(ax, xhr, &mut hints);
        }
        Some(Asked {
            navigation: nav,
            xhr: ax,
            hints,
        })
    }
}

/// The place is the browser's; the value is the browser's own default
/// unless the request (the strategy) sets one.
fn xhr_default_accept(mut p: RequestProfile) -> RequestProfile {
    for (k, v) in &mut p.headers {
        if k == "accept" {
            *v = XHR_DEFAULT_ACCEPT.to_string();
        }
    }
    p
}

/// Chromium's HTTP/1.1 header names, as sent, per request kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct H1Names {
    pub navigation: Vec<String>,
    pub xhr: Vec<String>,
}

impl H1Names {
    fn from_capture(c: &Capture) -> Self {
        let names = |o: &Observed| o.headers.iter().map(|(k, _)| k.clone()).collect();
        H1Names {
            navigation: names(&c.navigation),
            xhr: names(&c.xhr),
        }
    }
}

/// One order for both protocols: `h1`'s names (its case, its order), with
/// each name only `h2` has (`priority`, a cookie the sample lacked) put
/// after the name it follows in `h2`. Over HTTP/2 the HTTP/1.1-only names
/// fall away (`Host` becomes `:authority`, `Connection` is dropped), which
/// leaves `h2`'s order. `None` when the names both send are in another
/// order in each: no one list can be both.
pub fn merge_order(h1: &[String], h2: &[String]) -> Option<Vec<String>> {
    let common_h1: Vec<String> = h1
        .iter()
        .map(|n| n.to_ascii_lowercase())
        .filter(|n| h2.iter().any(|m| m.eq_ignore_ascii_case(n)))
        .collect();
    let common_h2: Vec<String> = h2
        .iter()
        .map(|n| n.to_ascii_lowercase())
        .filter(|n| h1.iter().any(|m| m.eq_ignore_ascii_case(n)))
        .collect();
    if common_h1 != common_h2 {
        return None;
    }
    let mut out: Vec<String> = h1.to_vec();
    let find = |out: &[String], n: &str| out.iter().position(|m| m.eq_ignore_ascii_case(n));
    for (i, name) in h2.iter().enumerate() {
        if find(&out, name).is_some() {
            continue;
        }
        let at = match i {
            0 => out
                .iter()
                .position(|m| !OWN.contains(&m.to_ascii_lowercase().as_str()))
                .unwrap_or(out.len()),
            _ => find(&out, &h2[i - 1]).map_or(out.len(), |p| p + 1),
        };
        out.insert(at, name.clone());
    }
    Some(out)
}

impl Calibration {
    /// From the browser's own capture; `None` when its navigation carried no
    /// user agent.
    pub fn from_browser(capture: &Capture) -> Option<Self> {
        let nav = &capture.navigation;
        let navigation = RequestProfile::from_capture(&nav.headers, nav.priority.as_deref())?;
        let xhr =
            RequestProfile::from_capture(&capture.xhr.headers, capture.xhr.priority.as_deref())
                .map(xhr_default_accept);
        let asked = capture
            .asked
            .as_deref()
            .and_then(|a| Asked::from_capture(a, &navigation, xhr.as_ref()));
        Some(Calibration {
            navigation,
            xhr,
            hello: nav.hello.clone(),
            h1: capture.h1.as_deref().map(H1Names::from_capture),
            asked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_order_serves_both_protocols() {
        let h1 = names(&[
            "Host",
            "Connection",
            "sec-ch-ua",
            "User-Agent",
            "Accept",
            "Accept-Encoding",
            "Accept-Language",
        ]);
        let h2 = names(&[
            "sec-ch-ua",
            "user-agent",
            "accept",
            "accept-encoding",
            "accept-language",
            "cookie",
            "priority",
        ]);
        assert_eq!(
            merge_order(&h1, &h2).unwrap(),
            names(&[
                "Host",
                "Connection",
                "sec-ch-ua",
                "User-Agent",
                "Accept",
                "Accept-Encoding",
                "Accept-Language",
                "cookie",
                "priority"
            ])
        );
        let h2_first = names(&["x-first", "sec-ch-ua"]);
        assert_eq!(
            merge_order(&names(&["Host", "Connection", "sec-ch-ua"]), &h2_first).unwrap(),
            names(&["Host", "Connection", "x-first", "sec-ch-ua"])
        );
        let crossed = names(&["accept", "user-agent"]);
        assert_eq!(
            merge_order(&names(&["User-Agent", "Accept"]), &crossed),
            None
        );
    }

    fn h(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn pseudo_and_own_headers_are_left_out_and_the_cookie_keeps_its_place() {
        let nav = RequestProfile::from_capture(
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
        assert!(RequestProfile::from_capture(&[h("accept", "x")], None).is_none());
        // Without a cookie in the capture, it goes before `priority`.
        let nav = RequestProfile::from_capture(
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

    #[test]
    fn per_request_headers_keep_their_place_but_not_their_value() {
        let xhr = RequestProfile::from_capture(
            &[
                h(":method", "POST"),
                h("content-length", "12"),
                h("user-agent", "UA"),
                h("content-type", "application/x-www-form-urlencoded"),
                h("origin", "https://a.test"),
                h("referer", "https://a.test/p"),
                h("accept", "*/*"),
            ],
            None,
        )
        .unwrap();
        let names: Vec<&str> = xhr.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "content-length",
                "user-agent",
                "content-type",
                "origin",
                "referer",
                "accept",
                "cookie"
            ]
        );
        assert_eq!(xhr.value("origin"), None);
        assert_eq!(xhr.value("accept"), Some("*/*"));
    }
}
