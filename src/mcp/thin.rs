//! The thin path: a single `tools/call`, `tools/list` or `ping` POSTed to
//! `/mcp` that wants one JSON answer is answered here, straight from the HTTP
//! request to the dispatcher and back, in the request's own task: no session
//! task, no channel, no SSE framing taken apart again, and a tool's result
//! serialized once (the text copy is those bytes escaped).
//!
//! rmcp stays the reference and keeps everything else: `initialize`,
//! notifications, progress, cancellation, batches, GET streams, DELETE, and
//! any message this module does not recognise as one rmcp would take as it
//! is. A request is answered here only when rmcp would accept it (a live
//! 2025-era session of this key, or a well-formed 2026-07-28 stateless
//! request with its headers), and the answer is the JSON rmcp would send:
//! whatever is not the hot result is built with rmcp's own types and its own
//! per-version rules, and a unit test holds the hot result to rmcp's bytes.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use rmcp::model::{
    ClientCapabilities, EmptyResult, ErrorData, ListToolsResult, RequestId, ServerJsonRpcMessage,
    ServerResult, Tool,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::dispatch::{CallContext, Core};
use super::end::CallEnd;

const V_2026: &str = "2026-07-28";
/// The 2025-era versions a session may name in `MCP-Protocol-Version`.
const SESSION_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A POSTed message, read once: what the guard needs of any message, and
/// what the thin path needs to answer one itself.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Message {
    jsonrpc: Option<String>,
    id: Option<RequestId>,
    method: Option<String>,
    params: Option<Map<String, Value>>,
}

/// How the request reached us: within a 2025-era session, or as a
/// 2026-07-28 stateless request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Session,
    Stateless,
}

/// What a thin request asks for.
#[derive(Debug, PartialEq)]
enum Work {
    Call { name: String, args: Value },
    List,
    Ping,
}

/// A request the thin path answers.
#[derive(Debug)]
pub(crate) struct Thin {
    id: RequestId,
    lane: Lane,
    work: Work,
}

impl Message {
    /// An `initialize` request: a new session, when it has no session id.
    pub(crate) fn is_initialize(&self) -> bool {
        self.id.is_some() && self.method.as_deref() == Some("initialize")
    }

    fn meta(&self) -> Option<&Map<String, Value>> {
        self.params.as_ref()?.get("_meta")?.as_object()
    }

    /// A single request whose caller asked for no progress: one answer, no stream.
    pub(crate) fn wants_json(&self) -> bool {
        self.id.is_some()
            && self.method.is_some()
            && self
                .meta()
                .is_none_or(|m| m.get("progressToken").is_none_or(Value::is_null))
    }

    /// The thin request this message is, when rmcp would take it as it is
    /// (`has_session`: it names a session the guard found bound to its key);
    /// `None` sends it on to rmcp.
    pub(crate) fn into_thin(self, headers: &HeaderMap, has_session: bool) -> Option<Thin> {
        if self.jsonrpc.as_deref() != Some("2.0") || !json_in_both_out(headers) {
            return None;
        }
        let id = self.id?;
        let method = self.method?;
        let mut params = self.params.unwrap_or_default();
        let meta = match params.remove("_meta") {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return None,
        };
        if meta.get("progressToken").is_some_and(|v| !v.is_null()) {
            return None;
        }
        let work = match method.as_str() {
            "tools/call" => {
                let Some(Value::String(name)) = params.remove("name") else {
                    return None;
                };
                let args = match params.remove("arguments") {
                    None | Some(Value::Null) => Value::Null,
                    Some(v @ Value::Object(_)) => v,
                    Some(_) => return None,
                };
                Work::Call { name, args }
            }
            // A cursor (and anything else) is rmcp's.
            "tools/list" => Work::List,
            "ping" => Work::Ping,
            _ => return None,
        };
        if !params.is_empty() {
            return None;
        }
        let version = one_header(headers, "mcp-protocol-version")?;
        let lane = if has_session {
            // A 2025-era session: no per-request version in `_meta`, and a
            // version header (when sent) that names a 2025 revision.
            let ok = version.is_none_or(|v| SESSION_VERSIONS.contains(&v))
                && !meta.contains_key(META_VERSION);
            ok.then_some(Lane::Session)?
        } else {
            // 2026-07-28 stateless: the version in the header and in `_meta`,
            // the client's capabilities, and the standard headers that name
            // the method (and the tool) as the body does.
            let capabilities = meta
                .get(META_CAPABILITIES)
                .filter(|c| c.is_object())
                .is_some_and(|c| ClientCapabilities::deserialize(c).is_ok());
            let named = match &work {
                Work::Call { name, .. } => {
                    one_header(headers, "mcp-name")? == Some(name.as_str())
                        && !name.starts_with("=?")
                }
                _ => headers.get("mcp-name").is_none(),
            };
            let ok = version == Some(V_2026)
                && meta.get(META_VERSION).and_then(Value::as_str) == Some(V_2026)
                && capabilities
                && one_header(headers, "mcp-method")? == Some(method.as_str())
                && named;
            ok.then_some(Lane::Stateless)?
        };
        Some(Thin { id, lane, work })
    }
}

