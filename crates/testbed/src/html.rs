//! The testbed's pages.

use super::data::{self, Review};

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title></head>\n<body>\n{body}\n</body></html>\n",
        esc(title)
    )
}

pub fn home() -> String {
    let items = ["B0TESTA1", "B0TESTB2", "B0TESTC3", "EMPTY01", "LOGIN01"];
    let links: String = items
        .iter()
        .map(|i| {
            format!(
                "<li><a href=\"/product/{i}\">{}</a></li>\n",
                esc(&data::product_name(i))
            )
        })
        .collect();
    page(
        "Testbed Shop",
        &format!("<h1>Testbed Shop</h1>\n<ul class=\"products\">\n{links}</ul>"),
    )
}

/// One review as an HTML fragment (also used inside AJAX JSON).
pub fn review_fragment(r: &Review) -> String {
    format!(
        "<div class=\"review\" data-review-id=\"{id}\">\n  <span class=\"review-author\">{author}</span>\n  <span class=\"review-rating\">{rating}.0 out of 5 stars</span>\n  <a class=\"review-title\">{title}</a>\n  <span class=\"review-date\">Reviewed on {date}</span>\n  {verified}<span class=\"review-body\">{body}</span>\n  <span class=\"review-helpful\">{helpful} people found this helpful</span>\n</div>\n",
        id = r.id,
        author = esc(&r.author),
        rating = r.rating,
        title = esc(&r.title),
        date = r.date,
        verified = if r.verified {
            "<span class=\"review-verified\">Verified Purchase</span>\n  "
        } else {
            ""
        },
        body = esc(&r.body),
        helpful = r.helpful,
    )
}

pub fn product(item: &str) -> String {
    let (first, _) = data::page(item, 1);
    let total = data::review_count(item);
    let reviews: String = first.iter().take(3).map(review_fragment).collect();
    let empty = if total == 0 {
        "<div class=\"no-reviews\">No customer reviews yet</div>\n"
    } else {
        ""
    };
    page(
        &data::product_name(item),
        &format!(
            "<div id=\"product\" data-item=\"{item}\">\n<h1 id=\"productTitle\">{name}</h1>\n<span class=\"price\">${dollars}.{cents:02}</span>\n<span id=\"acrCustomerReviewText\">{total} ratings</span>\n<span class=\"average-rating\">{avg:.1} out of 5</span>\n</div>\n<div id=\"reviews-medley\">\n{empty}{reviews}</div>\n<a class=\"see-all-reviews\" href=\"/product-reviews/{item}?page=1\">See all reviews</a>",
            name = esc(&data::product_name(item)),
            dollars = data::price_cents(item) / 100,
            cents = data::price_cents(item) % 100,
            avg = data::average_rating(item),
        ),
    )
}

pub fn reviews(item: &str, n: usize) -> String {
    let (list, more) = data::page(item, n);
    let total = data::review_count(item);
    let body: String = list.iter().map(review_fragment).collect();
    let empty = if total == 0 {
        "<div class=\"no-reviews\">No customer reviews yet</div>\n"
    } else {
        ""
    };
    let next = if more {
        format!(
            "<ul class=\"a-pagination\"><li class=\"a-last\"><a href=\"/product-reviews/{item}?page={}\">Next page</a></li></ul>",
            n + 1
        )
    } else {
        "<ul class=\"a-pagination\"><li class=\"a-disabled a-last\">Next page</li></ul>".into()
    };
    page(
        &format!("Reviews: {}", data::product_name(item)),
        &format!(
            "<h1>Customer reviews</h1>\n<div id=\"cm_cr-review_list\" data-total=\"{total}\" data-page=\"{n}\">\n{empty}{body}</div>\n{next}"
        ),
    )
}

/// A script statement that sets `var data` to `value`, held in the page
/// as reversed hex, so that no text of it is visible to a plain HTTP
/// client: only a script that runs gets it.
pub fn hidden_json(value: &serde_json::Value) -> String {
    let blob: String = hex::encode(value.to_string().as_bytes())
        .chars()
        .rev()
        .collect();
    format!(
        "var hex = \"{blob}\".split(\"\").reverse().join(\"\");\n  \
         var bytes = new Uint8Array(hex.length / 2);\n  \
         for (var i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.substr(i * 2, 2), 16);\n  \
         var data = JSON.parse(new TextDecoder().decode(bytes));"
    )
}

