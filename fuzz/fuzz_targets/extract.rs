#![no_main]
use std::sync::OnceLock;

use idpool::strategy::{Strategy, TomlStrategy};

fn testshop() -> &'static TomlStrategy {
    static S: OnceLock<TomlStrategy> = OnceLock::new();
    S.get_or_init(|| {
        let text = include_str!("../../strategies/testshop.toml");
        TomlStrategy::parse(std::path::Path::new("testshop.toml"), text).expect("bundled testshop")
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let body = String::from_utf8_lossy(data);
    let Ok(url) = url::Url::parse("https://shop.test/product-reviews/B0X?page=1") else {
        return;
    };
    for op in testshop().operations().values() {
        for tier in &op.tiers {
            let _ = tier.extractor.extract(&body, tier.html_pointer.as_deref(), &url);
        }
    }
});