/// The one value of header `name` (`Some(None)` when absent); `None` when it
/// is sent twice or is not text.
fn one_header<'a>(headers: &'a HeaderMap, name: &str) -> Option<Option<&'a str>> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Some(None);
    };
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok().map(Some)
}

/// `Content-Type: application/json`, and an `Accept` that names both JSON
/// and SSE with no parameters (anything fancier is rmcp's to judge).
fn json_in_both_out(headers: &HeaderMap) -> bool {
    let json_in = one_header(headers, header::CONTENT_TYPE.as_str())
        .flatten()
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
        });
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',') {
            let entry = entry.trim();
            if entry.contains(['"', ';']) {
                return false;
            }
            json |= entry.eq_ignore_ascii_case("application/json");
            sse |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json_in && json && sse
}

/// Answer a thin request: run it through the dispatcher and write the
/// JSON-RPC answer. A client that goes away drops this future; the
/// dispatcher still writes the call's audit line.
pub(crate) async fn answer(core: &Core, ctx: CallContext, thin: Thin) -> Response {
    let Thin { id, lane, work } = thin;
    let method = match &work {
        Work::Call { .. } => "tools/call",
        Work::List => "tools/list",
        Work::Ping => "ping",
    };
    let lane_label = match lane {
        Lane::Session => "session",
        Lane::Stateless => "stateless",
    };
    metrics::counter!("idpool_mcp_thin_total", "lane" => lane_label, "method" => method)
        .increment(1);
    let bytes = match work {
        Work::Ping => message(ServerResult::EmptyResult(EmptyResult {}), id, lane),
        Work::List => {
            let tools: Result<Vec<Tool>, _> = core
                .tools_for(&ctx.principal)
                .into_iter()
                .map(serde_json::from_value)
                .collect();
            match tools {
                Ok(tools) => message(
                    ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools)),
                    id,
                    lane,
                ),
                Err(e) => error(
                    ErrorData::internal_error(format!("encoding: {e}"), None),
                    id,
                ),
            }
        }
        Work::Call { name, args } => {
            let end = core
                .call_tool(&ctx, &name, args, None, CancellationToken::new())
                .await;
            match end {
                CallEnd::Ok(o) if hot(&o.body) => result_bytes(&id, &o.body, o.text, lane),
                end => match super::server::call_result(end) {
                    Ok(r) => message(ServerResult::CallToolResult(r), id, lane),
                    Err(e) => error(e, id),
                },
            }
        }
    };
    let mut r = Response::new(Body::from(bytes));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A result written by hand: an object without media (screenshots and
/// PDFs become content blocks of their own, through rmcp's types).
fn hot(body: &Value) -> bool {
    body.as_object().is_some_and(|o| !o.contains_key("media"))
}

/// `result` as rmcp's handler shapes it for the peer's version: 2025-era
/// peers without `resultType` and non-object output, 2026-07-28 peers with
/// the cache hints.
fn message(mut result: ServerResult, id: RequestId, lane: Lane) -> Vec<u8> {
    match lane {
        Lane::Session => {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
        }
        Lane::Stateless => result.fill_missing_cache_hints(),
    }
    encode(&ServerJsonRpcMessage::response(result, id))
}

fn error(e: ErrorData, id: RequestId) -> Vec<u8> {
    encode(&ServerJsonRpcMessage::error(e, Some(id)))
}

fn encode(m: &ServerJsonRpcMessage) -> Vec<u8> {
    serde_json::to_vec(m).unwrap_or_else(|e| {
        format!(r#"{{"jsonrpc":"2.0","error":{{"code":-32603,"message":"encoding: {e}"}}}}"#)
            .into_bytes()
    })
}

/// A tool's result as rmcp's `CallToolResult::structured` writes it, with
/// the body serialized once: `structuredContent` is those bytes, the text
/// block the same bytes escaped as a JSON string.
fn result_bytes(id: &RequestId, body: &Value, text: Option<String>, lane: Lane) -> Vec<u8> {
    let json = match text.map_or_else(|| serde_json::to_vec(body), |t| Ok(t.into_bytes())) {
        Ok(j) => j,
        Err(e) => {
            return error(
                ErrorData::internal_error(format!("encoding: {e}"), None),
                id.clone(),
            );
        }
    };
    // Twice the body and the envelope; escapes grow it when they must.
    let mut out = Vec::with_capacity(2 * json.len() + 256);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    match id {
        RequestId::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        RequestId::String(s) => {
            if serde_json::to_writer(&mut out, s.as_ref()).is_err() {
                return error(
                    ErrorData::internal_error("encoding the id", None),
                    id.clone(),
                );
            }
        }
    }
    out.extend_from_slice(br#","result":{"#);
    if lane == Lane::Stateless {
        out.extend_from_slice(br#""resultType":"complete","#);
    }
    out.extend_from_slice(br#""content":[{"type":"text","text":""#);
    escape_into(&mut out, &json);
    out.extend_from_slice(br#""}],"structuredContent":"#);
    out.extend_from_slice(&json);
    out.extend_from_slice(br#","isError":false}}"#);
    out
}

/// `json` (compact serde_json output: no raw control characters, no
/// whitespace) as the inside of a JSON string: only `"` and `\` need a
/// backslash.
fn escape_into(out: &mut Vec<u8>, json: &[u8]) {
    let mut from = 0;
    for i in memchr::memchr2_iter(b'"', b'\\', json) {
        out.extend_from_slice(&json[from..i]);
        out.push(b'\\');
        out.push(json[i]);
        from = i + 1;
    }
    out.extend_from_slice(&json[from..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn msg(v: Value) -> Message {
        serde_json::from_value(v).unwrap()
    }

    fn meta() -> Value {
        json!({META_VERSION: V_2026, META_CAPABILITIES: {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
    }

    #[test]
    fn the_hot_result_is_what_rmcp_writes_for_both_lanes() {
        for body in [
            json!({"reviews": [{"text": "a \"quoted\" \\ back\\slash, é, \u{1F600}, \n line"}], "count": 1}),
            json!({}),
            json!({"nested": {"deep": [1, 2.5, null, true, "x"]}}),
        ] {
            for (id, lane) in [
                (RequestId::Number(7), Lane::Session),
                (RequestId::String("a\"b".into()), Lane::Stateless),
                (RequestId::Number(-3), Lane::Stateless),
            ] {
                let ours: Value =
                    serde_json::from_slice(&result_bytes(&id, &body, None, lane)).unwrap();
                let theirs: Value = serde_json::from_slice(&message(
                    ServerResult::CallToolResult(CallToolResult::structured(body.clone())),
                    id.clone(),
                    lane,
                ))
                .unwrap();
                assert_eq!(ours, theirs, "{lane:?}");
                // The text copy and the structured copy are the same JSON.
                let text = ours["result"]["content"][0]["text"].as_str().unwrap();
                assert_eq!(
                    serde_json::from_str::<Value>(text).unwrap(),
                    ours["result"]["structuredContent"]
                );
            }
        }
    }

    #[test]
    fn a_session_request_is_thin_only_as_rmcp_would_take_it() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_reviews", "arguments": {"item": "B0"}}});
        let t = msg(call.clone()).into_thin(&headers(&[]), true).unwrap();
        assert_eq!(t.lane, Lane::Session);
        assert_eq!(
            t.work,
            Work::Call {
                name: "get_reviews".into(),
                args: json!({"item": "B0"})
            }
        );
        assert!(
            msg(call.clone())
                .into_thin(&headers(&[("mcp-protocol-version", "2025-06-18")]), true)
                .is_some()
        );
        let refused = [
            // A version rmcp does not know, or two of them.
            (
                call.clone(),
                headers(&[("mcp-protocol-version", "1999-01-01")]),
            ),
            (
                call.clone(),
                headers(&[
                    ("mcp-protocol-version", "2025-06-18"),
                    ("mcp-protocol-version", "2025-06-18"),
                ]),
            ),
            // Progress wanted: rmcp's stream.
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "x", "_meta": {"progressToken": 3}}}),
                headers(&[]),
            ),
            // Other methods, notifications, a cursor, unknown params.
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
                headers(&[]),
            ),
            (
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                headers(&[]),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "c"}}),
                headers(&[]),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "task": {}}}),
                headers(&[]),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": [1]}}),
                headers(&[]),
            ),
            (
                json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
                headers(&[]),
            ),
            // A per-request version inside a session.
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": meta()}}),
                headers(&[]),
            ),
        ];
        for (m, h) in refused {
            assert!(msg(m.clone()).into_thin(&h, true).is_none(), "{m}");
        }
        // Accept without SSE, or a body that is not JSON: rmcp's answer.
        let mut h = headers(&[]);
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(msg(call.clone()).into_thin(&h, true).is_none());
        let mut h = headers(&[]);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(msg(call).into_thin(&h, true).is_none());
    }

    #[test]
    fn a_stateless_request_needs_its_version_capabilities_and_standard_headers() {
        let call = json!({"jsonrpc": "2.0", "id": "r1", "method": "tools/call",
            "params": {"name": "get_reviews", "arguments": {}, "_meta": meta()}});
        let good = [
            ("mcp-protocol-version", V_2026),
            ("mcp-method", "tools/call"),
            ("mcp-name", "get_reviews"),
        ];
        let t = msg(call.clone()).into_thin(&headers(&good), false).unwrap();
        assert_eq!(t.lane, Lane::Stateless);
        // Without a session, a 2025-era request is rmcp's (it has no session).
        assert!(msg(call.clone()).into_thin(&headers(&[]), false).is_none());
        for drop in 0..good.len() {
            let h: Vec<_> = good
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != drop)
                .map(|(_, p)| *p)
                .collect();
            assert!(
                msg(call.clone()).into_thin(&headers(&h), false).is_none(),
                "{drop}"
            );
        }
        let wrong = [
            ("mcp-protocol-version", V_2026),
            ("mcp-method", "tools/list"),
            ("mcp-name", "get_reviews"),
        ];
        assert!(
            msg(call.clone())
                .into_thin(&headers(&wrong), false)
                .is_none()
        );
        let other = [
            ("mcp-protocol-version", V_2026),
            ("mcp-method", "tools/call"),
            ("mcp-name", "extract"),
        ];
        assert!(
            msg(call.clone())
                .into_thin(&headers(&other), false)
                .is_none()
        );
        let mut no_caps = call.clone();
        no_caps["params"]["_meta"]
            .as_object_mut()
            .unwrap()
            .remove(META_CAPABILITIES);
        assert!(msg(no_caps).into_thin(&headers(&good), false).is_none());
        let mut old = call;
        old["params"]["_meta"][META_VERSION] = json!("2025-11-25");
        assert!(msg(old).into_thin(&headers(&good), false).is_none());
    }

    #[test]
    fn wants_json_and_initialize_are_read_from_the_same_parse() {
        let p = |v: Value| msg(v).wants_json();
        assert!(p(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}})
        ));
        assert!(!p(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":5}}})
        ));
        assert!(!p(
            json!({"jsonrpc":"2.0","method":"notifications/initialized"})
        ));
        assert!(msg(json!({"jsonrpc":"2.0","id":1,"method":"initialize"})).is_initialize());
    }
}
