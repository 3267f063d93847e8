//! Two search engines' result pages, in the structure of the real ones as
//! others saved them in public repositories (our own text throughout):
//!
//! - DuckDuckGo's no-JavaScript endpoint (`/html/`, GET or POST `q`): the
//!   2020-26 page of `div#links` with `div.result.results_links.
//!   results_links_deep` results (ads first, marked `result--ad` with a
//!   `badge--ad` in the title; organic ones `web-result`), each link wrapped
//!   in `//duckduckgo.com/l/?uddg=<target>&rut=<hex>` (as GET answers in
//!   2026), an instant-answer box before them and the "Next" form after;
//!   the 2026 no-results result (`result--no-result`); and the "anomaly"
//!   page it answers a bot with (HTTP 202, `form#challenge-form`).
//!   After sap-nocops/duckduckgogo `client/test_data/antani.html`,
//!   danilo-aguiar-br/duckduckgo-search-cli
//!   `tests/fixtures/interstitial_cloudflare_anomaly_2026.html` and
//!   searxng's `engines/duckduckgo.py`.
//! - Bing (`/search?q=`): the 2026 page of `ol#b_results`: an ad block
//!   (`li.b_ad` > `div.sb_add`, its link through `/aclick?`, labelled
//!   `span.b_adSlug`), `li.b_algo` results
//!   whose site header (`div.b_tpcn`, `cite`) comes before the `h2` and
//!   whose links go through `/ck/a?!&&p=…&u=a1<base64url>&ntb=1`, an answer
//!   box (`li.b_ans`) between them, inline scripts that name captcha
//!   providers on every normal page, and the pager (`li.b_pag`); the
//!   no-results item (`li.b_no`); and the captcha it redirects a bot to
//!   (`/turing/captcha/challenge`). After CerebroCanibalus/argos-engine
//!   `tests/fixtures/bing.html` and searxng's `engines/bing.py`.
//!
//! Results point at the testbed's open-web site on `news.web.test` (the
//! same port), so a caller can fetch them. `POST /__control/mode
//! {"engines_blocked": ["duckduckgo"]}` makes an engine answer every query
//! with its block page; the query `nothing at all` has no results.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use base64::Engine as _;
use serde::Deserialize;

use super::state::Shared;

/// The query no engine finds anything for.
pub const NOTHING: &str = "nothing at all";

/// One result as an engine ranks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    /// Where it leads (the engine's page wraps it in its redirect).
    pub url: String,
    pub snippet: String,
    pub sponsored: bool,
}

/// The engines the testbed serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    DuckDuckGo,
    Bing,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::DuckDuckGo => "duckduckgo",
            Engine::Bing => "bing",
        }
    }
}

/// The open-web pages the results point at, in DuckDuckGo's order (Bing
/// ranks them otherwise).
const PAGES: [(&str, &str); 6] = [
    ("/site/article", "An article of the web test site"),
    ("/site/about", "About the web test site"),
    ("/site/blog/", "The web test blog"),
    ("/site/more", "More items, loaded on demand"),
    ("/site/long", "A long page of the web test site"),
    ("/site/", "The web test home page"),
];

/// What `engine` answers to `q`, in rank order: its ad first, then the
/// organic results; none for [`NOTHING`]. `port` is the testbed's.
pub fn hits(engine: Engine, q: &str, port: u16) -> Vec<Hit> {
    if q.trim().eq_ignore_ascii_case(NOTHING) || q.trim().is_empty() {
        return Vec::new();
    }
    let site = |path: &str| format!("https://news.web.test:{port}{path}");
    let order: Vec<usize> = match engine {
        Engine::DuckDuckGo => vec![0, 1, 2, 3, 4, 5],
        Engine::Bing => vec![1, 0, 3, 2, 5],
    };
    let mut out = vec![Hit {
        title: format!("Sponsored: shop for {q} at the test shop"),
        url: match engine {
            Engine::DuckDuckGo => format!(
                "https://duckduckgo.com/y.js?ad_domain=shop.web.test&ad_provider=testads&ad_type=txad&u3=shop.web.test%2F{}",
                enc(q)
            ),
            Engine::Bing => format!(
                "https://www.bing.com/aclick?ld=e8c0ffee&u={}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(format!("https://shop.web.test:{port}/ads?q={}", enc(q)))
            ),
        },
        snippet: format!("An advertisement for {q}; made up for the testbed."),
        sponsored: true,
    }];
    for (rank, i) in order.into_iter().enumerate() {
        let (path, title) = PAGES[i];
        out.push(Hit {
            title: format!("{title} ({})", engine.name()),
            url: site(path),
            snippet: format!(
                "Result {} of the {} results for {q}: a page about {}.",
                rank + 1,
                engine.name(),
                title.to_lowercase()
            ),
            sponsored: false,
        });
    }
    out
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// HTML-escaped text.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/html/", get(ddg_get).post(ddg_post))
        .route("/search", get(bing))
        .route("/turing/captcha/challenge", get(bing_captcha))
}

