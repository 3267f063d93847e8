//! Click-tracking redirects a results page wraps its links in, and the URL
//! each leads to: DuckDuckGo's `//duckduckgo.com/l/?uddg=<URL>&rut=…`,
//! Bing's `/ck/a?!&&p=…&u=a1<base64url of the URL>&ntb=1` and Google's
//! `/url?q=<URL>`. A field with `unwrap_redirect = true` reads the target.

use base64::Engine;

/// What a link reads as under `unwrap_redirect`: its target when it is a
/// known redirect to an http(s) URL, itself when it is no redirect, and
/// nothing when it is a redirect to anything else (a `javascript:` or a
/// relative target: the wrapper itself is no result to follow).
pub fn unwrap(u: url::Url) -> Option<url::Url> {
    match unwrapped(&u) {
        None => Some(u),
        Some(t) => t,
    }
}

/// `None`: `u` is no known redirect; `Some(None)`: it is one, to no
/// absolute http(s) URL.
fn unwrapped(u: &url::Url) -> Option<Option<url::Url>> {
    let host = u.host_str()?.to_ascii_lowercase();
    let on = |site: &str| host == site || host.ends_with(&format!(".{site}"));
    let param = |name: &str| {
        u.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let raw = if on("duckduckgo.com") && u.path().starts_with("/l/") {
        param("uddg")
    } else if on("bing.com") && u.path() == "/ck/a" {
        param("u").and_then(|v| {
            let b64 = v.strip_prefix("a1")?;
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(b64.trim_end_matches('='))
                .ok()?;
            String::from_utf8(bytes).ok()
        })
    } else if u.path() == "/url" && (on("google.com") || host.starts_with("www.google.")) {
        param("q").or_else(|| param("url"))
    } else {
        return None;
    };
    Some(
        raw.and_then(|raw| url::Url::parse(&raw).ok())
            .filter(|t| matches!(t.scheme(), "http" | "https")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Option<String> {
        unwrapped(&url::Url::parse(s).expect("url"))
            .flatten()
            .map(|u| u.to_string())
    }

    #[test]
    fn each_engines_redirect_gives_its_target() {
        assert_eq!(
            t(
                "https://duckduckgo.com/l/?uddg=https%3A%2F%2Fdocs.example.org%2Fa%2Db%3Fx%3D1&rut=ab12"
            ),
            Some("https://docs.example.org/a-b?x=1".into())
        );
        // The target's own escapes are kept (decoded once only).
        assert_eq!(
            t("https://duckduckgo.com/l/?uddg=https%3A%2F%2Fex.org%2Fa%253Ab&rut=0"),
            Some("https://ex.org/a%3Ab".into())
        );
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("https://ex.org/p?q=1");
        assert_eq!(
            t(&format!(
                "https://www.bing.com/ck/a?!&&p=abc&u=a1{b64}&ntb=1"
            )),
            Some("https://ex.org/p?q=1".into())
        );
        assert_eq!(
            t("https://www.google.com/url?q=https://ex.org/&sa=U"),
            Some("https://ex.org/".into())
        );
    }

    #[test]
    fn anything_else_is_not_a_redirect() {
        assert_eq!(t("https://ex.org/l/?uddg=https%3A%2F%2Fevil.test%2F"), None);
        // A relative target (Bing's own video pages) or another scheme.
        let rel = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("/videos/x");
        assert_eq!(t(&format!("https://www.bing.com/ck/a?u=a1{rel}")), None);
        assert_eq!(
            t("https://duckduckgo.com/l/?uddg=javascript%3Aalert(1)"),
            None
        );
        // Read as a field, such a wrapper is no link at all (it was
        // fetched as the wrapper's URL); a plain link stays itself.
        let u = |s: &str| url::Url::parse(s).expect("url");
        assert_eq!(
            unwrap(u("https://duckduckgo.com/l/?uddg=javascript%3Aalert(1)")),
            None
        );
        assert_eq!(
            unwrap(u(&format!("https://www.bing.com/ck/a?u=a1{rel}"))),
            None
        );
        assert_eq!(
            unwrap(u("https://ex.org/l/?uddg=x")).map(|x| x.to_string()),
            Some("https://ex.org/l/?uddg=x".into())
        );
    }
}
