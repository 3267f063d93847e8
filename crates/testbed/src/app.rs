//! The testbed's HTTP routes: the shop, its gatekeeping (JA4 gate, JS challenge,
//! rate limit, faults), and the control endpoint.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Json, Redirect, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::accounts;
use super::data;
use super::html;
use super::state::{CHALLENGE_ROUNDS, CONTEXT_HEADERS, FaultKind, LogEntry, Presented, Shared};
use idpool::wire::fingerprint::tls::ClientHello;

/// What the connection told us, attached to every request.
#[derive(Debug, Clone, Default)]
pub struct Conn {
    pub tls: bool,
    pub hello: Option<ClientHello>,
    /// The first bytes the client sent (decrypted): its HTTP/2 frames or
    /// HTTP/1.1 heads, for header order and the HTTP/2 fingerprint.
    pub tap: Option<Arc<idpool::wire::fingerprint::TapBuf>>,
}

impl Conn {
    /// How the client sent `req`: header order, HTTP/2 fingerprint, priority.
    fn view(&self, req: &Request) -> Option<idpool::wire::fingerprint::RequestView> {
        let path = req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
        self.tap
            .as_ref()?
            .request_view(req.method().as_str(), &path)
    }
}

impl Conn {
    fn ja4(&self) -> &str {
        match &self.hello {
            Some(h) => &h.ja4,
            None if self.tls => "unparsed",
            None => "plain-http",
        }
    }
    fn family(&self) -> &str {
        self.hello.as_ref().map_or("none", |h| h.family.as_str())
    }
}

/// The whole testbed app.
pub fn router(shared: Arc<Shared>) -> Router {
    let shop = Router::new()
        .route("/", get(home))
        .route("/product/{id}", get(product))
        .route("/product-reviews/{id}", get(reviews))
        .route("/js-reviews/{id}", get(js_reviews))
        .route("/js-env", get(js_env))
        .route("/ajax/reviews", post(ajax_reviews))
        .route("/challenge/verify", post(challenge_verify))
        .route("/ap/signin", get(signin))
        .route("/loop", get(redirect_loop))
        .route("/redirect", get(redirect_to))
        .route("/link", get(link_to))
        .route("/captcha-page", get(captcha_page))
        // The robot check's answer (the gate takes it while the check is on).
        .route(
            "/errors/validateCaptcha",
            get(|| async { StatusCode::NOT_FOUND }),
        )
        .merge(super::signin::routes())
        .merge(super::web_shop::routes())
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            super::signin::nav,
        ))
        .layer(middleware::from_fn_with_state(shared.clone(), gatekeeper));
    Router::new()
        .merge(shop)
        .merge(super::site::routes().layer(middleware::from_fn_with_state(shared.clone(), logged)))
        .route("/whoami", get(whoami))
        .route("/reach-out", get(reach_out))
        .route("/storage", get(|| async { Html(html::storage()) }))
        .merge(super::hostile::routes())
        .merge(
            super::engines::routes().layer(middleware::from_fn_with_state(shared.clone(), logged)),
        )
        .merge(
            super::detect::routes().layer(middleware::from_fn_with_state(shared.clone(), logged)),
        )
        .merge(super::control::routes())
        .with_state(shared)
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Every `cookie` field joined (HTTP/2 sends one field per cookie).
fn cookie_line(headers: &HeaderMap) -> Option<String> {
    let all: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!all.is_empty()).then(|| all.join("; "))
}

fn html_status(status: StatusCode, body: String) -> Response {
    (status, Html(body)).into_response()
}

/// Everything that stands between a client and the shop, in the order a real WAF
/// applies it: site-wide rate limit, fingerprint gate, faults, JS challenge,
/// per-identity rate limit.
async fn gatekeeper(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let at_ms = shared.now_ms();
    let conn = req.extensions().get::<Conn>().cloned().unwrap_or_default();
    let mut entry = log_entry(&conn, &req, at_ms);
    let resp = gate(&shared, &conn, &entry, req, next).await;
    entry.status = resp.status().as_u16();
    entry.done_ms = shared.now_ms();
    shared.push_log(entry);
    resp
}

/// The open-web site's requests: logged and counted, never gated.
async fn logged(State(shared): State<Arc<Shared>>, mut req: Request, next: Next) -> Response {
    let conn = req.extensions().get::<Conn>().cloned().unwrap_or_default();
    let mut entry = log_entry(&conn, &req, shared.now_ms());
    shared.record(conn.ja4(), conn.family(), req.uri().path(), false);
    req.extensions_mut().insert(super::site::Tls(conn.tls));
    let resp = next.run(req).await;
    entry.status = resp.status().as_u16();
    entry.done_ms = shared.now_ms();
    shared.push_log(entry);
    resp
}

