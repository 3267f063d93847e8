//! The open web's walls: how a page of a host no strategy covers (and of
//! the generic strategy) is judged. The interstitials of the large CDNs and
//! bot-management vendors are markers; two walls need more than a marker,
//! since the thing that marks them also sits on ordinary pages:
//!
//! - a captcha widget (reCAPTCHA, hCaptcha, Turnstile) is a wall only on a
//!   page that is little else (a refusal status, or a small page), not on
//!   a product page whose review form carries one;
//! - a password field is a sign-in wall only on a page that says it is one
//!   (its title or heading, or a sign-in path), not on a page whose header
//!   hides a login drop-down.

use std::sync::LazyLock;

use scraper::Selector;

use crate::strategy::text::SHOWN;
use crate::strategy::{Body, MarkerSet, Markers, Outcome, classify as by_markers};

/// The open web's markers (see the module's list).
pub static OPEN_WEB: LazyLock<Markers> = LazyLock::new(markers_now);

fn set(status: &[u16], body: &[&str], url: &[&str], selector: Option<&str>) -> MarkerSet {
    MarkerSet::new(
        status.to_vec(),
        body.iter().map(|s| s.to_string()).collect(),
        url.iter().map(|s| s.to_string()).collect(),
        selector,
    )
}

fn markers_now() -> Markers {
    Markers {
        // The identity is refused: a captcha wall or a vendor's block page.
        block: set(
            &[],
            &[
                "validateCaptcha",              // Amazon's robot check
                "px-captcha",                   // HUMAN (PerimeterX)
                "captcha-delivery.com",         // DataDome
                "Incapsula incident ID",        // Imperva's refusal
                "errors.edgesuite.net",         // Akamai's "Access Denied"
                "Sorry, you have been blocked", // Cloudflare's WAF block
                "Attention Required! | Cloudflare",
                "Sucuri WebSite Firewall",
            ],
            &["/captcha", "validateCaptcha"],
            None,
        ),
        // The site wants a real browser: a JS interstitial that clears
        // itself (Cloudflare's "Just a moment...", Akamai's sec-cpt).
        challenge: set(
            &[],
            &[
                "cf-browser-verification",
                "_cf_chl_opt",
                "/_sec/cp_challenge/",
            ],
            &[],
            Some("#challenge-form, #tb-challenge"),
        ),
        // HTTP authentication.
        login: set(&[401], &[], &[], None),
        ..Markers::default()
    }
}

/// A captcha widget a person must answer, as its vendor's snippet embeds
/// it (not an invisible one, which scores a visitor without asking).
static CAPTCHA: LazyLock<Option<Selector>> = LazyLock::new(|| {
    Selector::parse(
        ".g-recaptcha:not([data-size=invisible]), .h-captcha:not([data-size=invisible]), \
         .cf-turnstile, iframe[src*=\"hcaptcha.com\"]:not([src*=\"size=invisible\"]), \
         iframe[src*=\"recaptcha/api2/anchor\"]:not([src*=\"size=invisible\"]), \
         iframe[src*=\"challenges.cloudflare.com\"]",
    )
    .ok()
});

/// A page this small with a captcha on it is the captcha (a shop's page
/// with a review form is many times larger).
const THIN_PAGE: usize = 16 * 1024;

static PASSWORD: LazyLock<Option<Selector>> =
    LazyLock::new(|| Selector::parse("form input[type=password i]").ok());
static HEADING: LazyLock<Option<Selector>> = LazyLock::new(|| Selector::parse("title, h1").ok());

/// A sign-in page's title or heading says so: one of these phrases, in
/// whole words.
const SIGN_IN_WORDS: &[&[&str]] = &[
    &["sign", "in"],
    &["signin"],
    &["log", "in"],
    &["login"],
    &["logon"],
    &["anmelden"],
    &["einloggen"],
    &["se", "connecter"],
    &["identifiez", "vous"],
    &["iniciar", "sesión"],
    &["inicia", "sesión"],
    &["accedi"],
    &["inloggen"],
    &["zaloguj"],
    &["logga", "in"],
    &["ログイン"],
    &["登录"],
    &["로그인"],
];

