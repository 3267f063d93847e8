//! Pages that look for automation the way bot detectors do, for the tests
//! of how the slot browser looks to a site.
//!
//! `/detect/hints` reports `navigator.userAgentData`'s high-entropy values in
//! the page and a worker.
//!
//! `/detect/screen` reports the screen, window, viewport and pointer in the
//! page, an iframe and a worker (below).
//!
//! `/detect/main-world` wraps what a detector wraps (`document.querySelector`,
//! `querySelectorAll`, `getElementById`, `getElementsByClassName`, the
//! `document.readyState` getter and `Element.outerHTML`) and counts calls
//! whose stack holds no frame of the page itself: code a driver evaluated
//! in the page's world (`at <anonymous>:1:10`). The counts are kept on the
//! root element, where any later read of the page finds them:
//! `data-foreign` (calls from outside the page), `data-own` (the page's own
//! calls, which show the probe works) and `data-sample` (the first foreign
//! stack frame), and in the title (`Probe foreign=N own=M`), where the
//! `browser_*` tools show it. It also has what `actions` need: a field (`#q`, copied to
//! `data-typed` on input), a button (`#go`, which sets `data-clicked`), a
//! tall body to scroll, `#bottom` at its end, and `#late`, added 300 ms
//! after load.
//!
//! The same probe goes into every page of the shop with the `probe` mode
//! (`inject_probe`), quietly: it reports what it counted to
//! `/detect/main-world/report?foreign=N&own=M&page=…` (a beacon, in the
//! testbed's log) on every foreign call and once after load, so a test
//! finds idpool's reads of pages it only extracts from (a tier-3
//! `get_reviews` page, the live view's sign-in page).
//!
//! `/detect/accept-ch?ask=A,B&critical=C` answers `Accept-CH: A,B` (and
//! `Critical-CH: C` when given): the origin asks for client hints from then
//! on. Without `ask` it answers an empty `Accept-CH`, which forgets them.
//!
//! `/detect/botd` runs `@fingerprintjs/botd`, the published detector, as
//! npm ships it (`tests/detectors`, installed by `scripts/test.sh`; served
//! from there, never committed), with its remote monitoring off. Its
//! verdict goes into `#done` and the title, and is reported back to
//! `/detect/botd/result?via=…&r=…`, so the testbed's log has the verdict of
//! a browser nobody drives too.
//!
//! `/detect/fingerprint` runs `@fingerprintjs/fingerprintjs`, the published
//! fingerprinting library (same folder, its monitoring off), and reads
//! directly what account-linking systems key on: a canvas hash, WebGL's
//! renderer, `Intl`'s locale, the heap limit, cores in the page and a
//! worker, the screen and pixel ratio. All of it goes into `#done` as JSON
//! (`{"visitorId", "components", "direct"}`).

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

/// Where `scripts/test.sh` puts BotD's ES module; `IDPOOL_TESTBED_BOTD`
/// names another file.
pub const BOTD_MODULE: &str = "tests/detectors/node_modules/@fingerprintjs/botd/dist/botd.esm.js";

/// Where `scripts/test.sh` puts FingerprintJS's ES module;
/// `IDPOOL_TESTBED_FPJS` names another file.
pub const FPJS_MODULE: &str =
    "tests/detectors/node_modules/@fingerprintjs/fingerprintjs/dist/fp.esm.js";

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/detect/botd", get(|| async { Html(BOTD) }))
        .route("/detect/botd.esm.js", get(botd_module))
        .route(
            "/detect/botd/result",
            get(|| async { StatusCode::NO_CONTENT }),
        )
        .route("/detect/fingerprint", get(|| async { Html(FINGERPRINT) }))
        .route(
            "/detect/fp.esm.js",
            get(|| module("IDPOOL_TESTBED_FPJS", FPJS_MODULE)),
        )
        .route("/detect/main-world", get(main_world))
        .route("/detect/screen", get(screen))
        .route("/detect/hints", get(hints))
        .route("/detect/accept-ch", get(accept_ch))
        .route(
            "/detect/main-world/report",
            get(|| async { StatusCode::NO_CONTENT }).post(|| async { StatusCode::NO_CONTENT }),
        )
}