#[derive(Debug, Deserialize)]
struct Q {
    #[serde(default)]
    q: String,
}

fn blocked(shared: &Shared, engine: Engine) -> bool {
    shared
        .modes
        .lock()
        .engines_blocked
        .iter()
        .any(|e| e == engine.name())
}

fn port_of(req: &Request) -> u16 {
    req.headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .or_else(|| req.uri().port_u16())
        .unwrap_or(443)
}

async fn ddg_get(State(shared): State<Arc<Shared>>, Query(q): Query<Q>, req: Request) -> Response {
    ddg(&shared, &q.q, port_of(&req))
}

async fn ddg_post(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let port = port_of(&req);
    let body = axum::body::to_bytes(req.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let q = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    ddg(&shared, &q, port)
}

fn ddg(shared: &Shared, q: &str, port: u16) -> Response {
    if blocked(shared, Engine::DuckDuckGo) {
        return (StatusCode::ACCEPTED, Html(ddg_anomaly(q))).into_response();
    }
    Html(ddg_page(q, &hits(Engine::DuckDuckGo, q, port))).into_response()
}

/// DuckDuckGo's redirect around `target`.
fn ddg_wrap(target: &str) -> String {
    format!(
        "//duckduckgo.com/l/?uddg={}&amp;rut=5e2b9c0d41a7f3e6b8d2c4a1f0e9d7c6b5a4938271605f4e3d2c1b0a99887766",
        enc(target)
    )
}

fn ddg_page(q: &str, hits: &[Hit]) -> String {
    let qe = esc(q);
    let mut links = String::new();
    if !hits.is_empty() {
        links.push_str(&format!(
            "<div class=\"zci-wrapper\"><div class=\"zci\"><h1 class=\"zci__heading\"><a rel=\"nofollow\" href=\"https://news.web.test/site/about\">{qe}</a></h1><div class=\"zci__result\" id=\"zero_click_abstract\">A short instant answer about {qe}, written for the testbed.</div></div></div>\n"
        ));
    }
    for h in hits {
        let href = if h.sponsored {
            esc(&h.url)
        } else {
            ddg_wrap(&h.url)
        };
        let shown = h.url.split("://").nth(1).unwrap_or(&h.url);
        let (class, badge, icon) = if h.sponsored {
            (
                "result results_links results_links_deep result--ad ",
                "<div class=\"result__badge-wrap\"><button class=\"badge--ad\">Ad</button><div class=\"badge--ad__tooltip-wrap\"><div class=\"badge--ad__tooltip\">Ads are how the engine pays its way. <a class=\"badge--ad__tooltip-link\" href=\"https://duckduckgo.com/duckduckgo-help-pages/\">More</a></div></div></div>",
                String::new(),
            )
        } else {
            (
                "result results_links results_links_deep web-result ",
                "",
                format!(
                    "<span class=\"result__icon\"><a rel=\"nofollow\" href=\"{href}\"><img class=\"result__icon__img\" width=\"16\" height=\"16\" alt=\"\" src=\"//external-content.duckduckgo.com/ip3/news.web.test.ico\" name=\"i15\"></a></span>"
                ),
            )
        };
        links.push_str(&format!(
            "<div class=\"{class}\">\n  <div class=\"links_main links_deep result__body\"> <!-- This is the visible part -->\n    <h2 class=\"result__title\">\n      <a rel=\"nofollow\" class=\"result__a\" href=\"{href}\">{}</a>\n      {badge}\n    </h2>\n    <div class=\"result__extras\">\n      <div class=\"result__extras__url\">\n        {icon}\n        <a class=\"result__url\" href=\"{href}\">\n          {}\n        </a>\n      </div>\n    </div>\n    <a class=\"result__snippet\" href=\"{href}\">{}</a>\n    <div class=\"clear\"></div>\n  </div>\n</div>\n",
            esc(&h.title),
            esc(shown),
            esc(&h.snippet),
        ));
    }
    if hits.is_empty() {
        links.push_str(&format!(
            "<div class=\"result results_links results_links_deep web-result result--no-result\"><div class=\"links_main links_deep result__body\"><div class=\"no-results__container result__title\"><span class=\"no-results\"><div class=\"no-results__message\"><h1>Nothing turned up for <strong>\"{qe}\"</strong></h1></div></span></div></div></div>\n"
        ));
    } else {
        links.push_str(&format!(
            "<div class=\"nav-link\">\n<form action=\"/html/\" method=\"post\">\n<input type=\"submit\" class=\"btn btn--alt\" value=\"Next\" />\n<input type=\"hidden\" name=\"q\" value=\"{qe}\" />\n<input type=\"hidden\" name=\"s\" value=\"10\" />\n<input type=\"hidden\" name=\"nextParams\" value=\"\" />\n<input type=\"hidden\" name=\"v\" value=\"l\" />\n<input type=\"hidden\" name=\"o\" value=\"json\" />\n<input type=\"hidden\" name=\"dc\" value=\"12\" />\n<input type=\"hidden\" name=\"api\" value=\"d.js\" />\n<input type=\"hidden\" name=\"vqd\" value=\"4-12345678901234567890123456789012345678\" />\n<input name=\"kl\" value=\"wt-wt\" type=\"hidden\" />\n</form>\n</div>\n"
        ));
    }
    links.push_str("<div class=\"feedback-btn\"><a rel=\"nofollow\" href=\"//duckduckgo.com/feedback.html\">Feedback</a></div><div class=\"clear\"></div>\n");
    format!(
        "<!DOCTYPE html PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\" \"http://www.w3.org/TR/html4/loose.dtd\">\n<html>\n<head>\n<meta http-equiv=\"content-type\" content=\"text/html; charset=UTF-8\">\n<meta name=\"referrer\" content=\"origin\">\n<title>{qe} at DuckDuckGo</title>\n<link title=\"DuckDuckGo (HTML)\" type=\"application/opensearchdescription+xml\" rel=\"search\" href=\"//duckduckgo.com/opensearch_html_v2.xml\">\n</head>\n<body class=\"body--html\">\n<a name=\"top\" id=\"top\"></a>\n<form action=\"/html/\" method=\"post\"><input type=\"text\" name=\"state_hidden\" id=\"state_hidden\" /></form>\n<div>\n<div class=\"site-wrapper-border\"></div>\n<div id=\"header\" class=\"header cw header--html\">\n<a title=\"DuckDuckGo\" href=\"/html/\" class=\"header__logo-wrap\"><span class=\"header__logo\">DuckDuckGo</span></a>\n<form name=\"x\" class=\"header__form\" action=\"/html/\" method=\"post\">\n<div class=\"search search--header\"><input name=\"q\" autocomplete=\"off\" class=\"search__input\" id=\"search_form_input_homepage\" type=\"text\" value=\"{qe}\" /><input name=\"b\" id=\"search_button_homepage\" class=\"search__button search__button--html\" value=\"\" title=\"Search\" alt=\"Search\" type=\"submit\" /></div>\n<div class=\"frm__select\"><select name=\"kl\"><option value=\"\">All Regions</option><option value=\"uk-en\">United Kingdom</option></select></div>\n</form>\n</div>\n<!-- Web results are present -->\n<div>\n<div class=\"serp__results\">\n<div id=\"links\" class=\"results\">\n{links}</div>\n</div>\n</div>\n</div>\n<div id=\"bottom_spacing2\"></div>\n<img src=\"//duckduckgo.com/t/sl_h\"/>\n</body>\n</html>\n"
    )
}

fn ddg_anomaly(q: &str) -> String {
    let qe = enc(q);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en-US\">\n<head><meta charset=\"UTF-8\"><title>DuckDuckGo</title><link rel=\"canonical\" href=\"https://duckduckgo.com/\"></head>\n<body>\n<center id=\"lite_wrapper\">\n<a class=\"header-url\" href=\"/html/\"><span class=\"header\">DuckDuckGo</span></a>\n<iframe name=\"ifr\" width=\"0\" height=\"0\" border=\"0\" class=\"hidden\"></iframe>\n<form id=\"img-form\" action=\"//duckduckgo.com/anomaly.js?sv=html&cc=botnet&ti=1&gk=d4c1&p=a1b2-c3d4&q={qe}&o=x&r=y\" target=\"ifr\" method=\"POST\"></form>\n<form id=\"challenge-form\" action=\"//duckduckgo.com/anomaly.js?sv=html&cc=botnet&st=1&gk=d4c1&p=a1b2-c3d4&q={qe}\" method=\"POST\">\n<div class=\"anomaly-modal__mask\"><div class=\"anomaly-modal__modal\" data-testid=\"anomaly-modal\">\n<div class=\"anomaly-modal__title\">We think this browser is a robot.</div>\n<div class=\"anomaly-modal__description\">Too many searches came from here too quickly; a person can prove otherwise below.</div>\n<div class=\"anomaly-modal__instructions\">Tick every picture of a teapot.</div>\n<div class=\"anomaly-modal__puzzle-margins\"><div class=\"anomaly-modal__puzzle\">\n<div class=\"anomaly-modal__box\" data-index=\"0\"><label><input class=\"anomaly-modal__check\" type=\"checkbox\" name=\"image-check_0a1b\"><img class=\"anomaly-modal__image\" alt=\"\" src=\"../assets/anomaly/images/challenge/0a1b.jpg\"></label></div>\n</div></div>\n<div class=\"anomaly-modal__controls\"><button class=\"btn btn--primary anomaly-modal__submit js-anomaly-modal-submit\" name=\"challenge-submit\" form=\"challenge-form\">Submit</button></div>\n</div></div>\n</form>\n</center>\n</body>\n</html>\n"
    )
}

