#![no_main]
//! A page's structured data as a site sends it: JSON-LD blocks (broken,
//! nested, huge), microdata and RDFa items (nested, `itemref` cycles), read
//! into products and reviews; and the generic strategy's answers from the
//! same page (its review markup, its next link, its visible prices and
//! counts). Whatever the bytes, nothing panics or overflows a stack, and
//! every rating read lies on its 0–5 scale.

use idpool::strategy::web::answer::{Page, Trust};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(url) = url::Url::parse("https://shop.test/item/1") else {
        return;
    };
    // The bytes as a page, and as the body of a JSON-LD block.
    let block = format!("<script type=\"application/ld+json\">{text}</script>");
    for page in [text.as_ref(), block.as_str()] {
        let found = idpool::strategy::structured::read_text(page, Some(&url));
        let reviews = found.products.iter().flat_map(|p| p.reviews.iter());
        for r in reviews.chain(found.reviews.iter().map(|(_, r)| r)) {
            if let Some(rating) = r.rating {
                assert!((0.0..=5.0).contains(&rating.stars), "{rating:?}");
            }
        }
        let parsed = idpool::dom::document(page);
        let answers = Page::read(&parsed.html, &url);
        if let Ok(ex) = answers.reviews() {
            for item in &ex.items {
                if let Some(stars) = item.get("rating").and_then(|r| r.as_f64()) {
                    assert!((0.0..=5.0).contains(&stars), "{item:?}");
                }
            }
        }
        let _ = answers.product(Trust::Page);
    }
});
