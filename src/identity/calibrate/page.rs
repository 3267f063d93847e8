//! The coherence self-check page the calibration listener serves: it looks
//! at the slot's browser the way a detector does, in the page, a same-origin
//! iframe and a dedicated worker, and only collects (`check` judges).
//!
//! The page also wraps what detectors wrap (`document.querySelector`,
//! `querySelectorAll`, `getElementById`, `getElementsByClassName`, the
//! `document.readyState` getter) and counts calls with no frame of the page
//! on their stack, while the calibration drives it through a whole page
//! operation (navigation, `wait_for`, a scroll, a click, a wait, the read).

use serde_json::Value;

/// The collector both the page and its worker run: what `navigator` (and,
/// in a window, `screen`, the window and media queries) says.
const COLLECT: &str = r#"
async function collect(n, w) {
  const o = { ua: n.userAgent, platform: n.platform, language: n.language,
    languages: Array.from(n.languages || []), webdriver: n.webdriver === true, online: n.onLine };
  if (n.userAgentData) {
    o.brands = n.userAgentData.brands.map(function (b) { return b.brand + ";" + b.version; });
    o.mobile = n.userAgentData.mobile;
    o.uaPlatform = n.userAgentData.platform;
    try {
      o.high = await n.userAgentData.getHighEntropyValues(["fullVersionList", "uaFullVersion",
        "platformVersion", "architecture", "bitness", "model", "wow64", "formFactors"]);
    } catch (e) { o.high = { error: String(e) }; }
  }
  const intl = Intl.DateTimeFormat().resolvedOptions();
  o.tz = intl.timeZone;
  o.locale = intl.locale;
  o.offset = new Date().getTimezoneOffset();
  if (n.connection) {
    o.connection = { rtt: n.connection.rtt, downlink: n.connection.downlink,
      effectiveType: n.connection.effectiveType };
  }
  if (w) {
    const s = w.screen;
    o.screen = [s.width, s.height, s.availWidth, s.availHeight, s.colorDepth];
    o.outer = [w.outerWidth, w.outerHeight];
    o.inner = [w.innerWidth, w.innerHeight];
    o.dpr = w.devicePixelRatio;
    const m = function (q) { return w.matchMedia(q).matches; };
    o.input = { pointer: m("(pointer: fine)"), hover: m("(hover: hover)"),
      anyPointer: m("(any-pointer: fine)"), anyHover: m("(any-hover: hover)"),
      coarse: m("(pointer: coarse)"), touch: n.maxTouchPoints };
    o.plugins = n.plugins.length;
    o.mimeTypes = n.mimeTypes.length;
    o.chrome = typeof w.chrome === "object" && w.chrome !== null;
  }
  return o;
}
"#;

/// The worker: its own view, posted back.
pub fn worker_js() -> String {
    format!("{COLLECT}\ncollect(self.navigator, null).then(function (o) {{ postMessage(o); }});\n")
}

/// The iframe's document.
pub const FRAME: &str =
    "<!doctype html><html><head><title>frame</title></head><body></body></html>";

/// The page, with the request's headers (`headers`, a JSON object) in it.
pub fn page(headers: &Value) -> String {
    let json = headers.to_string().replace('<', "\\u003c");
    PAGE.replace("__HEADERS__", &json)
        .replace("__COLLECT__", COLLECT)
}

