//! The rmcp `ServerHandler`: tools, resources and the prompt, over any
//! transport. Each session gets one `McpServer`; the caller's principal comes
//! from the HTTP request (set by the auth layer) or is fixed for the session
//! (stdio, legacy SSE).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::dispatch::{CallContext, Core};
use super::end::CallEnd;
use crate::auth::{Principal, Role};
use crate::lease::cascade::Progress;

/// The `_meta` key of a failed call's facts: `{"kind", "message", "retry_after"?}`.
pub const META_ERROR: &str = "idpool/error";

/// Pause between the last progress notification and the response.
pub(crate) const PROGRESS_GAP: std::time::Duration = std::time::Duration::from_millis(25);

/// One MCP session's handler.
#[derive(Clone)]
pub struct McpServer {
    core: Arc<Core>,
    /// The principal when the transport fixes it (stdio, legacy SSE); HTTP
    /// requests carry their own.
    fixed: Principal,
    session: Option<String>,
}

impl McpServer {
    pub fn new(core: Arc<Core>, fixed: Principal, session: Option<String>) -> Self {
        McpServer {
            core,
            fixed,
            session,
        }
    }

    fn context(&self, ctx: &RequestContext<RoleServer>) -> CallContext {
        let parts = ctx.extensions.get::<http::request::Parts>();
        let principal = parts
            .and_then(|p| p.extensions.get::<Principal>())
            .cloned()
            .unwrap_or_else(|| self.fixed.clone());
        let session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .or_else(|| self.session.clone());
        CallContext {
            principal,
            session,
            hop: None,
        }
    }
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| McpError::internal_error(format!("encoding: {e}"), None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true},
            "resources": {},
            "prompts": {},
        }))
        .unwrap_or_default();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("idpool", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "idpool serves a pool of browser identities. Use get_reviews or extract for \
                 sites with a strategy (list_strategies), scrape for any allowed page, \
                 pool_status to see slot health.",
            )
    }

    async fn on_initialized(&self, ctx: rmcp::service::NotificationContext<RoleServer>) {
        self.core.add_peer(ctx.peer);
    }

    /// 2026-07-28 clients hear of tool-list changes (a reload that adds or
    /// removes a strategy) on a `subscriptions/listen` stream.
    fn accepted_subscription_filter(
        &self,
        _requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut f = rmcp::model::SubscriptionFilter::new();
        f.tools_list_changed = Some(true);
        Some(f)
    }

    /// One stream, open until its client ends it or the daemon shuts down
    /// (then it ends with the final result, and the client listens again).
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        // Forgotten however the stream ends (even when this future is dropped).
        struct Listening<'a>(&'a Core, u64);
        impl Drop for Listening<'_> {
            fn drop(&mut self) {
                self.0.remove_listener(self.1);
            }
        }
        let _listening = Listening(&self.core, self.core.add_listener(context.sink().clone()));
        tokio::select! {
            () = context.cancelled() => {}
            () = self.core.closing() => {}
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = self.context(&ctx).principal;
        let tools: Vec<Tool> = self
            .core
            .tools_for(&who)
            .into_iter()
            .map(from_json)
            .collect::<Result<_, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call = self.context(&ctx);
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        // Progress goes out in order through one task; it is drained before the
        // result so no notification trails the response.
        let mut forwarder = None;
        let progress = ctx.meta.get_progress_token().map(|token| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let peer = ctx.peer.clone();
            forwarder = Some(tokio::spawn(async move {
                let mut n = 0.0;
                while let Some(message) = rx.recv().await {
                    n += 1.0;
                    let mut p = ProgressNotificationParam::new(token.clone(), n);
                    p.message = Some(message);
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
            }));
            Progress(Arc::new(move |m: String| {
                let _ = tx.send(m);
            }))
        });
        let end = self
            .core
            .call_tool(&call, &request.name, args, progress, ctx.ct.clone())
            .await;
        if let Some(f) = forwarder {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), f).await;
            // Clients that dispatch notifications a tick later than responses
            // (the TypeScript SDK) drop progress read in the same chunk as the
            // response; a short gap keeps them apart.
            tokio::time::sleep(PROGRESS_GAP).await;
        }
        call_result(end).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut list = vec![
            json!({"uri": "idpool://slots", "name": "slots", "title": "Slots' health",
                   "description": "pool_status as a resource", "mimeType": "application/json"}),
            json!({"uri": "idpool://strategies", "name": "strategies", "title": "Strategies",
                   "description": "list_strategies as a resource", "mimeType": "application/json"}),
        ];
        for s in self.core.pool().registry().iter() {
            list.push(json!({
                "uri": format!("idpool://strategies/{}", s.name()),
                "name": format!("strategy {}", s.name()),
                "description": format!("Strategy `{}`: hosts, operations, parameters, and its TOML source", s.name()),
                "mimeType": "application/json",
            }));
        }
        from_json(json!({ "resources": list }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        from_json(json!({"resourceTemplates": [{
            "uriTemplate": "idpool://strategies/{name}",
            "name": "strategy",
            "description": "One strategy: hosts, operations, parameters, and its TOML source",
            "mimeType": "application/json",
        }]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let pool = self.core.pool();
        let uri = request.uri.as_str();
        let call = self.context(&ctx);
        let transport = call.principal.transport;
        self.core.audit_request(
            Some(&call.principal),
            transport,
            &format!("resources/read {uri}"),
            None,
        );
        let body = match uri {
            "idpool://slots" => serde_json::Value::clone(&pool.reports().status()),
            "idpool://strategies" => crate::tools::list_strategies::run(&pool.registry()),
            _ => {
                let Some(name) = uri.strip_prefix("idpool://strategies/") else {
                    return Err(McpError::resource_not_found(
                        format!("no resource `{uri}`"),
                        None,
                    ));
                };
                let all = crate::tools::list_strategies::run(&pool.registry());
                let Some(mut entry) = all["strategies"]
                    .as_array()
                    .and_then(|a| a.iter().find(|s| s["name"] == name))
                    .cloned()
                else {
                    return Err(McpError::resource_not_found(
                        format!("no strategy `{name}`"),
                        None,
                    ));
                };
                let source = pool
                    .registry()
                    .get(name)
                    .and_then(|s| s.source().map(|p| p.to_path_buf()));
                if let Some(path) = source {
                    entry["source"] = json!(std::fs::read_to_string(&path).ok());
                }
                entry
            }
        };
        let text = serde_json::to_string_pretty(&body).unwrap_or_default();
        let result: ReadResourceResult = from_json(json!({
            "contents": [{"uri": uri, "mimeType": "application/json", "text": text}]
        }))?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        from_json(json!({"prompts": [{
            "name": "review_digest",
            "title": "Review digest",
            "description": "Fetch an item's reviews with get_reviews and summarise them, quoting numbers only from the tool's output.",
            "arguments": [
                {"name": "item", "description": "Item id or URL", "required": true},
                {"name": "strategy", "description": "Strategy name (optional when item is a URL)", "required": false},
            ],
        }]}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let call = self.context(&ctx);
        let transport = call.principal.transport;
        self.core.audit_request(
            Some(&call.principal),
            transport,
            &format!("prompts/get {}", request.name),
            None,
        );
        if request.name != "review_digest" {
            return Err(McpError::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let Some(item) = args.get("item").and_then(Value::as_str) else {
            return Err(McpError::invalid_params(
                "prompt `review_digest` needs the argument `item`",
                None,
            ));
        };
        let strategy = args.get("strategy").and_then(Value::as_str);
        let who = self.context(&ctx).principal;
        let call = match strategy {
            Some(s) => json!({"item": item, "strategy": s, "pages": 3}),
            None => json!({"item": item, "pages": 3}),
        };
        let caveat = if who.role < Role::Operator {
            " (your key's role cannot call get_reviews; ask an operator)"
        } else {
            ""
        };
        let text = format!(
            "Call the `get_reviews` tool with the arguments {call}{caveat}. Then write a \
             digest of the reviews: the overall sentiment, the main praises and complaints, \
             and anything repeated across reviews. Quote numbers (counts, ratings, \
             helpful votes, dates) only as they appear in the tool's output, never estimate \
             or invent them; say how many reviews the digest covers and which tier served \
             them. If the tool reports an error or zero reviews, say so plainly."
        );
        let result: GetPromptResult = from_json(json!({
            "description": format!("Review digest for {item}"),
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }))?;
        Ok(result.into())
    }
}

/// A call's end as MCP: a result (a failure is a result with `isError`), or
/// a JSON-RPC error. Both transports' answers are built here.
pub(crate) fn call_result(end: CallEnd) -> Result<CallToolResult, McpError> {
    match end {
        CallEnd::Ok(o) => Ok(with_media(o.body, o.text)),
        CallEnd::Failed(f) | CallEnd::Invalid(f) => {
            // The text for people and models; kind and retry_after for
            // programs in `_meta` (structured content would be checked
            // against the tool's output schema by some SDKs).
            let meta = serde_json::Map::from_iter([(META_ERROR.to_string(), f.to_json())]);
            Ok(CallToolResult::error(vec![ContentBlock::text(f.message)])
                .with_meta(Some(rmcp::model::MetaObject(meta))))
        }
        CallEnd::InvalidParams(m) => Err(McpError::invalid_params(m, None)),
        CallEnd::Denied(d) => Err(McpError::new(
            ErrorCode(crate::auth::Denied::CODE),
            d.to_string(),
            Some(json!({"role": d.role, "tool": d.tool, "required": d.needed})),
        )),
        CallEnd::Cancelled => Err(McpError::new(
            ErrorCode::INTERNAL_ERROR,
            "cancelled by the client",
            None,
        )),
    }
}

/// A tool's result as MCP content: its JSON (text and structured), and
/// what it put under `media` (screenshots, PDFs) as image and embedded
/// resource blocks, their bytes kept out of the structured copy.
fn with_media(mut v: Value, text: Option<String>) -> CallToolResult {
    let media = v.as_object_mut().and_then(|o| o.remove("media"));
    let mut r = match text {
        // The dispatcher wrote the JSON already (only for a body without
        // media): the text block is those bytes.
        Some(t) if media.is_none() => {
            let mut r = CallToolResult::structured(Value::Null);
            r.content = vec![ContentBlock::text(t)];
            r.structured_content = Some(v);
            r
        }
        _ => CallToolResult::structured(v),
    };
    let Some(Value::Array(items)) = media else {
        return r;
    };
    let field = |m: &Value, k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    for m in &items {
        let block = match m.get("type").and_then(Value::as_str) {
            Some("image") => ContentBlock::image(field(m, "data"), field(m, "mime_type")),
            Some("resource") => {
                ContentBlock::resource(rmcp::model::ResourceContents::BlobResourceContents {
                    uri: field(m, "uri"),
                    mime_type: Some(field(m, "mime_type")),
                    blob: field(m, "data"),
                    meta: None,
                })
            }
            _ => continue,
        };
        r.content.push(block);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_become_image_and_resource_blocks_and_leave_the_structured_copy() {
        let v = json!({"url": "u", "screenshot": {"bytes": 3},
            "media": [{"type": "image", "mime_type": "image/png", "data": "iVBO"},
                      {"type": "resource", "mime_type": "application/pdf", "uri": "u#pdf", "data": "JVBE"}]});
        let r = with_media(v, None);
        let structured = r.structured_content.clone().unwrap_or_default();
        assert!(structured.get("media").is_none());
        assert_eq!(structured["screenshot"]["bytes"], 3);
        let blocks = serde_json::to_value(&r.content).unwrap_or_default();
        assert_eq!(blocks[1]["type"], "image");
        assert_eq!(blocks[1]["mimeType"], "image/png");
        assert_eq!(blocks[1]["data"], "iVBO");
        assert_eq!(blocks[2]["type"], "resource");
        assert_eq!(blocks[2]["resource"]["blob"], "JVBE");
        assert_eq!(blocks[2]["resource"]["mimeType"], "application/pdf");
    }

    #[test]
    fn written_text_is_what_rmcp_would_write() {
        let v = json!({"n": 1, "s": "a\"b"});
        let ours = with_media(v.clone(), Some(v.to_string()));
        assert_eq!(
            serde_json::to_value(&ours).unwrap_or_default(),
            serde_json::to_value(CallToolResult::structured(v)).unwrap_or_default()
        );
    }
}