/// Reviews rendered by JavaScript only: the static HTML holds an encoded blob.
pub fn js_reviews(item: &str, n: usize) -> String {
    let (list, more) = data::page(item, n);
    let data = hidden_json(
        &serde_json::json!({"reviews": list, "more": more, "total": data::review_count(item)}),
    );
    page(
        &format!("Reviews: {}", data::product_name(item)),
        &format!(
            r#"<h1>Customer reviews</h1>
<div id="reviews" data-state="loading">Loading reviews…</div>
<script>
(function () {{
  {data}
  var root = document.getElementById("reviews");
  root.textContent = "";
  if (data.total === 0) {{ root.innerHTML = '<div class="no-reviews">No customer reviews yet</div>'; }}
  data.reviews.forEach(function (r) {{
    var d = document.createElement("div");
    d.className = "review"; d.setAttribute("data-review-id", r.id);
    var fields = [["review-author", r.author], ["review-rating", r.rating + ".0 out of 5 stars"], ["review-title", r.title],
     ["review-date", "Reviewed on " + r.date]];
    if (r.verified) fields.push(["review-verified", "Verified Purchase"]);
    fields.push(["review-body", r.body]);
    fields.push(["review-helpful", r.helpful + " people found this helpful"]);
    fields.forEach(function (f) {{
      var s = document.createElement("span"); s.className = f[0]; s.textContent = f[1]; d.appendChild(s);
    }});
    root.appendChild(d);
  }});
  if (data.more) {{
    var nav = document.createElement("ul"); nav.className = "a-pagination";
    nav.innerHTML = '<li class="a-last"><a href="?page=' + (data.page + 1) + '">Next page</a></li>';
    root.parentNode.appendChild(nav);
  }}
  root.setAttribute("data-state", "ready");
}})();
</script>"#
        ),
    )
}

/// A page with one link, `a#go`, to `to`.
pub fn link(to: &str) -> String {
    page(
        "A link",
        &format!(
            "<p>Follow this: <a id=\"go\" href=\"{}\">go on</a></p>",
            esc(to)
        ),
    )
}

pub fn captcha() -> String {
    page(
        "Robot Check",
        "<h4>Enter the characters you see below</h4>\n<p>Sorry, we just need to make sure you're not a robot.</p>\n<form method=\"get\" action=\"/errors/validateCaptcha\" name=\"captcha\">\n<img src=\"/captcha.jpg\"><input type=\"text\" name=\"field-keywords\"></form>",
    )
}

/// The robot check a person solves: the captcha page's structure, with
/// the characters to type shown as text and the field focused.
pub fn robot_check(code: &str, back: &str) -> String {
    page(
        "Robot Check",
        &format!(
            "<h4>Enter the characters you see below</h4>\n<p>Sorry, we just need to make sure you're not a robot.</p>\n\
             <p class=\"robot-code\" style=\"font: bold 32px monospace; letter-spacing: .3em\">{}</p>\n\
             <form method=\"get\" action=\"/errors/validateCaptcha\" name=\"captcha\">\n\
             <input type=\"hidden\" name=\"return_to\" value=\"{}\">\n\
             <input type=\"text\" name=\"field-keywords\" autofocus autocomplete=\"off\" \
             style=\"position: absolute; left: 100px; top: 200px; width: 300px; height: 40px; font-size: 24px\">\n\
             <button type=\"submit\">Continue shopping</button></form>",
            esc(code),
            esc(back)
        ),
    )
}

pub fn blocked(ja4: &str) -> String {
    page(
        "Access denied",
        &format!(
            "<h1 class=\"tb-blocked\">Access denied</h1>\n<p>Automated client detected. Fingerprint: <code>{}</code></p>",
            esc(ja4)
        ),
    )
}

pub fn signin(return_to: &str) -> String {
    page(
        "Sign in",
        &format!(
            "<h1>Sign in</h1>\n<form name=\"signIn\" method=\"post\" action=\"/ap/signin\"><input type=\"hidden\" name=\"return_to\" value=\"{}\"><input type=\"email\" name=\"email\"><input type=\"password\" name=\"password\"></form>",
            esc(return_to)
        ),
    )
}

/// The shop's own sign-in form (`/signin`); `failed` after wrong credentials.
pub fn account_form(return_to: &str, failed: bool) -> String {
    let note = if failed {
        "<p id=\"signin-error\" class=\"error\">Wrong email or password.</p>\n"
    } else {
        ""
    };
    page(
        "Sign in",
        &format!(
            "<h1>Sign in</h1>\n{note}<form id=\"signin\" method=\"post\" action=\"/signin\">\n\
             <input type=\"hidden\" name=\"return_to\" value=\"{}\">\n\
             <label>Email <input id=\"email\" type=\"email\" name=\"email\" autocomplete=\"username\"></label>\n\
             <label>Password <input id=\"password\" type=\"password\" name=\"password\" autocomplete=\"current-password\"></label>\n\
             <button id=\"signin-submit\" type=\"submit\">Sign in</button>\n</form>",
            esc(return_to)
        ),
    )
}

/// The account page of a signed-in visitor.
pub fn account_page(name: &str) -> String {
    page(
        "Your account",
        &format!("<h1 id=\"account\">Your account, {}</h1>", esc(name)),
    )
}