fn log_entry(conn: &Conn, req: &Request, at_ms: u64) -> LogEntry {
    let h = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let view = conn.view(req);
    LogEntry {
        protocol: view.as_ref().map(|v| v.protocol.to_string()),
        akamai: view.as_ref().and_then(|v| v.akamai.clone()),
        h2_priority: view.as_ref().and_then(|v| v.priority.clone()),
        head_lines: view.as_ref().map(|v| v.lines.clone()).unwrap_or_default(),
        header_order: view.map(|v| v.headers).unwrap_or_default(),
        path: req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.to_string()),
        ja4: conn.ja4().to_string(),
        resumed: conn
            .hello
            .as_ref()
            .is_some_and(|h| h.extensions.contains(&41)),
        family: conn.family().to_string(),
        user_agent: h("user-agent"),
        accept_language: h("accept-language"),
        sec_ch_ua: h("sec-ch-ua"),
        sec_ch_ua_platform: h("sec-ch-ua-platform"),
        cookie: cookie_line(req.headers()),
        status: 0,
        at_ms,
        done_ms: at_ms,
    }
}

/// The answer as the modes change it: the layout change, the probe.
async fn rewritten(mut resp: Response, modes: &super::state::Modes) -> Response {
    if modes.layout_change {
        resp = relayout(resp).await;
    }
    if modes.probe {
        resp = with_probe(resp).await;
    }
    resp
}

/// The main-world probe in an HTML answer.
async fn with_probe(resp: Response) -> Response {
    let html = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/html"));
    if !html {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "body too large to probe").into_response();
    };
    let text = super::detect::inject_probe(&String::from_utf8_lossy(&bytes));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(text))
}

/// The layout change: the review rating's class renamed in the answer.
async fn relayout(resp: Response) -> Response {
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "body too large to relayout",
        )
            .into_response();
    };
    let text = String::from_utf8_lossy(&bytes).replace("review-rating", "review-stars");
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(text))
}