async fn bing(State(shared): State<Arc<Shared>>, Query(q): Query<Q>, req: Request) -> Response {
    if blocked(&shared, Engine::Bing) {
        return Redirect::to(&format!(
            "/turing/captcha/challenge?q={}&form=QBLH",
            enc(&q.q)
        ))
        .into_response();
    }
    Html(bing_page(&q.q, &hits(Engine::Bing, &q.q, port_of(&req)))).into_response()
}

/// Bing's tracking redirect around `target`.
fn bing_wrap(target: &str, n: usize) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(target);
    format!(
        "https://www.bing.com/ck/a?!&amp;&amp;p=7f3c2a1b9e8d{n:04}JmltdHM9MTc5MDIwODAwMA&amp;ptn=3&amp;ver=2&amp;hsh=4&amp;fclid=0a1b2c3d-0000-4000-8000-00000000000{n}&amp;u=a1{b64}&amp;ntb=1"
    )
}

fn bing_page(q: &str, hits: &[Hit]) -> String {
    let qe = esc(q);
    let mut results = String::new();
    let (ads, organic): (Vec<&Hit>, Vec<&Hit>) = hits.iter().partition(|h| h.sponsored);
    if !ads.is_empty() {
        results.push_str("<li class=\"b_ad b_adTop\"><ul>");
        for (i, h) in ads.iter().enumerate() {
            results.push_str(&format!(
                "<li class=\"b_adLastChild\"><div class=\"sb_add sb_adTA\"><h2><a href=\"{}\" h=\"ID=SERP,5001.{},Ads\">{}</a></h2><div class=\"b_caption\"><div class=\"b_attribution\"><cite>shop.web.test</cite></div><p>{} <span class=\"b_adSlug b_opttxt b_divdef\">Ad</span></p></div></div></li>",
                esc(&h.url),
                i + 1,
                esc(&h.title),
                esc(&h.snippet)
            ));
        }
        results.push_str("</ul></li>\n");
    }
    for (i, h) in organic.iter().enumerate() {
        let href = bing_wrap(&h.url, i);
        let shown = h.url.replace("/site/", " › site › ");
        results.push_str(&format!(
            "<li class=\"b_algo\" data-id iid=\"SERP.{}\"><link rel=\"stylesheet\" href=\"/rp/algo.css\" type=\"text/css\"/><div class=\"b_tpcn\"><a class=\"tilk\" aria-label=\"news.web.test\" href=\"{href}\" tabindex=\"-1\" h=\"ID=SERP,{}.1\"><div class=\"tptxt\"><div class=\"tptt\">news.web.test</div><div class=\"tpmeta\"><div class=\"b_attribution\" tabindex=\"-1\"><cite>{}</cite></div></div></div></a></div><h2 class=\"\"><a target=\"_blank\" href=\"{href}\" h=\"ID=SERP,{}.2\">{}</a></h2><div class=\"b_caption\"><p class=\"b_lineclamp2\" data-rslinkclamp-iid=\"\"><span class=\"news_dt\">Sep 17, 2026</span>&nbsp;&#0183;&#32;{}<a class=\"b_algoReadMore\" href=\"{href}\">Read more</a></p></div></li>\n",
            5332 + i,
            5126 + i,
            esc(&shown),
            5126 + i,
            esc(&h.title),
            esc(&h.snippet)
        ));
        if i == 1 {
            results.push_str(&format!(
                "<li class=\"b_ans b_mop\"><div class=\"rqnaContainer\"><h2>Questions people ask about {qe}</h2><div class=\"acf-accn-itm__hdr\">Is a made-up question a question?</div></div></li>\n"
            ));
        }
    }
    if hits.is_empty() {
        results.push_str(&format!(
            "<li class=\"b_no\"><h1>No results turned up for <strong>{qe}</strong></h1><ul><li><span>Check the spelling, or try other words.</span></li></ul></li>\n"
        ));
    } else {
        results.push_str(&format!(
            "<li class=\"b_pag\"><link rel=\"stylesheet\" href=\"/rp/pag.css\" type=\"text/css\"/><nav role=\"navigation\" aria-label=\"More results for {qe}\"><h4 class=\"b_hide\">Pagination</h4><ul class=\"sb_pagF\"><li><a class=\"sb_pagS sb_pagS_bp b_widePag sb_bp sb_pag_first\" aria-label=\"Page 1\">1</a></li><li><a class=\"b_widePag sb_bp\" aria-label=\"Page 2\" href=\"/search?q={}&amp;first=11&amp;FORM=PERE\">2</a></li><li><a class=\"sb_pagN sb_pagN_bp b_widePag sb_bp\" title=\"Next page\" aria-label=\"Next page\" href=\"/search?q={}&amp;first=11&amp;FORM=PORE\"><div class=\"sw_next\">Next</div></a></li></ul></nav></li>\n",
            enc(q),
            enc(q)
        ));
    }
    let count = if hits.is_empty() {
        String::new()
    } else {
        format!(
            "<span class=\"sb_count\">About {} results</span>",
            hits.len() * 1000
        )
    };
    format!(
        "<!DOCTYPE html><html dir=\"ltr\" lang=\"en\" xml:lang=\"en\" xmlns=\"http://www.w3.org/1999/xhtml\"><head><meta content=\"text/html; charset=utf-8\" http-equiv=\"content-type\" /><title>{qe} - Search</title><script type=\"text/javascript\">var _G={{ST:(new Date),Mkt:\"en-US\",IG:\"0A1B2C3D4E5F60718293A4B5C6D7E8F9\",adc:\"b_ad\"}};var PoWConfig={{allow:[\"challenges.cloudflare.com\",\"cf-turnstile-wrapper\",\"kaptcha\"],solver:\"PoWChallengeSolver\"}};</script></head><body><header id=\"b_header\" role=\"banner\"><form action=\"/search\" id=\"sb_form\" role=\"search\"><input class=\"sb_form_q\" id=\"sb_form_q\" name=\"q\" type=\"search\" value=\"{qe}\" /></form></header><div id=\"b_content\"><main aria-label=\"Search Results\"><link rel=\"stylesheet\" href=\"/rp/serp.css\" type=\"text/css\"/><div id=\"b_tween\"><div id=\"b_tween_searchResults\">{count}</div></div><ol id=\"b_results\" class=\"\">\n{results}</ol></main><aside aria-label=\"Additional Results\"><ol id=\"b_context\"></ol></aside></div><footer id=\"b_footer\"><a href=\"https://www.bing.com/ck/a?!&amp;&amp;p=00&amp;u=a1L3ByaXZhY3k&amp;ntb=1\">Privacy</a></footer></body></html>\n",
    )
}

async fn bing_captcha() -> Response {
    Html(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>One last step</title><script src=\"/rp/turnstile-loader.js\"></script></head><body><div id=\"b_captcha\"><h1>One last step</h1><p>Show us you are a person to go on searching.</p><iframe title=\"challenge\" src=\"about:blank\" class=\"cf-turnstile-wrapper\"></iframe></div></body></html>\n".to_string(),
    )
    .into_response()
}
