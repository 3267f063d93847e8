//! A shop no strategy knows (`/wshop/`), for the generic strategy: what
//! most shops publish, in the shapes they publish it.
//!
//! - `/wshop/p/{id}`: the product in JSON-LD (brand, SKU, GTIN, an offer, a
//!   rating summary, the first page's reviews, a breadcrumb trail), the
//!   same reviews shown as cards, and `<link rel="next">` when more follow;
//!   `?page=N` (N > 1) carries that page's reviews in microdata only.
//! - Ids starting `JS`: the reviews are drawn by a script from data the
//!   page holds encoded (a plain HTTP client sees only the summary, which
//!   counts them); the script adds the `rel=next` link.
//! - `DIFF`: the JSON-LD price is stale; the page shows another one.
//! - `EMPTY`: no reviews, no rating summary. `BAN`: a captcha page (403).
//!   `DD`: a bot-management vendor's interstitial (403). `LOGIN`: a
//!   redirect to the shop's sign-in page. `MEMBERS`: the page is a sign-in
//!   form.
//! - Ordinary pages carry a vendor's sensor script, as protected shops' do.
//!
//! The data is the shop's own deterministic data (`data.rs`), so tests know
//! every value; absolute URLs name the host the request was made to.

use axum::Router;
use axum::extract::{Path, Query, Request};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::data::{self, Review};
use super::html::esc;

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/wshop/p/{id}", get(product))
        .route("/wshop/account/login", get(sign_in))
}

#[derive(Deserialize)]
struct PageQuery {
    page: Option<usize>,
}

/// The price a `DIFF` item's page shows (its JSON-LD says the usual one).
pub fn shown_price_cents(item: &str) -> u64 {
    match item.starts_with("DIFF") {
        true => data::price_cents(item) + 250,
        false => data::price_cents(item),
    }
}

fn origin(req: &Request) -> String {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_else(|| "127.0.0.1".into());
    let tls = !matches!(
        req.extensions().get::<super::site::Tls>(),
        Some(super::site::Tls(false))
    );
    format!("{}://{host}", if tls { "https" } else { "http" })
}

async fn product(Path(id): Path<String>, Query(q): Query<PageQuery>, req: Request) -> Response {
    if !data::valid_item(&id) {
        return (
            StatusCode::NOT_FOUND,
            Html(String::from("<h1>Not found</h1>")),
        )
            .into_response();
    }
    if data::is_banned(&id) {
        return (StatusCode::FORBIDDEN, Html(super::html::captcha())).into_response();
    }
    if data::is_login_wall(&id) {
        return Redirect::to(&format!("/wshop/account/login?return=/wshop/p/{id}")).into_response();
    }
    if id.starts_with("DD") {
        return (StatusCode::FORBIDDEN, Html(bot_wall())).into_response();
    }
    if id.starts_with("MEMBERS") {
        return Html(members_only()).into_response();
    }
    let base = format!("{}/wshop/p/{id}", origin(&req));
    let n = q.page.unwrap_or(1).max(1);
    Html(match (n, id.starts_with("JS")) {
        (_, true) => scripted(&id, n, &base),
        (1, false) => first_page(&id, &base),
        _ => later_page(&id, n, &base),
    })
    .into_response()
}

async fn sign_in() -> Html<String> {
    Html(layout(
        "Sign in | Corner Shop",
        "<h1>Sign in to your account</h1>\n<form method=\"post\" action=\"/wshop/account/login\">\
         <input type=\"email\" name=\"email\"><input type=\"password\" name=\"password\">\
         <button>Sign in</button></form>",
        "",
    ))
}

/// A bot-management vendor's interstitial, as DataDome's is built (its
/// settings in a script, naming the vendor's captcha host; nothing here
/// loads it).
fn bot_wall() -> String {
    "<!doctype html><html><head><title>shop.web.test</title></head><body>\
     <script>var dd={'rt':'c','cid':'AHrlqAAAAAMA','hsh':'2211F522','host':'geo.captcha-delivery.com'}</script>\
     <p>Please enable JS and disable any ad blocker</p></body></html>"
        .into()
}