/// `entry`: how the request was sent (its log entry, read once).
async fn gate(
    shared: &Arc<Shared>,
    conn: &Conn,
    entry: &LogEntry,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    let modes = shared.modes.lock().clone();
    // Every shop request counts toward its second; past the site-wide limit
    // nobody gets further.
    if let Some(l) = shared.site_limited(shared.now_ms()) {
        return captcha(l);
    }

    let refused =
        modes.gate && conn.tls && !conn.hello.as_ref().is_some_and(ClientHello::is_browser);
    shared.record(conn.ja4(), conn.family(), &path, refused);
    if refused {
        return html_status(StatusCode::FORBIDDEN, html::blocked(conn.ja4()));
    }

    if let Some(fault) = shared.take_fault(&path) {
        match fault.kind {
            FaultKind::Slow => tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await,
            FaultKind::Error => {
                let status =
                    StatusCode::from_u16(fault.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                return html_status(status, html::error(status.as_u16()));
            }
            FaultKind::Truncate => return truncated(),
            FaultKind::Huge => return Html(html::huge(fault.size_mb)).into_response(),
            FaultKind::RedirectLoop => return Redirect::to("/loop?n=1").into_response(),
            FaultKind::Reset => {} // handled below HTTP
        }
    }

    let headers = req.headers().clone();
    if modes.robot_check {
        let check = &shared.robot_check;
        if path == "/errors/validateCaptcha" {
            let (typed, back) = super::robot_check::back_to(req.uri().query().unwrap_or_default());
            return match typed.as_deref().and_then(|t| check.solve(t)) {
                Some(token) => {
                    let mut resp = Redirect::to(&back).into_response();
                    if let Ok(v) = HeaderValue::from_str(&format!(
                        "tb_human={token}; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax"
                    )) {
                        resp.headers_mut().append(header::SET_COOKIE, v);
                    }
                    resp
                }
                None => Html(super::robot_check::page(&check.issue(), &back)).into_response(),
            };
        }
        let human = cookie(&headers, "tb_human").is_some_and(|t| check.is_human(t));
        if !human && path != "/signin" && path != "/favicon.ico" {
            let back = req
                .uri()
                .path_and_query()
                .map_or("/".to_string(), |p| p.as_str().to_string());
            return Html(super::robot_check::page(&check.issue(), &back)).into_response();
        }
    }
    let mut new_sid = None;
    let clearance = cookie(&headers, "tb_clearance")
        .filter(|c| shared.clearance_ok(c))
        .map(str::to_string);
    if modes.challenge && clearance.is_none() {
        shared.stats.lock().challenges += 1;
        let nonce = shared.issue_nonce();
        return html_status(
            StatusCode::SERVICE_UNAVAILABLE,
            html::challenge(&nonce, CHALLENGE_ROUNDS, modes.consistency),
        );
    }
    if modes.consistency
        && let Some(c) = &clearance
    {
        // Navigations and script requests are bound; subresources (images,
        // scripts, styles: `no-cors`) are not. No fetch metadata at all is
        // judged as a navigation.
        let mode = headers
            .get("sec-fetch-mode")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("navigate");
        let kind = match mode {
            "cors" | "same-origin" => Some(true),
            "no-cors" | "websocket" => None,
            _ => Some(false),
        };
        if let Some(xhr) = kind
            && let Err(diff) = shared.check_binding(c, xhr, presented(entry))
        {
            return html_status(StatusCode::FORBIDDEN, html::inconsistent(&diff.join(", ")));
        }
    }
    let identity = match (clearance, cookie(&headers, "tb_sid")) {
        (Some(c), _) => c,
        (None, Some(sid)) => sid.to_string(),
        (None, None) => {
            let sid = hex::encode(rand::random::<[u8; 12]>());
            new_sid = Some(sid.clone());
            sid
        }
    };
    let mut resp = match shared.rate_limited(&identity, Instant::now()) {
        Some(l) => {
            shared.stats.lock().captchas += 1;
            captcha(l)
        }
        None => next.run(req).await,
    };
    resp = rewritten(resp, &modes).await;
    if let Some(sid) = new_sid
        && let Ok(v) = HeaderValue::from_str(&format!(
            "tb_sid={sid}; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax"
        ))
    {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// The captcha page of a limit, with its status and `Retry-After`.
fn captcha(l: super::Limited) -> Response {
    let status = StatusCode::from_u16(l.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut resp = html_status(status, html::captcha());
    if let Some(secs) = l.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// What the client presents with this request, for the consistency mode.
fn presented(entry: &LogEntry) -> Presented {
    Presented {
        user_agent: entry.user_agent.clone().unwrap_or_default(),
        order: entry
            .header_order
            .iter()
            .map(|(k, _)| k.to_ascii_lowercase())
            .filter(|k| !k.starts_with(':') && !CONTEXT_HEADERS.contains(&k.as_str()))
            .collect(),
        h2: entry.akamai.clone(),
        ja4_b: entry.ja4.split('_').nth(1).unwrap_or("").to_string(),
    }
}

/// The challenge script's XHR (consistency mode): it carries the fresh
/// clearance cookie, so the gate has bound the browser's XHR by now.
async fn challenge_verify() -> Json<Value> {
    Json(json!({"ok": true}))
}

/// A body that promises more than it sends, then breaks the connection.
fn truncated() -> Response {
    let full = html::huge(1);
    let half = Bytes::from(full.as_bytes()[..full.len() / 2].to_vec());
    let stream = futures_util::stream::iter(vec![
        Ok::<Bytes, std::io::Error>(half),
        Err(std::io::Error::other("truncated on purpose")),
    ]);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&full.len().to_string()) {
        resp.headers_mut().insert(header::CONTENT_LENGTH, v);
    }
    resp
}

async fn home() -> Html<String> {
    Html(html::home())
}

/// A 404 for an invalid id, the captcha page for a banned one.
fn bad_item(id: &str) -> Option<Response> {
    if !data::valid_item(id) {
        return Some(html_status(StatusCode::NOT_FOUND, html::error(404)));
    }
    data::is_banned(id).then(|| html_status(StatusCode::FORBIDDEN, html::captcha()))
}

async fn product(Path(id): Path<String>) -> Response {
    if let Some(r) = bad_item(&id) {
        return r;
    }
    if data::is_login_wall(&id) {
        return Redirect::to(&format!("/ap/signin?return_to=/product/{id}")).into_response();
    }
    Html(html::product(&id)).into_response()
}

#[derive(Deserialize)]
struct PageQuery {
    page: Option<usize>,
}

async fn reviews(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Response {
    if let Some(r) = bad_item(&id) {
        return r;
    }
    if accounts::needs_account(&id) && !shared.accounts.signed_in(&headers) {
        return accounts::wall(&format!("/product-reviews/{id}"));
    }
    if data::is_login_wall(&id) {
        return Redirect::to(&format!("/ap/signin?return_to=/product-reviews/{id}"))
            .into_response();
    }
    Html(html::reviews(&id, q.page.unwrap_or(1).max(1))).into_response()
}

async fn js_reviews(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Response {
    if let Some(r) = bad_item(&id) {
        return r;
    }
    if accounts::needs_account(&id) && !shared.accounts.signed_in(&headers) {
        return accounts::wall(&format!("/js-reviews/{id}"));
    }
    if data::is_login_wall(&id) {
        return Redirect::to(&format!("/ap/signin?return_to=/js-reviews/{id}")).into_response();
    }
    Html(html::js_reviews(&id, q.page.unwrap_or(1).max(1))).into_response()
}

/// `POST /ajax/reviews` with a form or JSON body `{item, page}`: JSON with HTML fragments.
async fn ajax_reviews(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    #[derive(Deserialize)]
    struct Req {
        item: String,
        #[serde(default)]
        page: Option<serde_json::Value>,
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let parsed: Result<Req, String> = if is_json {
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    } else {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(&body).into_owned().collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        get("item")
            .map(|item| Req {
                item,
                page: get("page").map(Value::String),
            })
            .ok_or_else(|| "missing form field `item`".to_string())
    };
    let req = match parsed {
        Ok(r) if data::is_banned(&r.item) => {
            return html_status(StatusCode::FORBIDDEN, html::captcha());
        }
        Ok(r) if data::valid_item(&r.item) => r,
        Ok(_) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": "invalid item id"})),
            )
                .into_response();
        }
        Err(e) => return (StatusCode::BAD_REQUEST, Json(json!({"error": e}))).into_response(),
    };
    if accounts::needs_account(&req.item) && !shared.accounts.signed_in(&headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "sign in to see these reviews", "redirect": "/signin"})),
        )
            .into_response();
    }
    if data::is_login_wall(&req.item) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "login required", "redirect": "/ap/signin"})),
        )
            .into_response();
    }
    let page = match &req.page {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(1) as usize,
        Some(Value::String(s)) => s.parse().unwrap_or(1),
        _ => 1,
    }
    .max(1);
    let (list, more) = data::page(&req.item, page);
    Json(json!({
        "item": req.item,
        "page": page,
        "total": data::review_count(&req.item),
        "has_more": more,
        "html": list.iter().map(html::review_fragment).collect::<Vec<_>>(),
    }))
    .into_response()
}

