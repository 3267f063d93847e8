//! The JSON formats: Cookie-Editor / EditThisCookie's array of cookies, and
//! Playwright's `storageState` (`{cookies, origins}`). Both are read entry
//! by entry, so an error names the entry (`cookies[3] (`sid`): …`).

use serde::Deserialize;
use serde_json::{Value, json};

use super::model::{OriginStorage, Session, check_cookie};
use crate::identity::jar::PortableCookie;

/// One cookie as either format writes it (Cookie-Editor's `expirationDate`
/// and `hostOnly`, Playwright's `expires`; unknown fields such as `storeId`
/// are ignored).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    name: String,
    value: String,
    domain: String,
    #[serde(default = "root")]
    path: String,
    #[serde(default)]
    expires: Option<f64>,
    #[serde(default)]
    expiration_date: Option<f64>,
    #[serde(default)]
    host_only: Option<bool>,
    #[serde(default)]
    session: Option<bool>,
    #[serde(default)]
    secure: bool,
    #[serde(default)]
    http_only: bool,
    #[serde(default)]
    same_site: Option<String>,
}

fn root() -> String {
    "/".into()
}

impl Entry {
    fn cookie(self) -> PortableCookie {
        let dotted = self.domain.starts_with('.');
        let expires = if self.session == Some(true) {
            None
        } else {
            self.expiration_date
                .or(self.expires)
                .filter(|e| *e > 0.0)
                .map(|e| e as i64)
        };
        PortableCookie {
            domain: self.domain.trim_start_matches('.').to_ascii_lowercase(),
            host_only: self.host_only.unwrap_or(!dotted),
            name: self.name,
            value: self.value,
            path: self.path,
            secure: self.secure,
            http_only: self.http_only,
            expires,
            same_site: match self
                .same_site
                .as_deref()
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("strict") => Some("Strict".into()),
                Some("lax") => Some("Lax".into()),
                Some("none" | "no_restriction") => Some("None".into()),
                _ => None,
            },
        }
    }
}

fn cookies_of(list: &[Value], label: &str) -> Result<Vec<PortableCookie>, String> {
    let mut out = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let at = match v.get("name").and_then(Value::as_str) {
            Some(name) => format!("{label}[{i}] (`{name}`)"),
            None => format!("{label}[{i}]"),
        };
        let c = Entry::deserialize(v)
            .map_err(|e| format!("{at}: {e}"))?
            .cookie();
        check_cookie(&c).map_err(|m| format!("{at}: {m}"))?;
        out.push(c);
    }
    Ok(out)
}

fn document(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

pub(super) fn parse_cookie_array(text: &str) -> Result<Session, String> {
    let doc = document(text)?;
    let Some(list) = doc.as_array() else {
        return Err("expected a JSON array of cookies".into());
    };
    Ok(Session {
        cookies: cookies_of(list, "cookie")?,
        origins: Vec::new(),
    })
}

pub(super) fn parse_storage_state(text: &str) -> Result<Session, String> {
    let doc = document(text)?;
    let Some(obj) = doc.as_object() else {
        return Err("expected a storageState object `{\"cookies\": […], \"origins\": […]}`".into());
    };
    let cookies = match obj.get("cookies") {
        Some(Value::Array(list)) => cookies_of(list, "cookies")?,
        Some(_) => return Err("`cookies` must be an array".into()),
        None => Vec::new(),
    };
    let mut origins = Vec::new();
    match obj.get("origins") {
        Some(Value::Array(list)) => {
            for (i, v) in list.iter().enumerate() {
                let o = OriginStorage::deserialize(v).map_err(|e| format!("origins[{i}]: {e}"))?;
                // An origin and nothing else: a scheme, a host and a port,
                // no user, path, query or fragment to carry anything along.
                let origin = url::Url::parse(&o.origin).ok().filter(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.username().is_empty()
                        && u.password().is_none()
                        && u.path() == "/"
                        && u.query().is_none()
                        && u.fragment().is_none()
                });
                let Some(origin) = origin else {
                    let shown: String = o.origin.chars().take(60).collect();
                    return Err(format!(
                        "origins[{i}]: `{}` is not an http(s) origin (scheme://host[:port] only)",
                        shown.escape_debug()
                    ));
                };
                origins.push(OriginStorage {
                    origin: origin.origin().ascii_serialization(),
                    local_storage: o.local_storage,
                });
            }
        }
        Some(_) => return Err("`origins` must be an array".into()),
        None => {}
    }
    if !obj.contains_key("cookies") && !obj.contains_key("origins") {
        return Err("a storageState has `cookies` and `origins`; this object has neither".into());
    }
    Ok(Session { cookies, origins })
}

