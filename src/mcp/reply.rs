//! One JSON answer where no stream is needed. rmcp answers every request of a
//! Streamable HTTP session with an SSE stream; a request without a
//! `progressToken` gets nothing on that stream but its response, so the guard
//! turns such a stream into a plain `application/json` reply (the spec lets
//! the server choose). If anything else comes first (a notification), the
//! stream is passed on as it came, nothing lost.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// The answer part of a JSON-RPC message: a response or error has an id and
/// no method.
#[derive(Deserialize)]
struct Answer {
    id: Option<IgnoredAny>,
    method: Option<IgnoredAny>,
}

/// Whether `data` is a JSON-RPC response or error. rmcp writes `jsonrpc`,
/// then `id`, then `result` or `error`: that prefix settles it without
/// reading the (escaped, often large) result. Anything else is parsed.
fn is_answer(data: &[u8]) -> bool {
    if let Some(rest) = data.strip_prefix(br#"{"jsonrpc":"2.0","id":"#) {
        let after_id = match rest.first() {
            Some(b'"') => rest[1..]
                .iter()
                .position(|b| *b == b'"' || *b == b'\\')
                .filter(|&i| rest[1 + i] == b'"')
                .map(|i| &rest[i + 2..]),
            Some(_) => rest
                .iter()
                .position(|b| !(b.is_ascii_digit() || *b == b'-'))
                .map(|i| &rest[i..]),
            None => None,
        };
        if let Some(after) = after_id
            && (after.starts_with(br#","result":"#) || after.starts_with(br#","error":"#))
        {
            return true;
        }
    }
    serde_json::from_slice::<Answer>(data).is_ok_and(|a| a.id.is_some() && a.method.is_none())
}

/// The end of the first complete event in `buf` (after its blank line).
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = memchr::memmem::find(buf, b"\n\n").map(|i| i + 2);
    let crlf = memchr::memmem::find(buf, b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The data of one event (its `data:` lines joined by newlines); a slice of
/// `event` when there is one line, as rmcp writes it.
fn event_data(event: &Bytes) -> Bytes {
    let mut lines = Vec::new();
    let mut start = 0;
    for i in memchr::memchr_iter(b'\n', event) {
        {
            let mut line = start..i;
            if line.end > line.start && event[line.end - 1] == b'\r' {
                line.end -= 1;
            }
            if event[line.clone()].starts_with(b"data:") {
                line.start += 5;
                if event.get(line.start) == Some(&b' ') {
                    line.start += 1;
                }
                lines.push(line);
            }
            start = i + 1;
        }
    }
    match lines.as_slice() {
        [] => Bytes::new(),
        [one] => event.slice(one.clone()),
        many => {
            let mut out = BytesMut::new();
            for (n, l) in many.iter().enumerate() {
                if n > 0 {
                    out.extend_from_slice(b"\n");
                }
                out.extend_from_slice(&event[l.clone()]);
            }
            out.freeze()
        }
    }
}

/// Turn rmcp's SSE answer into one JSON body when its first message is the
/// answer; otherwise pass the stream on unchanged.
pub(crate) async fn to_json(response: Response) -> Response {
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if response.status() != StatusCode::OK || !is_sse {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    // What has come so far; rmcp sends each event as one chunk, which is then
    // sliced, never copied.
    let mut pending = Bytes::new();
    let mut seen: Vec<Bytes> = Vec::new();
    loop {
        while let Some(end) = event_end(&pending) {
            let event = pending.split_to(end);
            let data = event_data(&event);
            seen.push(event);
            if data.is_empty() {
                // A priming event, a comment or a keep-alive.
                continue;
            }
            if is_answer(&data) {
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                parts.headers.remove(header::CACHE_CONTROL);
                parts.headers.remove("x-accel-buffering");
                parts.headers.remove(header::CONTENT_LENGTH);
                return Response::from_parts(parts, Body::from(data));
            }
            // Something the client must see before its answer: stream it all.
            seen.push(pending);
            let head = futures_util::stream::iter(seen.into_iter().map(Ok::<_, axum::Error>));
            return Response::from_parts(parts, Body::from_stream(head.chain(stream)));
        }
        match stream.next().await {
            Some(Ok(chunk)) if pending.is_empty() => pending = chunk,
            Some(Ok(chunk)) => {
                let mut joined = BytesMut::with_capacity(pending.len() + chunk.len());
                joined.extend_from_slice(&pending);
                joined.extend_from_slice(&chunk);
                pending = joined.freeze();
            }
            // The stream ended (or failed) without an answer: hand on what came.
            Some(Err(_)) | None => {
                seen.push(pending);
                let all = futures_util::stream::iter(seen.into_iter().map(Ok::<_, axum::Error>));
                return Response::from_parts(parts, Body::from_stream(all));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(events: &'static [u8]) -> Response {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from(events))
            .unwrap()
    }

    async fn body_of(r: Response) -> (String, String) {
        let ct = r.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_string();
        let b = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (ct, String::from_utf8(b.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_lone_answer_becomes_json() {
        let r = to_json(sse(b"id: 0\nretry: 3000\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1\n\n")).await;
        assert_eq!(
            body_of(r).await,
            (
                "application/json".into(),
                r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.into()
            )
        );
    }

    #[tokio::test]
    async fn a_notification_first_keeps_the_stream() {
        let events = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        let (ct, text) = body_of(to_json(sse(events)).await).await;
        assert_eq!(ct, "text/event-stream");
        assert_eq!(text.as_bytes(), events);
    }

    #[test]
    fn answers_are_told_from_requests_and_notifications() {
        assert!(is_answer(
            br#"{"jsonrpc":"2.0","id":12,"result":{"a":"\"id\""}}"#
        ));
        assert!(is_answer(
            br#"{"jsonrpc":"2.0","id":"x-1","error":{"code":1}}"#
        ));
        assert!(is_answer(br#"{"result":{},"jsonrpc":"2.0","id":3}"#));
        assert!(!is_answer(
            br#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage"}"#
        ));
        assert!(!is_answer(
            br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#
        ));
    }
}