#[derive(serde::Deserialize)]
struct Ask {
    #[serde(default)]
    ask: String,
    critical: Option<String>,
}

async fn accept_ch(axum::extract::Query(q): axum::extract::Query<Ask>) -> Response {
    let mut resp =
        Html("<!doctype html><title>asked</title><p id=\"done\">asked</p>").into_response();
    let h = resp.headers_mut();
    if let Ok(v) = header::HeaderValue::from_str(&q.ask) {
        h.insert(header::HeaderName::from_static("accept-ch"), v);
    }
    if let Some(v) = q
        .critical
        .and_then(|c| header::HeaderValue::from_str(&c).ok())
    {
        h.insert(header::HeaderName::from_static("critical-ch"), v);
    }
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    resp
}

const BOTD: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>BotD pending</title></head><body>
<p>BotD runs here.</p>
<script type="module">
const via = new URLSearchParams(location.search).get("via") || "";
function done(r) {
  const t = JSON.stringify(r);
  document.title = "BotD " + t;
  const p = document.createElement("pre");
  p.id = "done";
  p.textContent = t;
  document.body.appendChild(p);
  fetch("/detect/botd/result?" + new URLSearchParams({ via: via, r: t }));
}
try {
  const { load } = await import("/detect/botd.esm.js");
  const botd = await load({ monitoring: false });
  done(botd.detect());
} catch (e) {
  done({ error: String(e) });
}
</script></body></html>"##;

/// BotD's module from `tests/detectors` (or `IDPOOL_TESTBED_BOTD`).
async fn botd_module() -> Response {
    module("IDPOOL_TESTBED_BOTD", BOTD_MODULE).await
}

/// A published module from `tests/detectors` (or the file `$var` names); a
/// 404 that says how to install it when it is not there.
async fn module(var: &str, default: &str) -> Response {
    let path = std::env::var(var).unwrap_or_else(|_| default.to_string());
    match tokio::fs::read(&path).await {
        Ok(js) => ([(header::CONTENT_TYPE, "text/javascript")], js).into_response(),
        Err(e) => (
            StatusCode::NOT_FOUND,
            format!("{path} is not installed ({e}): run `npm ci --prefix tests/detectors`"),
        )
            .into_response(),
    }
}

/// `/detect/fingerprint`: FingerprintJS's visitor id and components, and
/// the direct reads, as JSON in `#done` (and the title) once all answered.
const FINGERPRINT: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>Fingerprint pending</title></head><body>
<p>Fingerprinting runs here.</p>
<script type="module">
async function sha(text) {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(d)).map(b => b.toString(16).padStart(2, "0")).join("").slice(0, 16);
}
function canvas() {
  const c = document.createElement("canvas");
  c.width = 400; c.height = 80;
  const x = c.getContext("2d");
  x.textBaseline = "top";
  x.font = "16px Arial";
  x.fillText("Cwm fjordbank glyphs vext quiz, \u{1F603}", 2, 2);
  x.font = "15px 'Times New Roman'";
  x.fillText("Sphinx of black quartz, judge my vow", 2, 26);
  x.font = "14px sans-serif";
  x.fillText("The five boxing wizards jump quickly", 2, 50);
  return c.toDataURL();
}
function webgl() {
  const gl = document.createElement("canvas").getContext("webgl");
  if (!gl) return null;
  const ext = gl.getExtension("WEBGL_debug_renderer_info");
  return ext ? gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
}
function workerCores() {
  const src = "postMessage([navigator.hardwareConcurrency, Intl.DateTimeFormat().resolvedOptions().timeZone])";
  const w = new Worker(URL.createObjectURL(new Blob([src], { type: "text/javascript" })));
  return new Promise(ok => { w.onmessage = e => ok(e.data); setTimeout(() => ok(null), 5000); });
}
function done(r) {
  const t = JSON.stringify(r);
  document.title = "Fingerprint done";
  const p = document.createElement("pre");
  p.id = "done";
  p.textContent = t;
  document.body.appendChild(p);
}
try {
  const FingerprintJS = await import("/detect/fp.esm.js");
  const agent = await FingerprintJS.load({ monitoring: false });
  const got = await agent.get();
  const components = {};
  for (const [k, v] of Object.entries(got.components)) components[k] = v.value === undefined ? (v.error ? "error" : null) : v.value;
  const o = Intl.DateTimeFormat().resolvedOptions();
  done({
    visitorId: got.visitorId,
    components,
    direct: {
      canvas: await sha(canvas()),
      webgl: webgl(),
      locale: o.locale,
      numberLocale: Intl.NumberFormat().resolvedOptions().locale,
      timeZone: o.timeZone,
      languages: navigator.languages,
      heapLimit: performance.memory ? performance.memory.jsHeapSizeLimit : null,
      cores: navigator.hardwareConcurrency,
      worker: await workerCores(),
      deviceMemory: navigator.deviceMemory,
      screen: [screen.width, screen.height, screen.availWidth, screen.availHeight],
      window: [outerWidth, outerHeight],
      dpr: devicePixelRatio,
      dark: matchMedia("(prefers-color-scheme: dark)").matches,
    },
  });
} catch (e) {
  done({ error: String(e) });
}
</script></body></html>"##;