async fn js_env() -> Html<String> {
    Html(html::js_env())
}

#[derive(Deserialize)]
struct SigninQuery {
    return_to: Option<String>,
}

async fn signin(Query(q): Query<SigninQuery>) -> Html<String> {
    Html(html::signin(q.return_to.as_deref().unwrap_or("/")))
}

#[derive(Deserialize)]
struct LoopQuery {
    n: Option<u64>,
}

#[derive(Deserialize)]
struct RedirectQuery {
    to: String,
}

/// `GET /reach-out?to=HOST:PORT`: a page whose image, `fetch()` and
/// WebSocket all go to `to` (another address than the testbed's), for
/// testing what a page can make the browser reach.
async fn reach_out(Query(q): Query<RedirectQuery>) -> Response {
    let ok = !q.to.is_empty()
        && q.to
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".:-[]".contains(c));
    if !ok {
        return html_status(StatusCode::BAD_REQUEST, "to=HOST:PORT".into());
    }
    Html(html::reach_out(&q.to)).into_response()
}

/// `GET /link?to=URL`: a page with one link (`a#go`) to `URL`, for
/// testing where a click may lead.
async fn link_to(Query(q): Query<RedirectQuery>) -> Html<String> {
    Html(html::link(&q.to))
}

/// `GET /captcha-page`: the captcha page, always (a block a click leads to).
async fn captcha_page() -> Html<String> {
    Html(html::captcha())
}

/// `GET /redirect?to=URL`: an open redirect, for testing redirect checks.
async fn redirect_to(Query(q): Query<RedirectQuery>) -> Redirect {
    Redirect::to(&q.to)
}

async fn redirect_loop(Query(q): Query<LoopQuery>) -> Redirect {
    Redirect::to(&format!("/loop?n={}", q.n.unwrap_or(0) + 1))
}

/// What the testbed saw of this request: fingerprint, headers, cookies.
async fn whoami(State(shared): State<Arc<Shared>>, req: Request) -> Json<Value> {
    let conn = req.extensions().get::<Conn>().cloned().unwrap_or_default();
    shared.record(conn.ja4(), conn.family(), "/whoami", false);
    let h = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("<binary>").to_string()))
        .collect();
    Json(json!({
        "ja4": conn.ja4(),
        "family": conn.family(),
        "browser": conn.hello.as_ref().is_some_and(ClientHello::is_browser),
        "alpn": conn.hello.as_ref().map(|h| h.alpn.clone()),
        "http_version": format!("{:?}", req.version()),
        "user_agent": h("user-agent"),
        "accept_language": h("accept-language"),
        "cookie": cookie_line(req.headers()),
        "headers": headers,
        // As sent: order, HTTP/2 pseudo-headers, the connection's fingerprint.
        "wire": conn.view(&req),
    }))
}
