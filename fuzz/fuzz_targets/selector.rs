#![no_main]
//! A caller's CSS selector: checked, then parsed, then matched against a
//! small page. Whatever the text, nothing panics or overflows a stack.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let css = String::from_utf8_lossy(data);
    let _ = idpool::diag::css_problem(&css);
    if let Ok(sel) = idpool::dom::selector::parse(&css) {
        let page = idpool::dom::document("<html><body><div id=a class=b><p>x</p><a href=/>y</a></div></body></html>");
        let _ = page.html.select(&sel).count();
    }
});
