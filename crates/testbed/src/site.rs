//! A small site of the open web, for `scrape`, `map` and `crawl`: a noisy
//! article (nav, header, footer, ads and a cookie banner around it), a
//! multi-level blog, `robots.txt` rules, a sitemap index pointing at a
//! gzipped sitemap and a plain one, a search form, a "load more" button
//! only a click reveals, and a page with an image and relative links.
//! Absolute URLs name the host the request was made to, so the site works
//! under any name (`security.resolve` maps the `*.web.test` stand-ins here).

use std::io::Write;

use axum::Router;
use axum::extract::{Query, Request};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

/// Pages every sitemap lists, in order.
pub const SITEMAP_PAGES: &[&str] = &[
    "/site/",
    "/site/about",
    "/site/article",
    "/site/search",
    "/site/more",
];
/// The blog's sitemap.
pub const SITEMAP_BLOG: &[&str] = &["/site/blog/", "/site/blog/post-1", "/site/blog/post-2"];
/// Searchable titles of `/site/search`.
pub const CATALOG: &[&str] = &[
    "Blue kettle",
    "Blue teapot",
    "Red kettle",
    "Green mug",
    "Blue mug",
];
/// Items `/site/more` shows at first, and those "Load more" adds.
pub const MORE_FIRST: &[&str] = &["Item 1", "Item 2", "Item 3"];
pub const MORE_LATER: &[&str] = &["Item 4", "Item 5", "Item 6"];

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/robots.txt", get(robots))
        .route("/sitemap.xml", get(sitemap_index))
        .route("/sitemaps/pages.xml.gz", get(sitemap_pages))
        .route("/sitemaps/blog.xml", get(sitemap_blog))
        .route("/site/", get(|| async { Html(home()) }))
        .route("/site/about", get(|| async { Html(about()) }))
        .route("/site/article", get(|| async { Html(article()) }))
        .route("/site/search", get(search))
        .route("/site/more", get(|| async { Html(more()) }))
        .route("/site/long", get(|| async { Html(long()) }))
        .route("/site/controls", get(|| async { Html(controls()) }))
        .route("/site/img/chart.png", get(chart))
        .route("/site/blog/", get(|| async { Html(blog()) }))
        .route("/site/blog/{post}", get(post))
        .route("/site/private/{page}", get(private))
}

/// `host[:port]` the request named (HTTP/2's `:authority` or `Host`).
fn authority(req: &Request) -> String {
    req.uri()
        .authority()
        .map(|a| a.to_string())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "127.0.0.1".into())
}

/// Whether the request came over TLS (set by the router's logging layer:
/// both listeners share the router).
#[derive(Debug, Clone, Copy)]
pub struct Tls(pub bool);

fn scheme(req: &Request) -> &'static str {
    match req.extensions().get::<Tls>() {
        Some(Tls(false)) => "http",
        _ => "https",
    }
}

async fn robots(req: Request) -> Response {
    let origin = format!("{}://{}", scheme(&req), authority(&req));
    (
        [(header::CONTENT_TYPE, "text/plain")],
        format!(
            "# The testbed's open-web site\nUser-agent: *\nDisallow: /site/private/\nAllow: /site/private/open\n\nUser-agent: grumpybot\nDisallow: /\n\nSitemap: {origin}/sitemap.xml\n"
        ),
    )
        .into_response()
}

fn xml(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/xml")], body).into_response()
}

async fn sitemap_index(req: Request) -> Response {
    let origin = format!("{}://{}", scheme(&req), authority(&req));
    xml(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n  <sitemap><loc>{origin}/sitemaps/pages.xml.gz</loc></sitemap>\n  <sitemap><loc>{origin}/sitemaps/blog.xml</loc></sitemap>\n</sitemapindex>\n"
    ))
}

fn urlset(origin: &str, paths: &[&str]) -> String {
    let urls: String = (paths.iter())
        .map(|p| format!("  <url><loc>{origin}{p}</loc><lastmod>2026-11-30</lastmod></url>\n"))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n{urls}</urlset>\n"
    )
}