/// The JS challenge interstitial: a browser runs the script, gets the clearance
/// cookie and reloads; a plain HTTP client stays here.
/// The JS challenge. With `verify` (consistency mode) the script also makes
/// one XHR with the new cookie, the way the shop's own AJAX calls look, so
/// the browser's XHR is bound to the clearance before anything else uses it.
pub fn challenge(nonce: &str, rounds: u32, verify: bool) -> String {
    let next = if verify {
        r#"fetch("/challenge/verify", {
    method: "POST",
    headers: { "x-requested-with": "XMLHttpRequest", "accept": "application/json", "content-type": "application/x-www-form-urlencoded" },
    body: "nonce=" + n
  }).then(function () { location.reload(); }, function () { location.reload(); });"#
    } else {
        "setTimeout(function () { location.reload(); }, 50);"
    };
    page(
        "Just a moment...",
        &format!(
            r#"<div id="tb-challenge"><h1>Checking your browser before accessing the shop.</h1></div>
<script>
(function () {{
  var n = "{nonce}", h = 0;
  for (var i = 0; i < {rounds}; i++) {{ h = (Math.imul(h, 31) + n.charCodeAt(i % n.length) + i) >>> 0; }}
  document.cookie = "tb_clearance=" + n + "." + h.toString(16) + "; path=/; max-age=86400";
  {next}
}})();
</script>"#
        ),
    )
}

/// Consistency mode: a clearance cookie replayed by a client that does not
/// look like the browser that earned it.
pub fn inconsistent(what: &str) -> String {
    page(
        "Access denied",
        &format!(
            "<h1 class=\"tb-blocked\">Access denied</h1>\n<p>Automated client detected: this clearance was issued to another client ({}).</p>",
            esc(what)
        ),
    )
}

/// What the challenge script computes, for the server to check.
pub fn challenge_answer(nonce: &str, rounds: u32) -> String {
    let bytes: Vec<u32> = nonce.encode_utf16().map(u32::from).collect();
    if bytes.is_empty() {
        return String::new();
    }
    let mut h: u32 = 0;
    for i in 0..rounds {
        h = h
            .wrapping_mul(31)
            .wrapping_add(bytes[(i as usize) % bytes.len()])
            .wrapping_add(i);
    }
    format!("{h:x}")
}

pub fn error(status: u16) -> String {
    page(
        "Service unavailable",
        &format!("<h1>Error {status}</h1><p>Something went wrong on our end.</p>"),
    )
}

pub fn huge(mb: usize) -> String {
    let line = "<p class=\"filler\">Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.</p>\n";
    let n = mb * 1024 * 1024 / line.len() + 1;
    page("Huge page", &line.repeat(n))
}

/// What the browser's JavaScript environment says about the identity: timezone,
/// languages, platform, user agent (data), window size. Written into `#env`.
pub fn js_env() -> String {
    page(
        "Environment",
        r#"<pre id="env"></pre>
<script>
(async function () {
  var d = {
    timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    language: navigator.language,
    languages: navigator.languages,
    platform: navigator.platform,
    user_agent: navigator.userAgent,
    webdriver: navigator.webdriver,
    width: window.innerWidth,
    height: window.innerHeight,
    brands: navigator.userAgentData ? navigator.userAgentData.brands.map(function (b) { return b.brand + "/" + b.version; }) : null,
    ua_platform: navigator.userAgentData ? navigator.userAgentData.platform : null
  };
  var el = document.getElementById("env");
  el.textContent = JSON.stringify(d);
  el.setAttribute("data-ready", "1");
})();
</script>"#,
    )
}

/// A page that makes the browser reach `to` (`host:port`) three ways: an
/// image, a `fetch()` and a WebSocket. When all three have settled (or after
/// 5 s) `#done` appears; `#results` says how each ended.
pub fn reach_out(to: &str) -> String {
    let script = r#"<pre id="results"></pre>
<img id="img" alt="">
<script>
(function () {
  var to = "__TO__", left = 3, out = {};
  function settle(what, how) {
    if (out[what]) return;
    out[what] = how;
    document.getElementById("results").textContent = JSON.stringify(out);
    if (--left === 0) finish();
  }
  function finish() {
    if (document.getElementById("done")) return;
    var d = document.createElement("div");
    d.id = "done";
    document.body.appendChild(d);
  }
  setTimeout(finish, 5000);
  var img = document.getElementById("img");
  img.onload = function () { settle("image", "loaded"); };
  img.onerror = function () { settle("image", "error"); };
  img.src = "http://" + to + "/canary.png";
  fetch("http://" + to + "/canary-fetch")
    .then(function () { settle("fetch", "answered"); })
    .catch(function (e) { settle("fetch", "error: " + e); });
  try {
    var ws = new WebSocket("ws://" + to + "/canary-ws");
    ws.onopen = function () { settle("websocket", "open"); ws.close(); };
    ws.onerror = function () { settle("websocket", "error"); };
    ws.onclose = function () { settle("websocket", "closed"); };
  } catch (e) { settle("websocket", "threw: " + e); }
})();
</script>"#
        .replace("__TO__", to);
    page("Reach out", &script)
}

/// A page whose script shows the origin's `localStorage` as JSON in
/// `#storage` (then `data-state="ready"`): what a session import wrote.
pub fn storage() -> String {
    page(
        "Storage",
        r#"<pre id="storage"></pre>
<script>
(function () {
  var el = document.getElementById("storage"), out = {};
  for (var i = 0; i < localStorage.length; i++) {
    var k = localStorage.key(i);
    out[k] = localStorage.getItem(k);
  }
  el.textContent = JSON.stringify(out);
  el.setAttribute("data-state", "ready");
})();
</script>"#,
    )
}
