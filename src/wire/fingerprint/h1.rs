//! HTTP/1.1 request heads, headers in the order and case they were sent.

/// One request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// The head's lines exactly as sent, request line first, without their
    /// `\r\n`.
    pub lines: Vec<String>,
}

/// Every complete request head in `bytes` (bodies skipped by Content-Length;
/// parsing stops at anything it does not understand).
pub fn parse(bytes: &[u8]) -> Vec<Head> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(end) = find(rest, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&rest[..end]);
        let raw: Vec<String> = head.split("\r\n").map(str::to_string).collect();
        let mut lines = head.split("\r\n");
        let Some((method, target)) = lines.next().and_then(|l| {
            let mut p = l.split(' ');
            Some((p.next()?.to_string(), p.next()?.to_string()))
        }) else {
            break;
        };
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let body = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        out.push(Head {
            method,
            target,
            headers,
            lines: raw,
        });
        let next = end + 4 + body;
        if next > rest.len() {
            break;
        }
        rest = &rest[next..];
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_in_order_with_bodies_skipped() {
        let raw = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-B: 1\r\n\r\nabcGET /b?q=1 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
        let heads = parse(raw);
        assert_eq!(heads.len(), 2);
        assert_eq!(heads[0].method, "POST");
        assert_eq!(
            heads[0]
                .headers
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>(),
            ["Host", "Content-Length", "X-B"]
        );
        assert_eq!(heads[1].target, "/b?q=1");
        assert_eq!(heads[1].headers[1], ("Accept".into(), "*/*".into()));
        assert_eq!(
            heads[1].lines,
            ["GET /b?q=1 HTTP/1.1", "Host: x", "Accept: */*"]
        );
    }
}
