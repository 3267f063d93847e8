#![no_main]
//! A page as a site sends it, through every conversion `scrape`, `map` and
//! `crawl` make: the bounded parse, cleaned HTML, markdown, text, links.
//! Whatever the bytes, nothing panics, overflows a stack or nests deeper
//! than the cap.

use idpool::web::{Page, Pick};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let html = String::from_utf8_lossy(data);
    let Ok(url) = url::Url::parse("https://site.test/a/b") else {
        return;
    };
    let parsed = idpool::dom::document(&html);
    assert!(idpool::dom::depth(&parsed.html) <= idpool::dom::MAX_DEPTH + 1);
    let page = Page::parse(&html, &url);
    for only_main in [false, true] {
        let pick = Pick::main(only_main);
        let _ = page.markdown(&pick);
        let _ = page.text(&pick);
        let _ = page.cleaned_html(&pick);
    }
    let _ = page.links();
    let _ = page.title();
    let f = idpool::dom::fragment(&html);
    assert!(idpool::dom::depth(&f.html) <= idpool::dom::MAX_DEPTH + 1);
});