async fn sitemap_pages(req: Request) -> Response {
    let origin = format!("{}://{}", scheme(&req), authority(&req));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let written = gz
        .write_all(urlset(&origin, SITEMAP_PAGES).as_bytes())
        .and_then(|()| gz.finish());
    match written {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/gzip")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn sitemap_blog(req: Request) -> Response {
    let origin = format!("{}://{}", scheme(&req), authority(&req));
    xml(urlset(&origin, SITEMAP_BLOG))
}

fn page(title: &str, main: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>body{{font-family:sans-serif;margin:0}} header,footer{{background:#eee;padding:8px}}</style></head>\n<body>\n<header><nav class=\"site-nav\"><a href=\"/site/\">Home</a> <a href=\"/site/blog/\">Blog</a> <a href=\"/site/about\">About us</a></nav></header>\n{main}\n<footer><p>Footer: © 2026 Web Test Ltd. <a href=\"/site/about#legal\">Legal notice</a></p></footer>\n</body></html>\n"
    )
}

fn home() -> String {
    page(
        "Web test home",
        "<main><h1>Web test</h1><ul>\n<li><a href=\"/site/about\">About</a></li>\n<li><a href=\"blog/\">Blog</a></li>\n<li><a href=\"article\">An article</a></li>\n<li><a href=\"/site/search\">Search</a></li>\n<li><a href=\"/site/more\">More items</a></li>\n<li><a href=\"/site/private/secret\">Private</a></li>\n<li><a href=\"/site/private/open\">Open, though under private</a></li>\n<li><a href=\"https://elsewhere.test/away\">Another site</a></li>\n<li><a href=\"//blog.news.web.test/hello\">Our other blog</a></li>\n<li><a href=\"mailto:team@web.test\">Mail us</a></li>\n<li><a href=\"/site/about?ref=home#team\">The team</a></li>\n</ul></main>",
    )
}

fn about() -> String {
    page(
        "About us",
        "<main><h1>About us</h1><p>We test the web.</p><p><a href=\"/site/\">Back home</a></p></main>",
    )
}

/// The article among the noise: the only `<article>`, no `<main>`.
fn article() -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Kettles compared</title></head>\n<body>\n\
<div class=\"cookie-banner\" id=\"cookie-consent\">We use cookies. <button>Accept all cookies</button></div>\n\
<header class=\"masthead\"><nav><a href=\"/site/\">Home</a> | <a href=\"/site/blog/\">Blog</a> | <a href=\"/site/about\">About us</a></nav></header>\n\
<aside class=\"ad-banner sidebar\"><p>ADVERTISEMENT: Buy cheap kettles now!</p></aside>\n\
<div class=\"layout\">\n<article>\n<h1>Kettles compared</h1>\n\
<p>{P1}</p>\n\
<p>Read <a href=\"about\">who we are</a> and <a href=\"../site/blog/post-1\">the first post</a>.</p>\n\
<img src=\"img/chart.png\" alt=\"Boiling times chart\">\n\
<p>{P2}</p>\n\
</article>\n\
<div class=\"share-buttons social\"><a href=\"https://elsewhere.test/share\">Share this</a></div>\n\
</div>\n\
<footer id=\"site-footer\"><p>Footer: © 2026 Web Test Ltd. All rights reserved.</p><nav><a href=\"/site/about#legal\">Legal notice</a></nav></footer>\n\
</body></html>\n",
        P1 = ARTICLE_P1,
        P2 = ARTICLE_P2,
    )
}

/// The article's two paragraphs (tests look for them).
pub const ARTICLE_P1: &str =
    "We boiled a litre of water in six kettles and timed each one three times.";
pub const ARTICLE_P2: &str = "The steel kettle won by forty seconds; the glass one came last.";

#[derive(Deserialize)]
struct SearchQuery {
    q: Option<String>,
}

async fn search(Query(q): Query<SearchQuery>) -> Response {
    let form = "<form id=\"search\" action=\"/site/search\" method=\"get\" role=\"search\">\
        <label for=\"q\">Search the catalog</label> <input id=\"q\" name=\"q\" type=\"search\" placeholder=\"Search\"> \
        <label for=\"sort\">Sort by</label> <select id=\"sort\" name=\"sort\"><option value=\"name\">Name</option>\
        <option value=\"price\">Price</option></select> <button type=\"submit\">Search</button></form>";
    let term = q.q.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let results = match term {
        None => String::new(),
        Some(term) => {
            let hits: Vec<&&str> = (CATALOG.iter())
                .filter(|t| t.to_lowercase().contains(&term.to_lowercase()))
                .collect();
            let items: String = (hits.iter())
                .map(|t| format!("<li class=\"result\">{t}</li>"))
                .collect();
            let shown = term.replace('&', "&amp;").replace('<', "&lt;");
            format!(
                "<h2>{} results for “{shown}”</h2><ul id=\"results\">{items}</ul>",
                hits.len()
            )
        }
    };
    let html = Html(page(
        "Search",
        &format!("<main><h1>Search</h1>{form}{results}</main>"),
    ));
    // Like a real site, it remembers the last search in a cookie.
    match term.filter(|t| t.chars().all(|c| c.is_ascii_alphanumeric())) {
        Some(t) => (
            [(
                header::SET_COOKIE,
                format!("last_search={t}; Path=/; Max-Age=3600"),
            )],
            html,
        )
            .into_response(),
        None => html.into_response(),
    }
}

