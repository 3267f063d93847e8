#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = idpool::strategy::TomlStrategy::parse(std::path::Path::new("fuzz.toml"), text);
    }
});