const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>idpool self-check</title>
<script>
// The probe first, before anything else runs.
var PROBE = { foreign: 0, own: 0, sample: "" };
(function () {
  var here = location.origin + location.pathname;
  function count() {
    var lines = String(new Error().stack || "").split("\n").slice(2);
    if (lines.some(function (l) { return l.indexOf(here) >= 0; })) { PROBE.own++; return; }
    PROBE.foreign++;
    if (!PROBE.sample) PROBE.sample = (lines[0] || "").trim().slice(0, 200);
  }
  [[Document.prototype, "querySelector"], [Document.prototype, "querySelectorAll"],
   [Document.prototype, "getElementById"], [Document.prototype, "getElementsByClassName"],
   [Element.prototype, "querySelector"], [Element.prototype, "querySelectorAll"]].forEach(function (p) {
    var f = p[0][p[1]];
    p[0][p[1]] = function () { count(); return f.apply(this, arguments); };
  });
  var rs = Object.getOwnPropertyDescriptor(Document.prototype, "readyState");
  Object.defineProperty(document, "readyState", { configurable: true,
    get: function () { count(); return rs.get.call(this); } });
})();
</script></head>
<body style="min-height: 3000px">
<button id="finish">finish</button>
<iframe id="frame" src="check/frame" width="300" height="150"></iframe>
<script>
__COLLECT__
var HEADERS = __HEADERS__;
var SEEN = {};
function webgl() {
  try {
    var gl = document.createElement("canvas").getContext("webgl");
    if (!gl) return null;
    var ext = gl.getExtension("WEBGL_debug_renderer_info");
    return ext ? { vendor: gl.getParameter(ext.UNMASKED_VENDOR_WEBGL),
      renderer: gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) }
      : { vendor: gl.getParameter(gl.VENDOR), renderer: gl.getParameter(gl.RENDERER) };
  } catch (e) { return { error: String(e) }; }
}
// What fingerprinting libraries key on, measured the way they measure it
// (the linkage report compares slots by these): text rendered on a canvas,
// which fonts of a common list the page can use, an audio render, maths,
// and the device's own numbers.
function hash(text) {
  var h = 0x811c9dc5;
  for (var i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
  return ("0000000" + h.toString(16)).slice(-8);
}
function canvasHash() {
  var c = document.createElement("canvas");
  c.width = 400; c.height = 80;
  var x = c.getContext("2d");
  x.textBaseline = "top";
  x.font = "16px Arial"; x.fillText("Cwm fjordbank glyphs vext quiz, \u{1F603}", 2, 2);
  x.font = "15px 'Times New Roman'"; x.fillText("Sphinx of black quartz, judge my vow", 2, 26);
  x.font = "14px sans-serif"; x.fillText("The five boxing wizards jump quickly", 2, 50);
  return hash(c.toDataURL());
}
var FONTS = ["Arial", "Arial Black", "Calibri", "Cambria", "Cantarell", "Carlito", "Caladea",
  "Comic Sans MS", "Courier New", "DejaVu Sans", "DejaVu Serif", "FreeSans", "FreeSerif", "Georgia",
  "Hack", "Helvetica", "Lato", "Liberation Sans", "Liberation Serif", "Nimbus Roman", "Nimbus Sans",
  "Noto Sans", "Noto Serif", "Noto Mono", "Open Sans", "Roboto", "Segoe UI", "Tahoma", "Times New Roman",
  "Ubuntu", "URW Bookman", "Verdana", "Arimo", "Tinos", "Cousine", "P052", "C059", "Z003"];
function fonts() {
  var span = document.createElement("span");
  span.style.cssText = "position:absolute;left:-9999px;font-size:72px";
  span.textContent = "mmmmmmmmmmlli";
  document.body.appendChild(span);
  var base = {};
  ["monospace", "serif", "sans-serif"].forEach(function (f) { span.style.fontFamily = f; base[f] = span.offsetWidth + "x" + span.offsetHeight; });
  var found = FONTS.filter(function (name) {
    return ["monospace", "serif", "sans-serif"].some(function (f) {
      span.style.fontFamily = "'" + name + "'," + f;
      return span.offsetWidth + "x" + span.offsetHeight !== base[f];
    });
  });
  span.remove();
  return found;
}
async function audio() {
  try {
    var ctx = new OfflineAudioContext(1, 5000, 44100);
    var osc = ctx.createOscillator(); osc.type = "triangle"; osc.frequency.value = 10000;
    var comp = ctx.createDynamicsCompressor();
    osc.connect(comp); comp.connect(ctx.destination); osc.start(0);
    var buf = await ctx.startRendering();
    var d = buf.getChannelData(0), sum = 0;
    for (var i = 4500; i < 5000; i++) sum += Math.abs(d[i]);
    return String(sum);
  } catch (e) { return "error"; }
}
async function components(gl) {
  var m = function (q) { return matchMedia(q).matches; };
  return {
    canvas: canvasHash(),
    fonts: fonts().join(","),
    screen: [screen.width, screen.height, screen.availWidth, screen.availHeight].join("x"),
    window: [outerWidth, outerHeight].join("x"),
    dpr: String(devicePixelRatio),
    dark: String(m("(prefers-color-scheme: dark)")),
    languages: Array.from(navigator.languages || []).join(","),
    timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    locale: Intl.DateTimeFormat().resolvedOptions().locale,
    webgl: gl && gl.renderer ? String(gl.renderer) : "none",
    audio: await audio(),
    math: [Math.tan(-1e300), Math.acosh(1e300), Math.expm1(1), Math.sinh(1)].join(","),
    cores: String(navigator.hardwareConcurrency),
    memory: String(navigator.deviceMemory),
    heap: String(performance.memory ? performance.memory.jsHeapSizeLimit : "none"),
  };
}
function frameLoaded() {
  return new Promise(function (ok) {
    var f = document.getElementById("frame");
    if (f.contentDocument && f.contentDocument.readyState === "complete" && f.contentWindow.location.href !== "about:blank") ok(f);
    else f.addEventListener("load", function () { ok(f); });
  });
}
function fromWorker() {
  return new Promise(function (ok) {
    try {
      var w = new Worker("check/worker.js");
      w.onmessage = function (e) { ok(e.data); };
      w.onerror = function (e) { ok({ error: String(e.message || e) }); };
    } catch (e) { ok({ error: String(e) }); }
  });
}
async function notification() {
  var o = { permission: typeof Notification === "undefined" ? null : Notification.permission };
  try { o.query = (await navigator.permissions.query({ name: "notifications" })).state; }
  catch (e) { o.query = "error: " + e; }
  return o;
}
(async function () {
  SEEN.headers = HEADERS;
  // Read once the page has loaded: while it parses, Chromium may not have
  // told it its window's size yet (outer 0×0 on some navigations, a race
  // a person's Chromium has too), where detectors look later.
  await new Promise(function (ok) {
    if (document.readyState === "complete") ok(); else addEventListener("load", ok);
  });
  SEEN.page = await collect(navigator, window);
  var f = await frameLoaded();
  SEEN.frame = await collect(f.contentWindow.navigator, f.contentWindow);
  SEEN.worker = await fromWorker();
  SEEN.notification = await notification();
  SEEN.webgl = webgl();
  SEEN.components = await components(SEEN.webgl);
  var p = document.createElement("p");
  p.id = "ready";
  document.body.appendChild(p);
})();
document.getElementById("finish").addEventListener("click", function () {
  SEEN.probe = PROBE;
  var s = document.createElement("script");
  s.type = "application/json";
  s.id = "result";
  s.textContent = JSON.stringify(SEEN).replace(/</g, "\\u003c");
  document.body.appendChild(s);
  var p = document.createElement("p");
  p.id = "done";
  document.body.appendChild(p);
});
</script></body></html>"#;