fn dotted(c: &PortableCookie) -> String {
    if c.host_only {
        c.domain.clone()
    } else {
        format!(".{}", c.domain)
    }
}

pub(super) fn render_cookie_array(cookies: &[PortableCookie]) -> String {
    let list: Vec<Value> = cookies
        .iter()
        .map(|c| {
            let same_site = match c.same_site.as_deref() {
                Some("Strict") => json!("strict"),
                Some("Lax") => json!("lax"),
                Some("None") => json!("no_restriction"),
                _ => json!("unspecified"),
            };
            let mut v = json!({
                "domain": dotted(c), "hostOnly": c.host_only, "httpOnly": c.http_only,
                "name": c.name, "path": c.path, "sameSite": same_site, "secure": c.secure,
                "session": c.expires.is_none(), "storeId": null, "value": c.value,
            });
            if let Some(e) = c.expires {
                v["expirationDate"] = json!(e);
            }
            v
        })
        .collect();
    pretty(&Value::Array(list))
}

pub(super) fn render_storage_state(s: &Session) -> String {
    let cookies: Vec<Value> = s
        .cookies
        .iter()
        .map(|c| {
            let mut v = json!({
                "name": c.name, "value": c.value, "domain": dotted(c), "path": c.path,
                "expires": c.expires.unwrap_or(-1), "httpOnly": c.http_only, "secure": c.secure,
            });
            if let Some(ss) = &c.same_site {
                v["sameSite"] = json!(ss);
            }
            v
        })
        .collect();
    pretty(&json!({"cookies": cookies, "origins": s.origins}))
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_named_in_errors() {
        let e = parse_cookie_array(r#"[{"name":"a","value":"1","domain":"shop.test"},{"name":"sid","domain":"shop.test"}]"#)
            .unwrap_err();
        assert!(
            e.starts_with("cookie[1] (`sid`): missing field `value`"),
            "{e}"
        );
        let e = parse_storage_state(r#"{"cookies":[{"name":"x","value":1,"domain":"d.test"}]}"#)
            .unwrap_err();
        assert!(e.starts_with("cookies[0] (`x`): invalid type"), "{e}");
        let e = parse_storage_state(
            r#"{"cookies":[],"origins":[{"origin":"file:///etc","localStorage":[]}]}"#,
        )
        .unwrap_err();
        assert!(e.starts_with("origins[0]:"), "{e}");
        // An origin with more than an origin in it (what a hostile bundle or
        // session file might slip along) is refused, by its index.
        for bad in [
            "http://u:pw@shop.test",
            "https://shop.test/path",
            "https://shop.test/#frag",
            "https://shop.test/?q=1",
        ] {
            let text =
                format!(r#"{{"cookies":[],"origins":[{{"origin":"{bad}","localStorage":[]}}]}}"#);
            let e = parse_storage_state(&text).unwrap_err();
            assert!(
                e.starts_with("origins[0]:") && e.contains("origin"),
                "{bad}: {e}"
            );
        }
        let ok = parse_storage_state(
            r#"{"cookies":[],"origins":[{"origin":"HTTPS://Shop.Test:443/","localStorage":[]}]}"#,
        )
        .unwrap();
        assert_eq!(ok.origins[0].origin, "https://shop.test");
        let e = parse_storage_state(r#"{"cookies":[{"name":"a","val"#).unwrap_err();
        assert!(e.starts_with("not JSON"), "{e}");
        let e = parse_storage_state(r#"{"cookie":[]}"#).unwrap_err();
        assert!(e.contains("neither"), "{e}");
    }

    #[test]
    fn cookie_editor_fields() {
        let s = parse_cookie_array(
            r#"[{"domain":".shop.test","expirationDate":4102444800.5,"hostOnly":false,"httpOnly":true,
                 "name":"sid","path":"/","sameSite":"no_restriction","secure":true,"session":false,
                 "storeId":"0","value":"abc"},
                {"domain":"www.shop.test","hostOnly":true,"name":"h","path":"/","sameSite":"unspecified",
                 "session":true,"value":"1"}]"#,
        )
        .unwrap();
        let (a, b) = (&s.cookies[0], &s.cookies[1]);
        assert_eq!(
            (a.domain.as_str(), a.host_only, a.expires),
            ("shop.test", false, Some(4102444800))
        );
        assert_eq!(a.same_site.as_deref(), Some("None"));
        assert!(b.host_only && b.expires.is_none() && b.same_site.is_none());
    }
}