/// Path segments of sign-in pages (a wall redirects to one), whole.
const SIGN_IN_SEGMENTS: &[&str] = &[
    "login", "signin", "sign-in", "sign_in", "log-in", "logon", "anmelden",
];

/// Whether a password field is the page's own: not in its header, its
/// navigation or a part it hides (a drop-down many pages carry).
fn own_password(html: &scraper::Html) -> bool {
    let Some(sel) = PASSWORD.as_ref() else {
        return false;
    };
    html.select(sel).take(16).any(|input| {
        !(input.ancestors().filter_map(scraper::ElementRef::wrap)).any(|a| {
            matches!(a.value().name(), "header" | "nav")
                || a.value().attr("aria-hidden") == Some("true")
                || SHOWN.hides(a)
        })
    })
}

/// Whether `text` holds one of the sign-in phrases as whole words.
fn says_sign_in(text: &str) -> bool {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    SIGN_IN_WORDS.iter().any(|phrase| {
        (words.windows(phrase.len())).any(|w| w.iter().zip(phrase.iter()).all(|(a, b)| a == b))
    })
}

/// Which code rule a page meets, if any: the outcome and why.
fn wall(status: u16, final_url: &str, body: &Body<'_>) -> Option<(Outcome, String)> {
    if !body.is_html() {
        return None;
    }
    let html = body.html();
    let small = body.text().len() <= THIN_PAGE || matches!(status, 403 | 429 | 503);
    if small
        && let Some(sel) = CAPTCHA.as_ref()
        && html.select(sel).next().is_some()
    {
        return Some((
            Outcome::HardBlock,
            "[block] a captcha widget is what the page shows".into(),
        ));
    }
    if status >= 400 || !own_password(html) {
        return None;
    }
    let path = url::Url::parse(final_url)
        .map(|u| u.path().to_ascii_lowercase())
        .unwrap_or_default();
    let segment = path.split('/').find(|seg| {
        let stem = seg.split('.').next().unwrap_or_default();
        SIGN_IN_SEGMENTS.contains(&stem)
    });
    if let Some(seg) = segment {
        return Some((
            Outcome::LoginRequired,
            format!("[login] a password form on a sign-in path (/{seg})"),
        ));
    }
    let heading = (HEADING.as_ref())
        .into_iter()
        .flat_map(|sel| html.select(sel).take(2))
        .map(|e| e.text().collect::<String>())
        .find(|t| says_sign_in(t))?;
    Some((
        Outcome::LoginRequired,
        format!(
            "[login] a password form on a page titled {:?}",
            heading.split_whitespace().collect::<Vec<_>>().join(" ")
        ),
    ))
}

/// How a response of the open web reads: [`OPEN_WEB`]'s markers, then the
/// captcha and sign-in rules on what they call content (a captcha served
/// with a 5xx or a 429 is a wall, not a failure).
pub fn classify(status: u16, final_url: &str, body: &Body<'_>) -> Outcome {
    match by_markers(&OPEN_WEB, status, final_url, body) {
        found @ (Outcome::Ok | Outcome::Empty | Outcome::Failed) => {
            wall(status, final_url, body).map_or(found, |(o, _)| o)
        }
        other => other,
    }
}