fn more() -> String {
    let first: String = MORE_FIRST
        .iter()
        .map(|t| format!("<li class=\"item\">{t}</li>"))
        .collect();
    let later = serde_json::to_string(MORE_LATER).unwrap_or_else(|_| "[]".into());
    page(
        "More items",
        &format!(
            "<main><h1>Items</h1><ul id=\"items\">{first}</ul><button id=\"load-more\" type=\"button\">Load more</button>\n<script>\nconst later = {later};\ndocument.getElementById('load-more').addEventListener('click', () => {{\n  const ul = document.getElementById('items');\n  for (const t of later) {{ const li = document.createElement('li'); li.className = 'item'; li.textContent = t; ul.appendChild(li); }}\n  document.getElementById('load-more').remove();\n}});\n</script></main>"
        ),
    )
}

/// Height of `/site/long`'s content, in CSS pixels.
pub const LONG_HEIGHT: u32 = 2400;

/// A page taller than any viewport (full-page screenshots).
fn long() -> String {
    page(
        "A long page",
        &format!(
            "<main><h1>Long</h1><div style=\"height:{LONG_HEIGHT}px;background:#369\">tall</div><p>The end.</p></main>"
        ),
    )
}

/// Interactive elements on `/site/controls`.
pub const CONTROLS: usize = 5_000;

/// A page of [`CONTROLS`] links, buttons, fields and checkboxes (`Item
/// link 0`, `Item button 1`, `Item field 2`, `Item box 3`, ...), in
/// groups of 100 (`section#group-N`) with a note of text every ten, and a
/// button that adds `New button N` to `#added` (what changed, for
/// snapshots of the changes only).
fn controls() -> String {
    let mut main = String::from(
        "<main><h1>Controls</h1><button id=\"grow\" onclick=\"const b=document.createElement('button');b.textContent='New button '+(document.querySelectorAll('#added button').length+1);document.getElementById('added').appendChild(b)\">Add a row</button><div id=\"added\"></div>",
    );
    for g in 0..CONTROLS / 100 {
        main.push_str(&format!("<section id=\"group-{g}\"><h2>Group {g}</h2>"));
        for i in g * 100..(g + 1) * 100 {
            if i % 10 == 0 {
                main.push_str(&format!("<p>Note on items from {i}</p>"));
            }
            main.push_str(&match i % 4 {
                0 => format!("<a href=\"/site/about#i{i}\">Item link {i}</a> "),
                1 => format!("<button type=\"button\">Item button {i}</button> "),
                2 => format!("<label>Item field {i} <input name=\"f{i}\"></label> "),
                _ => {
                    format!("<label><input type=\"checkbox\" name=\"c{i}\"> Item box {i}</label> ")
                }
            });
        }
        main.push_str("</section>");
    }
    main.push_str("</main>");
    page("Controls", &main)
}

fn blog() -> String {
    page(
        "Blog",
        "<main><h1>Blog</h1><ul><li><a href=\"post-1\">Post one</a></li><li><a href=\"post-2\">Post two</a></li><li><a href=\"post-3\">Post three</a></li></ul></main>",
    )
}

async fn post(axum::extract::Path(post): axum::extract::Path<String>) -> Response {
    match post.as_str() {
        "post-1" | "post-2" | "post-3" => Html(page(
            &format!("Blog {post}"),
            &format!(
                "<main><h1>Blog {post}</h1><p>Words of {post}.</p><a href=\"archive\">Archive</a></main>"
            ),
        ))
        .into_response(),
        "archive" => Html(page(
            "Archive",
            "<main><h1>Archive</h1><p>Old posts.</p><a href=\"post-1\">Post one</a></main>",
        ))
        .into_response(),
        _ => (StatusCode::NOT_FOUND, Html(page("Not found", "<main>No such post</main>")))
            .into_response(),
    }
}

async fn private(axum::extract::Path(name): axum::extract::Path<String>) -> Html<String> {
    Html(page(
        &format!("Private {name}"),
        &format!("<main><h1>Private {name}</h1><a href=\"/site/\">Home</a></main>"),
    ))
}

/// A 64×48 PNG, one colour.
async fn chart() -> Response {
    ([(header::CONTENT_TYPE, "image/png")], png(64, 48)).into_response()
}

/// An RGB PNG of `w`×`h` pixels.
pub fn png(w: u32, h: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    }
    // Each row: filter byte 0, then the pixels.
    let row: Vec<u8> = std::iter::once(0u8)
        .chain([0x33, 0x66, 0x99].repeat(w as usize))
        .collect();
    let raw = row.repeat(h as usize);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    let idat = z
        .write_all(&raw)
        .and_then(|()| z.finish())
        .unwrap_or_default();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}