/// `/detect/hints`: `navigator.userAgentData` with its high-entropy values,
/// in the page and in a dedicated worker, as JSON in `#out`
/// (`{"page": …, "worker": …}`) once both answered.
const HINTS: &str = r##"<!doctype html>
<html><head><title>Hints probe</title></head><body>
<pre id="out"></pre>
<script>
const ask = `navigator.userAgentData.getHighEntropyValues(["architecture", "bitness", "fullVersionList",
  "model", "platformVersion", "uaFullVersion", "wow64", "formFactors"])`;
const seen = {};
const done = () => {
  if (!seen.page || !seen.worker) return;
  document.getElementById("out").textContent = JSON.stringify(seen);
  const p = document.createElement("p"); p.id = "done"; document.body.appendChild(p);
};
eval(ask).then((v) => { seen.page = v; done(); });
const src = `${ask}.then((v) => postMessage(v))`;
const worker = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
worker.onmessage = (e) => { seen.worker = e.data; done(); };
</script></body></html>
"##;

async fn hints() -> Html<&'static str> {
    Html(HINTS)
}

/// `/detect/screen`: the screen, window, viewport and input devices as the
/// page, a same-origin iframe and a dedicated worker see them, written as
/// JSON into `#out` (`{"page": …, "frame": …, "worker": …}`) once all three
/// answered.
const SCREEN: &str = r##"<!doctype html>
<html><head><title>Screen probe</title></head><body>
<pre id="out"></pre>
<iframe id="f" srcdoc="<p>frame</p>" width="300" height="150"></iframe>
<script>
const look = (w) => ({
  screen: [w.screen.width, w.screen.height, w.screen.availWidth, w.screen.availHeight, w.screen.colorDepth],
  outer: [w.outerWidth, w.outerHeight], inner: [w.innerWidth, w.innerHeight],
  dpr: w.devicePixelRatio,
  pointer: w.matchMedia("(pointer: fine)").matches, hover: w.matchMedia("(hover: hover)").matches,
  anyPointer: w.matchMedia("(any-pointer: fine)").matches, anyHover: w.matchMedia("(any-hover: hover)").matches,
  touch: w.navigator.maxTouchPoints, ua: w.navigator.userAgent,
  connection: w.navigator.connection ? [w.navigator.connection.rtt, w.navigator.connection.downlink,
    w.navigator.connection.effectiveType] : null,
});
const seen = {};
// While the page parses, Chromium may not have told it the window's size
// yet (outer 0×0 on some navigations, headless or not): kept apart, and the
// page is read again once it has loaded, when detectors usually look.
seen.parseOuter = [outerWidth, outerHeight];
const done = () => {
  if (!seen.loaded || !seen.frameLoaded || !seen.worker) return;
  seen.page = look(window);
  seen.frame = look(f.contentWindow);
  document.getElementById("out").textContent = JSON.stringify(seen);
  const p = document.createElement("p"); p.id = "done"; document.body.appendChild(p);
};
addEventListener("load", () => { seen.loaded = true; done(); });
const f = document.getElementById("f");
const fromFrame = () => { seen.frameLoaded = true; done(); };
if (f.contentDocument && f.contentDocument.readyState === "complete") fromFrame(); else f.addEventListener("load", fromFrame);
const src = "postMessage({hardware: navigator.hardwareConcurrency, ua: navigator.userAgent})";
const worker = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
worker.onmessage = (e) => { seen.worker = e.data; done(); };
</script></body></html>
"##;