/// Why [`classify`] said `outcome`.
pub fn explain(outcome: Outcome, status: u16, final_url: &str, body: &Body<'_>) -> Option<String> {
    OPEN_WEB
        .explain(outcome, status, final_url, body)
        .or_else(|| wall(status, final_url, body).map(|(_, why)| why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(status: u16, url: &str, html: &str) -> Outcome {
        classify(status, url, &Body::html_page(html))
    }

    #[test]
    fn vendor_walls_are_blocks_and_challenges() {
        let u = "https://shop.test/p/1";
        let page =
            |body: &str| format!("<html><head><title>x</title></head><body>{body}</body></html>");
        assert_eq!(
            judge(
                403,
                u,
                &page("<script src=\"https://ct.captcha-delivery.com/c.js\"></script>")
            ),
            Outcome::HardBlock
        );
        assert_eq!(
            judge(200, u, &page("<div id=\"px-captcha\"></div>")),
            Outcome::HardBlock
        );
        assert_eq!(
            judge(503, u, &page("<script>window._cf_chl_opt={}</script>")),
            Outcome::Challenge
        );
        assert_eq!(
            judge(403, u, &page("<p>Sorry, you have been blocked</p>")),
            Outcome::HardBlock
        );
        assert_eq!(judge(401, u, &page("")), Outcome::LoginRequired);
    }

    #[test]
    fn a_captcha_is_a_wall_only_where_it_is_the_page() {
        let u = "https://shop.test/p/1";
        let widget = "<div class=\"g-recaptcha\" data-sitekey=\"k\"></div>";
        assert_eq!(
            judge(
                200,
                u,
                &format!("<html><body><h1>Are you a robot?</h1>{widget}</body></html>")
            ),
            Outcome::HardBlock
        );
        // A product page with a review form that carries the widget.
        let filler = "<p>A long description of the kettle and its many parts.</p>".repeat(400);
        let product =
            format!("<html><body><h1>Kettle</h1>{filler}<form>{widget}</form></body></html>");
        assert_eq!(judge(200, u, &product), Outcome::Ok);
    }

    #[test]
    fn a_password_field_is_a_sign_in_wall_only_on_a_sign_in_page() {
        let form = "<form><input name=\"email\"><input type=\"password\" name=\"pw\"></form>";
        let titled =
            |t: &str| format!("<html><head><title>{t}</title></head><body>{form}</body></html>");
        assert_eq!(
            judge(200, "https://shop.test/x", &titled("Sign in | Shop")),
            Outcome::LoginRequired
        );
        assert_eq!(
            judge(200, "https://shop.test/x", &titled("Anmelden")),
            Outcome::LoginRequired
        );
        assert_eq!(
            judge(200, "https://shop.test/account/login?r=/p", &titled("Shop")),
            Outcome::LoginRequired
        );
        // A product page whose header holds a login drop-down.
        assert_eq!(
            judge(200, "https://shop.test/p/kettle", &titled("Blue kettle")),
            Outcome::Ok
        );
        let why = explain(
            Outcome::LoginRequired,
            200,
            "https://shop.test/x",
            &Body::html_page(&titled("Log in")),
        );
        assert!(why.is_some_and(|w| w.contains("password form")));
    }

    #[test]
    fn ordinary_pages_are_no_walls() {
        let u = "https://shop.test/p/kettle";
        let form = "<form><input name=\"email\"><input type=\"password\" name=\"pw\"></form>";
        let page = |title: &str, body: &str| {
            format!("<html><head><title>{title}</title></head><body>{body}</body></html>")
        };
        // A login drop-down in the header of a page whose title says "sign in".
        let header = page(
            "Sign in for deals",
            &format!("<header>{form}</header><h1>Kettle</h1>"),
        );
        assert_eq!(judge(200, u, &header), Outcome::Ok);
        // Sign-in words inside other words, or in a longer path segment.
        let at = "https://shop.test/blog/login-page-design";
        assert_eq!(judge(200, at, &page("Designing pages", form)), Outcome::Ok);
        assert_eq!(
            judge(200, u, &page("Câble de connexion", form)),
            Outcome::Ok
        );
        assert_eq!(judge(200, u, &page("Logins we loved", form)), Outcome::Ok);
        // An invisible captcha scores the visitor and asks nothing.
        let invisible =
            "<div id=app></div><div class=\"g-recaptcha\" data-size=\"invisible\"></div>";
        assert_eq!(judge(200, u, &page("Kettle", invisible)), Outcome::Ok);
        // Imperva's sensor script sits on ordinary pages.
        let sensor = "<h1>Kettle</h1><script src=\"/_Incapsula_Resource?SWJIYLWA=1\"></script>";
        assert_eq!(judge(200, u, &page("Kettle", sensor)), Outcome::Ok);
        // A captcha served with a 503 is a wall, not a failure.
        let widget = "<div class=\"g-recaptcha\" data-sitekey=\"k\"></div>";
        assert_eq!(
            judge(503, u, &page("One more step", widget)),
            Outcome::HardBlock
        );
        assert_eq!(
            judge(503, u, &page("Down", "<p>Maintenance</p>")),
            Outcome::Failed
        );
    }
}
