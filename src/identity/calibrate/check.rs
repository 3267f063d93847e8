//! The coherence self-check's verdict: what the listener's self-check page
//! (`page`) collected about the slot's browser, in the page, a same-origin
//! iframe and a dedicated worker, next to the request headers that brought
//! it, judged by [`judge`], which names each signal a person's Chromium
//! would not show.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the page found: the signals, by name, and what it saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserCheck {
    /// Every signal a person's Chromium would not show; empty when none.
    pub signals: Vec<Signal>,
    /// WebGL's vendor and renderer, reported as they are (never spoofed).
    pub webgl: Option<String>,
    /// What the page, the iframe and the worker saw, and the probe's counts.
    pub seen: Value,
}

/// One signal: a name (`screen`, `main_world`, …) and what gave it away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signal {
    pub name: String,
    pub detail: String,
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.detail)
    }
}

/// What the slot's profile says the browser should show.
#[derive(Debug, Clone)]
pub struct Expect {
    pub mobile: bool,
    /// The profile's time zone, when it has one.
    pub timezone: Option<String>,
    /// The profile's languages in order (`de-DE`, `de`, `en`).
    pub languages: Vec<String>,
    /// The operating system the user agent claims (`Linux`, `Windows`,
    /// `macOS`, as in `sec-ch-ua-platform`).
    pub platform: String,
}

/// The JSON the page left in `<script type="application/json" id="result">`.
pub fn result_of(html: &str) -> Option<Value> {
    let open = "<script type=\"application/json\" id=\"result\">";
    let at = html.find(open)? + open.len();
    let end = at + html[at..].find("</script>")?;
    serde_json::from_str(&html[at..end]).ok()
}

/// `"A";v="1", "B";v="2"` as `A;1`, `B;2`.
fn brands_of_header(v: &str) -> Vec<String> {
    v.split(',')
        .filter_map(|b| {
            let (name, ver) = b.trim().split_once(";v=")?;
            Some(format!(
                "{};{}",
                name.trim_matches('"'),
                ver.trim_matches('"')
            ))
        })
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn nums(v: &Value) -> Vec<i64> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| x.as_i64().unwrap_or(-1))
        .collect()
}

/// Judge what the page saw. `worker_ua` is the `user-agent` the worker's
/// own script request carried.
/// The parts of what the page saw that every judgement reads.
#[derive(Clone, Copy)]
struct View<'a> {
    page: &'a Value,
    frame: &'a Value,
    worker: &'a Value,
    headers: &'a Value,
    places: [(&'static str, &'a Value); 3],
    seen: &'a Value,
}

pub fn judge(seen: Value, worker_ua: Option<&str>, expect: &Expect) -> BrowserCheck {
    let mut signals = Vec::new();
    let webgl = {
        let mut say = |name: &str, detail: String| {
            signals.push(Signal {
                name: name.into(),
                detail,
            })
        };
        let v = View {
            page: &seen["page"],
            frame: &seen["frame"],
            worker: &seen["worker"],
            headers: &seen["headers"],
            places: [
                ("page", &seen["page"]),
                ("iframe", &seen["frame"]),
                ("worker", &seen["worker"]),
            ],
            seen: &seen,
        };
        identity(&v, worker_ua, &mut say);
        window(&v, expect, &mut say);
        locale(&v, expect, &mut say);
        environment(&v, &mut say);
        rendering(&v, &mut say)
    };
    BrowserCheck {
        signals,
        webgl,
        seen,
    }
}

/// webdriver, the user agent and `userAgentData` against the headers.
fn identity(v: &View<'_>, worker_ua: Option<&str>, say: &mut dyn FnMut(&str, String)) {
    let View {
        page,
        worker,
        headers,
        places,
        ..
    } = *v;
    if let Some(e) = worker["error"].as_str() {
        say("worker", format!("the worker did not answer: {e}"));
    }
    // webdriver and a headless user agent.
    for (place, v) in places {
        if v["webdriver"] == true {
            say(
                "webdriver",
                format!("navigator.webdriver is true in the {place}"),
            );
        }
    }
    let ua = page["ua"].as_str().unwrap_or_default();
    if ua.contains("Headless") {
        say("user_agent", format!("the user agent says headless: {ua}"));
    }
    let header_ua = headers["user-agent"].as_str().unwrap_or_default();
    for (place, v) in places {
        if v["ua"].as_str() != Some(header_ua) {
            say(
                "user_agent",
                format!(
                    "the {place} says {}, the request header {header_ua}",
                    v["ua"]
                ),
            );
        }
    }
    if let Some(w) = worker_ua
        && w != header_ua
    {
        say("user_agent", format!("the worker's request sent {w}"));
    }
    client_hints(v, say);
}