/// A members-only product: the page itself is a sign-in form (no redirect,
/// no sign-in path; its title says what it is).
fn members_only() -> String {
    layout(
        "Members: sign in to continue",
        "<main><h1>Members only</h1><form method=\"post\" action=\"/wshop/account/login\">\
         <input type=\"email\" name=\"email\"><input type=\"password\" name=\"password\"></form></main>",
        "",
    )
}

fn layout(title: &str, body: &str, head: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>{head}</head>\n<body>\n\
         <header><a href=\"/wshop/\">Corner Shop</a> <form class=\"mini-login\" hidden>\
         <input type=\"password\" name=\"pw\"></form></header>\n{body}\n</body></html>\n",
        esc(title)
    )
}

fn dollars(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// The product's JSON-LD, with `reviews` inside it.
fn json_ld(id: &str, base: &str, reviews: &[Review]) -> String {
    let total = data::review_count(id);
    let mut product = json!({
        "@context": "https://schema.org",
        "@type": "Product",
        "@id": format!("{base}#product"),
        "name": data::product_name(id),
        "brand": {"@type": "Brand", "name": "Corner Works"},
        "sku": format!("CW-{id}"),
        "gtin13": format!("{:013}", data::price_cents(id) * 7919),
        "image": [format!("{base}/front.jpg")],
        "url": base,
        "offers": {
            "@type": "Offer",
            "price": dollars(data::price_cents(id)),
            "priceCurrency": "USD",
            "availability": "https://schema.org/InStock",
        },
        "review": reviews.iter().map(|r| json!({
            "@type": "Review",
            "author": {"@type": "Person", "name": r.author},
            "datePublished": r.date,
            "name": r.title,
            "reviewBody": r.body,
            "reviewRating": {"@type": "Rating", "ratingValue": r.rating, "bestRating": 5},
        })).collect::<Vec<_>>(),
    });
    if total > 0 {
        product["aggregateRating"] = json!({
            "@type": "AggregateRating",
            "ratingValue": data::average_rating(id),
            "reviewCount": total,
        });
    }
    let crumbs = json!({
        "@context": "https://schema.org",
        "@type": "BreadcrumbList",
        "itemListElement": [
            {"@type": "ListItem", "position": 1, "name": "Home", "item": "/wshop/"},
            {"@type": "ListItem", "position": 2, "name": "Kitchen"},
        ],
    });
    // `</` never closes the script early: JSON may escape its slash.
    let block = |v: serde_json::Value| {
        format!(
            "<script type=\"application/ld+json\">{}</script>\n",
            v.to_string().replace("</", "<\\/")
        )
    };
    block(product) + &block(crumbs)
}

/// The visible summary: name, price, rating and how many reviews.
fn summary(id: &str) -> String {
    let total = data::review_count(id);
    let rated = match total {
        0 => "<p class=\"no-reviews\">No reviews yet.</p>".to_string(),
        n => format!(
            "<p class=\"rating-summary\">{:.1} out of 5 · <a href=\"#reviews\">{n} reviews</a></p>",
            data::average_rating(id)
        ),
    };
    format!(
        "<main><h1 class=\"product-title\">{}</h1>\n<div class=\"price-box\"><span class=\"price\">${}</span></div>\n{rated}\n",
        esc(&data::product_name(id)),
        dollars(shown_price_cents(id))
    )
}

fn card(r: &Review) -> String {
    format!(
        "<article class=\"review-card\" id=\"review-{id}\">\n  <div class=\"stars\" aria-label=\"{rating} out of 5 stars\"></div>\n  \
         <span class=\"reviewer\">By {author}</span> <time datetime=\"{date}\">{date}</time>\n  \
         <h3>{title}</h3>\n  <p class=\"review-text\">{body}</p>\n{verified}</article>\n",
        id = r.id,
        rating = r.rating,
        author = esc(&r.author),
        date = r.date,
        title = esc(&r.title),
        body = esc(&r.body),
        verified = match r.verified {
            true => "  <span class=\"verified-buyer\">Verified buyer</span>\n",
            false => "",
        },
    )
}

fn next_link(id: &str, n: usize) -> String {
    let (_, more) = data::page(id, n);
    match more {
        true => format!("<link rel=\"next\" href=\"/wshop/p/{id}?page={}\">", n + 1),
        false => String::new(),
    }
}

fn first_page(id: &str, base: &str) -> String {
    let (reviews, _) = data::page(id, 1);
    let cards: String = reviews.iter().map(card).collect();
    layout(
        &data::product_name(id),
        &format!(
            "{}<section id=\"reviews\">\n{cards}</section></main>",
            summary(id)
        ),
        // Bot-management sensors sit on ordinary pages too (Imperva's).
        &(json_ld(id, base, &reviews)
            + &next_link(id, 1)
            + "<script src=\"/_Incapsula_Resource?SWJIYLWA=719d34d31c8e3a6e\" async></script>"),
    )
}

/// Page `n` of the reviews, in microdata.
fn later_page(id: &str, n: usize, base: &str) -> String {
    let (reviews, _) = data::page(id, n);
    let items: String = reviews
        .iter()
        .map(|r| {
            format!(
                "<li itemprop=\"review\" itemscope itemtype=\"https://schema.org/Review\">\n  \
                 <span itemprop=\"author\">{author}</span>, <meta itemprop=\"datePublished\" content=\"{date}\">{date}\n  \
                 <span itemprop=\"reviewRating\" itemscope itemtype=\"https://schema.org/Rating\">\
                 <span itemprop=\"ratingValue\">{rating}</span>/<span itemprop=\"bestRating\">5</span></span>\n  \
                 <strong itemprop=\"name\">{title}</strong>\n  <p itemprop=\"reviewBody\">{body}</p>\n</li>\n",
                author = esc(&r.author),
                date = r.date,
                rating = r.rating,
                title = esc(&r.title),
                body = esc(&r.body),
            )
        })
        .collect();
    layout(
        &format!("Reviews, page {n}: {}", data::product_name(id)),
        &format!(
            "<main itemscope itemtype=\"https://schema.org/Product\" itemid=\"{base}#product\">\n\
             <h1 itemprop=\"name\">{}</h1>\n<ol class=\"review-list\">\n{items}</ol></main>",
            esc(&data::product_name(id))
        ),
        &next_link(id, n),
    )
}

/// Reviews a script draws: the static page holds them encoded.
fn scripted(id: &str, n: usize, base: &str) -> String {
    let (reviews, more) = data::page(id, n);
    let payload =
        json!({"reviews": reviews, "next": more.then(|| format!("/wshop/p/{id}?page={}", n + 1))});
    let data = super::html::hidden_json(&payload);
    layout(
        &data::product_name(id),
        &format!(
            r#"{}<section id="reviews" data-state="loading">Loading reviews…</section></main>
<script>
(function () {{
  {data}
  var root = document.getElementById("reviews");
  root.textContent = "";
  data.reviews.forEach(function (r) {{
    var a = document.createElement("article"); a.className = "review-card"; a.id = "review-" + r.id;
    var s = document.createElement("div"); s.className = "stars"; s.setAttribute("aria-label", r.rating + " out of 5 stars"); a.appendChild(s);
    var who = document.createElement("span"); who.className = "reviewer"; who.textContent = "By " + r.author; a.appendChild(who);
    var t = document.createElement("time"); t.setAttribute("datetime", r.date); t.textContent = r.date; a.appendChild(t);
    var h = document.createElement("h3"); h.textContent = r.title; a.appendChild(h);
    var p = document.createElement("p"); p.className = "review-text"; p.textContent = r.body; a.appendChild(p);
    if (r.verified) {{ var v = document.createElement("span"); v.className = "verified-buyer"; v.textContent = "Verified buyer"; a.appendChild(v); }}
    root.appendChild(a);
  }});
  if (data.next) {{ var l = document.createElement("a"); l.rel = "next"; l.href = data.next; l.textContent = "More reviews"; root.appendChild(l); }}
  root.setAttribute("data-state", "ready");
}})();
</script>"#,
            summary(id)
        ),
        &json_ld(id, base, &[]),
    )
}