async fn screen() -> Html<&'static str> {
    Html(SCREEN)
}

/// The probe itself: wraps what a detector wraps and counts who calls it.
/// On `/detect/main-world` it also sets the title; injected into the shop's
/// pages (`Modes::probe`, `data-quiet="1"`) it only reports.
pub const PROBE_JS: &str = r##"(() => {
  const quiet = document.currentScript && document.currentScript.dataset.quiet === "1";
  const root = document.documentElement;
  const setAttr = Element.prototype.setAttribute;
  const origin = location.origin;
  let foreign = 0, own = 0;
  setAttr.call(root, "data-foreign", "0");
  setAttr.call(root, "data-own", "0");
  const note = () => {
    // Past "Error", this function and the wrapper: the caller's frames.
    const frames = String(new Error().stack).split("\n").slice(3);
    if (frames.some((f) => f.includes(origin))) {
      own += 1;
      setAttr.call(root, "data-own", String(own));
    } else {
      foreign += 1;
      setAttr.call(root, "data-foreign", String(foreign));
      if (foreign === 1) setAttr.call(root, "data-sample", (frames[0] || "").trim());
    }
    if (!quiet) document.title = "Probe foreign=" + foreign + " own=" + own;
    if (foreign > 0) report();
  };
  // What it counted, to the testbed's log (a page idpool only extracts
  // from never shows its title to a test): on every foreign call, and
  // once after load.
  const report = () => navigator.sendBeacon("/detect/main-world/report?" + new URLSearchParams({
    foreign: String(foreign), own: String(own), page: location.pathname + location.search,
    sample: root.getAttribute("data-sample") || "",
  }));
  addEventListener("load", () => setTimeout(() => { document.getElementById("probe-own"); report(); }, 0));
  for (const name of ["querySelector", "querySelectorAll", "getElementById", "getElementsByClassName"]) {
    const orig = Document.prototype[name];
    document[name] = function (...args) { note(); return orig.apply(this, args); };
  }
  const ready = Object.getOwnPropertyDescriptor(Document.prototype, "readyState").get;
  Object.defineProperty(document, "readyState", { get() { note(); return ready.call(document); } });
  const outer = Object.getOwnPropertyDescriptor(Element.prototype, "outerHTML");
  Object.defineProperty(Element.prototype, "outerHTML", {
    get() { note(); return outer.get.call(this); },
    set(v) { outer.set.call(this, v); },
  });
})();
"##;

const MAIN_WORLD_HEAD: &str = r##"<!doctype html>
<html><head><title>Main-world probe</title>
<script>"##;

const MAIN_WORLD: &str = r##"</script></head>
<body>
<h1>A page that counts who reads it</h1>
<input id="q" name="q">
<button id="go" type="button">Go</button>
<div style="height: 3000px">tall</div>
<p id="bottom">the end of the page</p>
<script>
  // The page's own reads: these count as its own.
  document.getElementById("q").addEventListener("input", (e) =>
    document.documentElement.setAttribute("data-typed", e.target.value));
  document.querySelector("#go").addEventListener("click", () =>
    document.documentElement.setAttribute("data-clicked", "1"));
  if (document.readyState !== "complete") {
    addEventListener("load", () => setTimeout(() => {
      const p = document.createElement("p");
      p.id = "late";
      p.textContent = "late text";
      document.body.appendChild(p);
    }, 300));
  }
</script>
</body></html>
"##;

async fn main_world() -> Html<String> {
    Html(format!("{MAIN_WORLD_HEAD}{PROBE_JS}{MAIN_WORLD}"))
}

/// `html` with the probe first in its head (before the page's own scripts).
pub fn inject_probe(html: &str) -> String {
    let tag = format!("<script data-quiet=\"1\">{PROBE_JS}</script>");
    let at = html
        .find("<head")
        .and_then(|h| html[h..].find('>').map(|e| h + e + 1))
        .unwrap_or(0);
    format!("{}{tag}{}", &html[..at], &html[at..])
}