/// `userAgentData`, low and high entropy, against the client hints.
fn client_hints(v: &View<'_>, say: &mut dyn FnMut(&str, String)) {
    let View {
        page,
        worker,
        headers,
        places,
        ..
    } = *v;
    let ua = page["ua"].as_str().unwrap_or_default();
    // userAgentData, low and high entropy, against the client hints.
    if let Some(h) = headers["sec-ch-ua"].as_str() {
        let want = brands_of_header(h);
        for (place, v) in places {
            let got = strs(&v["brands"]);
            if got != want {
                say(
                    "ua_data",
                    format!("the {place}'s brands {got:?}, sec-ch-ua {want:?}"),
                );
            }
        }
        let platform = headers["sec-ch-ua-platform"]
            .as_str()
            .unwrap_or_default()
            .trim_matches('"');
        if page["uaPlatform"].as_str() != Some(platform) {
            say(
                "ua_data",
                format!(
                    "platform {} against sec-ch-ua-platform {platform}",
                    page["uaPlatform"]
                ),
            );
        }
        let mobile = headers["sec-ch-ua-mobile"].as_str() == Some("?1");
        if page["mobile"].as_bool() != Some(mobile) {
            say(
                "ua_data",
                format!("mobile {} against sec-ch-ua-mobile", page["mobile"]),
            );
        }
        let major = ua
            .split("Chrome/")
            .nth(1)
            .and_then(|v| v.split('.').next())
            .unwrap_or_default()
            .to_string();
        for (place, v) in [("page", page), ("worker", worker)] {
            let high = &v["high"];
            let list = high["fullVersionList"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let full = high["uaFullVersion"].as_str().unwrap_or_default();
            if list.is_empty() || full.is_empty() {
                say(
                    "ua_data.high",
                    format!("the {place} answers no full version ({high})"),
                );
            } else if !full.starts_with(&format!("{major}.")) {
                say(
                    "ua_data.high",
                    format!("the {place}'s full version {full} is not Chrome {major}"),
                );
            }
        }
        if page["high"] != worker["high"] && worker.get("error").is_none() {
            say(
                "ua_data.high",
                "the worker's high-entropy values are not the page's".into(),
            );
        }
    }
}

/// Screen, window and viewport; pointer and hover.
fn window(v: &View<'_>, expect: &Expect, say: &mut dyn FnMut(&str, String)) {
    let View { page, frame, .. } = *v;
    // Screen ≥ outer window ≥ viewport, in the page and the iframe.
    for (place, v) in [("page", page), ("iframe", frame)] {
        let (s, o, i) = (nums(&v["screen"]), nums(&v["outer"]), nums(&v["inner"]));
        if s.len() < 5 || o.len() < 2 || i.len() < 2 {
            say("screen", format!("the {place} has no screen"));
            continue;
        }
        if (s[0], s[1]) == (800, 600) {
            say(
                "screen",
                format!("the {place}'s screen is headless's default 800×600"),
            );
        }
        if s[2] < o[0] || s[3] < o[1] {
            say(
                "screen",
                format!(
                    "the {place}'s window {}×{} is larger than the screen's available {}×{}",
                    o[0], o[1], s[2], s[3]
                ),
            );
        }
        if place == "page" && (o[0] < i[0] || o[1] < i[1]) {
            say(
                "screen",
                format!(
                    "the viewport {}×{} is larger than the window {}×{}",
                    i[0], i[1], o[0], o[1]
                ),
            );
        }
        if s[4] != 24 {
            say("screen", format!("colour depth {}", s[4]));
        }
    }
    // Pointer and hover.
    let input = &page["input"];
    let fine = [
        input["pointer"] == true,
        input["hover"] == true,
        input["anyPointer"] == true,
        input["anyHover"] == true,
    ];
    let touch = input["touch"].as_i64().unwrap_or(-1);
    if expect.mobile {
        if fine.iter().any(|f| *f) || input["coarse"] != true || touch < 1 {
            say(
                "pointer",
                format!("a mobile profile without a touch screen: {input}"),
            );
        }
    } else if fine.iter().any(|f| !f) || touch != 0 {
        say("pointer", format!("a desktop without a mouse: {input}"));
    }
}

/// Plugins, languages and time zone.
fn locale(v: &View<'_>, expect: &Expect, say: &mut dyn FnMut(&str, String)) {
    let View {
        page,
        frame,
        worker,
        headers,
        ..
    } = *v;
    // Plugins, languages, time zone, connection, window.chrome.
    if !expect.mobile
        && (page["plugins"].as_i64() == Some(0) || page["mimeTypes"].as_i64() == Some(0))
    {
        say(
            "plugins",
            format!(
                "{} plugins, {} MIME types",
                page["plugins"], page["mimeTypes"]
            ),
        );
    }
    let langs = strs(&page["languages"]);
    if langs.is_empty() || page["language"].as_str() != langs.first().map(String::as_str) {
        say(
            "languages",
            format!(
                "navigator.language {} against languages {langs:?}",
                page["language"]
            ),
        );
    }
    if !expect.languages.is_empty() && langs != expect.languages {
        say(
            "languages",
            format!(
                "navigator.languages {langs:?}, the profile's {:?}",
                expect.languages
            ),
        );
    }
    let header_langs = crate::identity::profile::language_tags(
        headers["accept-language"].as_str().unwrap_or_default(),
    );
    if header_langs != langs {
        say(
            "languages",
            format!("Accept-Language {header_langs:?} against navigator.languages {langs:?}"),
        );
    }
    for (place, v) in [("iframe", frame), ("worker", worker)] {
        if strs(&v["languages"]) != langs {
            say(
                "languages",
                format!("the {place}'s languages are not the page's"),
            );
        }
        if v["tz"] != page["tz"] {
            say(
                "timezone",
                format!(
                    "the {place}'s time zone {} is not the page's {}",
                    v["tz"], page["tz"]
                ),
            );
        }
    }
    if let Some(tz) = &expect.timezone
        && page["tz"].as_str() != Some(tz)
    {
        say(
            "timezone",
            format!("the page's time zone {}, the profile's {tz}", page["tz"]),
        );
    }
    // `Intl` speaks the browser's own locale: a British profile whose
    // `Intl` says en-US (no language pack, or the locale not passed on)
    // formats dates as no British person's browser does.
    let lang = |t: &str| t.split('-').next().unwrap_or("").to_ascii_lowercase();
    if let (Some(intl), Some(first)) = (page["locale"].as_str(), langs.first())
        && (lang(intl) != lang(first) || (intl.contains('-') && !intl.eq_ignore_ascii_case(first)))
    {
        say(
            "locale",
            format!("Intl's locale {intl}, the first language {first}"),
        );
    }
    fonts(v, expect, say);
}

/// The fonts a claimed operating system always has: a Windows user agent
/// whose page cannot use Arial, Segoe UI or Tahoma, or a Mac one without
/// Helvetica, is another system behind it (`pretend_os`).
fn fonts(v: &View<'_>, expect: &Expect, say: &mut dyn FnMut(&str, String)) {
    let have = v.seen["components"]["fonts"].as_str().unwrap_or_default();
    if v.seen["components"].is_null() {
        return;
    }
    let has = |f: &str| have.split(',').any(|h| h == f);
    let missing: Vec<&str> = match expect.platform.as_str() {
        "Windows" => ["Arial", "Segoe UI", "Tahoma"]
            .into_iter()
            .filter(|f| !has(f))
            .collect(),
        "macOS" => ["Helvetica"].into_iter().filter(|f| !has(f)).collect(),
        _ => Vec::new(),
    };
    if !missing.is_empty() {
        say(
            "fonts",
            format!(
                "a {} user agent without {}: the page sees this machine's fonts",
                expect.platform,
                missing.join(", ")
            ),
        );
    }
}

/// Online and `navigator.connection`, `window.chrome`, notifications.
fn environment(v: &View<'_>, say: &mut dyn FnMut(&str, String)) {
    let View {
        page, places, seen, ..
    } = *v;
    for (place, v) in places {
        if v["online"] == false {
            say(
                "connection",
                format!("navigator.onLine is false in the {place}"),
            );
        }
    }
    let c = &page["connection"];
    if c.is_null() {
        say("connection", "no navigator.connection".into());
    } else if c["rtt"].as_f64().unwrap_or(0.0) <= 0.0
        || c["downlink"].as_f64().unwrap_or(0.0) <= 0.0
    {
        say(
            "connection",
            format!("rtt {} downlink {}", c["rtt"], c["downlink"]),
        );
    }
    if page["chrome"] != true {
        say("chrome", "no window.chrome".into());
    }
    let n = &seen["notification"];
    let agree = matches!(
        (n["permission"].as_str(), n["query"].as_str()),
        (Some("default"), Some("prompt"))
            | (Some("granted"), Some("granted"))
            | (Some("denied"), Some("denied"))
    );
    if !agree {
        say(
            "notification",
            format!(
                "Notification.permission {} but the permissions API says {}",
                n["permission"], n["query"]
            ),
        );
    }
}

/// WebGL (reported as it is; a software renderer named) and the
/// main-world probe; WebGL's vendor and renderer.
fn rendering(v: &View<'_>, say: &mut dyn FnMut(&str, String)) -> Option<String> {
    let seen = v.seen;
    // WebGL: reported, and a software renderer named.
    let gl = &seen["webgl"];
    let webgl = gl["renderer"]
        .as_str()
        .map(|r| format!("{} / {r}", gl["vendor"].as_str().unwrap_or("?")));
    match &webgl {
        None => say("webgl", format!("no WebGL ({gl})")),
        Some(r)
            if ["SwiftShader", "llvmpipe", "Software"]
                .iter()
                .any(|s| r.contains(s)) =>
        {
            say("webgl", format!("a software renderer: {r}"))
        }
        Some(_) => {}
    }
    // The main-world probe.
    let probe = &seen["probe"];
    let foreign = probe["foreign"].as_u64().unwrap_or(0);
    if probe["own"].as_u64().unwrap_or(0) == 0 {
        say(
            "main_world",
            "the probe saw none of the page's own calls: it did not run".into(),
        );
    } else if foreign > 0 {
        say(
            "main_world",
            format!(
                "{foreign} calls from outside the page (first at {})",
                probe["sample"]
            ),
        );
    }
    webgl
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn window(outer: [i64; 2]) -> Value {
        json!({"ua": "UA Chrome/150.0.0.0", "webdriver": false, "online": true, "brands": ["B;150"],
               "mobile": false, "uaPlatform": "Linux",
               "high": {"fullVersionList": [{"brand": "B", "version": "150.0.1.2"}], "uaFullVersion": "150.0.1.2"},
               "language": "en-US", "languages": ["en-US", "en"], "tz": "UTC",
               "connection": {"rtt": 50, "downlink": 10},
               "screen": [1920, 1080, 1920, 1040, 24], "outer": outer, "inner": [1366, 683],
               "input": {"pointer": true, "hover": true, "anyPointer": true, "anyHover": true, "coarse": false, "touch": 0},
               "plugins": 5, "mimeTypes": 2, "chrome": true})
    }

    fn person() -> Value {
        json!({"headers": {"user-agent": "UA Chrome/150.0.0.0", "sec-ch-ua": "\"B\";v=\"150\"",
                           "sec-ch-ua-platform": "\"Linux\"", "sec-ch-ua-mobile": "?0",
                           "accept-language": "en-US,en;q=0.9"},
               "page": window([1366, 768]), "frame": window([1366, 768]), "worker": window([1366, 768]),
               "notification": {"permission": "default", "query": "prompt"},
               "webgl": {"vendor": "V", "renderer": "R"},
               "probe": {"foreign": 0, "own": 3, "sample": ""}})
    }

    fn expect() -> Expect {
        Expect {
            mobile: false,
            timezone: Some("UTC".into()),
            languages: vec!["en-US".into(), "en".into()],
            platform: "Linux".into(),
        }
    }

    fn names(c: &BrowserCheck) -> Vec<&str> {
        c.signals.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn a_persons_browser_shows_no_signal() {
        let c = judge(person(), Some("UA Chrome/150.0.0.0"), &expect());
        assert!(c.signals.is_empty(), "{:?}", c.signals);
        assert_eq!(c.webgl.as_deref(), Some("V / R"));
    }

    /// Issue 56: the self-check missed an en-GB profile whose `Intl` said
    /// en-US, and a Windows user agent with Linux's fonts only.
    #[test]
    fn a_locale_intl_does_not_speak_and_a_claimed_systems_missing_fonts_are_named() {
        let mut s = person();
        s["page"]["locale"] = json!("en-US");
        s["components"] = json!({"fonts": "DejaVu Sans,Liberation Sans"});
        assert!(
            judge(s.clone(), Some("UA Chrome/150.0.0.0"), &expect())
                .signals
                .is_empty()
        );
        let gb = Expect {
            languages: vec!["en-GB".into(), "en".into()],
            ..expect()
        };
        let mut g = s.clone();
        g["page"]["languages"] = json!(["en-GB", "en"]);
        g["page"]["language"] = json!("en-GB");
        g["headers"]["accept-language"] = json!("en-GB,en;q=0.9");
        for place in ["frame", "worker"] {
            g[place]["languages"] = json!(["en-GB", "en"]);
        }
        let c = judge(g.clone(), Some("UA Chrome/150.0.0.0"), &gb);
        assert_eq!(names(&c), ["locale"], "{:?}", c.signals);
        // German Chromium's pack is `de`: `Intl` says `de` for de-DE.
        let de = Expect {
            languages: vec!["de-DE".into(), "de".into()],
            ..expect()
        };
        let mut d = g.clone();
        d["page"]["locale"] = json!("de");
        d["page"]["languages"] = json!(["de-DE", "de"]);
        d["page"]["language"] = json!("de-DE");
        d["headers"]["accept-language"] = json!("de-DE,de;q=0.9");
        for place in ["frame", "worker"] {
            d[place]["languages"] = json!(["de-DE", "de"]);
        }
        assert!(
            judge(d, Some("UA Chrome/150.0.0.0"), &de)
                .signals
                .is_empty()
        );
        let windows = Expect {
            platform: "Windows".into(),
            ..expect()
        };
        let c = judge(s, Some("UA Chrome/150.0.0.0"), &windows);
        assert_eq!(names(&c), ["fonts"], "{:?}", c.signals);
        assert!(
            c.signals[0].detail.contains("Arial, Segoe UI, Tahoma"),
            "{:?}",
            c.signals
        );
    }

    #[test]
    fn each_tell_is_named() {
        let mut s = person();
        s["page"]["outer"] = json!([2000, 1200]);
        s["page"]["connection"]["rtt"] = json!(0);
        s["worker"]["online"] = json!(false);
        s["page"]["input"]["pointer"] = json!(false);
        s["worker"]["high"] = json!({"fullVersionList": [], "uaFullVersion": ""});
        s["frame"]["webdriver"] = json!(true);
        s["notification"]["permission"] = json!("denied");
        s["webgl"]["renderer"] = json!("ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device))");
        s["probe"]["foreign"] = json!(4);
        let c = judge(s, Some("other"), &expect());
        let n = names(&c);
        for want in [
            "webdriver",
            "user_agent",
            "ua_data.high",
            "screen",
            "pointer",
            "connection",
            "notification",
            "webgl",
            "main_world",
        ] {
            assert!(n.contains(&want), "{want} missing from {n:?}");
        }
    }

    #[test]
    fn languages_and_time_zone_follow_the_profile() {
        let mut e = expect();
        e.timezone = Some("Europe/Berlin".into());
        e.languages = vec!["de-DE".into()];
        let n: Vec<String> = judge(person(), None, &e)
            .signals
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(n, ["languages", "timezone"]);
    }

    #[test]
    fn the_result_is_read_back_from_the_page() {
        let html =
            "<p></p><script type=\"application/json\" id=\"result\">{\"a\":\"\\u003c/b\"}</script>";
        assert_eq!(result_of(html), Some(json!({"a": "</b"})));
        assert_eq!(result_of("<p></p>"), None);
    }
}
