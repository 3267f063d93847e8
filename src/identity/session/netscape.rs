//! Netscape `cookies.txt`: `domain  include-subdomains  path  secure
//! expires  name  value`, tab-separated, one cookie a line; `#` starts a
//! comment except for the `#HttpOnly_` prefix curl and browsers write.

use super::model::{Session, check_cookie};
use crate::identity::jar::PortableCookie;

const HTTP_ONLY: &str = "#HttpOnly_";

pub(super) fn parse(text: &str) -> Result<Session, String> {
    let mut cookies = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end_matches('\r');
        let (line, http_only) = match line.strip_prefix(HTTP_ONLY) {
            Some(rest) => (rest, true),
            None => (line, false),
        };
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.splitn(7, '\t').collect();
        if fields.len() != 7 {
            return Err(format!(
                "line {n}: expected 7 tab-separated fields (domain, include-subdomains, path, secure, expires, name, value), found {}",
                fields.len()
            ));
        }
        let flag = |what: &str, v: &str| match v.to_ascii_uppercase().as_str() {
            "TRUE" => Ok(true),
            "FALSE" => Ok(false),
            _ => Err(format!("line {n}: {what} must be TRUE or FALSE, not `{v}`")),
        };
        let subdomains = flag("include-subdomains (field 2)", fields[1])?;
        let secure = flag("secure (field 4)", fields[3])?;
        let expires: i64 = fields[4].trim().parse().map_err(|_| {
            format!(
                "line {n}: expires (field 5) must be a unix time, not `{}`",
                fields[4]
            )
        })?;
        let c = PortableCookie {
            name: fields[5].to_string(),
            value: fields[6].to_string(),
            domain: fields[0].trim_start_matches('.').to_ascii_lowercase(),
            host_only: !subdomains,
            path: fields[2].to_string(),
            secure,
            http_only,
            expires: (expires > 0).then_some(expires),
            same_site: None,
        };
        check_cookie(&c).map_err(|m| format!("line {n}: {m}"))?;
        cookies.push(c);
    }
    Ok(Session {
        cookies,
        origins: Vec::new(),
    })
}

pub(super) fn render(cookies: &[PortableCookie]) -> String {
    let mut out = String::from(
        "# Netscape HTTP Cookie File\n# Exported by idpool. Keep it private: it signs in as this identity.\n",
    );
    let tf = |b: bool| if b { "TRUE" } else { "FALSE" };
    for c in cookies {
        let prefix = if c.http_only { HTTP_ONLY } else { "" };
        let dot = if c.host_only { "" } else { "." };
        out.push_str(&format!(
            "{prefix}{dot}{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            c.domain,
            tf(!c.host_only),
            c.path,
            tf(c.secure),
            c.expires.unwrap_or(0),
            c.name,
            c.value
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_line_is_named() {
        let text = "# Netscape HTTP Cookie File\n.shop.test\tTRUE\t/\tTRUE\t0\tsid\tabc\nshop.test TRUE / TRUE 0 x y\n";
        let e = parse(text).unwrap_err();
        assert!(
            e.starts_with("line 3: expected 7 tab-separated fields"),
            "{e}"
        );
        let e = parse("shop.test\tyes\t/\tTRUE\t0\tsid\tabc\n").unwrap_err();
        assert!(e.contains("line 1: include-subdomains"), "{e}");
        let e = parse("shop.test\tTRUE\t/\tTRUE\tsoon\tsid\tabc\n").unwrap_err();
        assert!(e.contains("line 1: expires"), "{e}");
    }

    #[test]
    fn http_only_prefix_and_subdomain_flag() {
        let s = parse("#HttpOnly_.shop.test\tTRUE\t/a\tFALSE\t0\tsid\tx\ty\n").unwrap();
        let c = &s.cookies[0];
        assert!(c.http_only && !c.host_only && !c.secure);
        assert_eq!((c.domain.as_str(), c.path.as_str()), ("shop.test", "/a"));
        assert_eq!(c.value, "x\ty", "a value may hold a tab");
        assert_eq!(c.expires, None);
    }
}
