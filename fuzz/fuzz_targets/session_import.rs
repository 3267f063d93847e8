#![no_main]
use idpool::identity::session;
use idpool::request::SessionFormat as Format;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = session::detect(&text);
    for f in [Format::Auto, Format::Netscape, Format::Json, Format::StorageState] {
        let _ = session::parse(&text, f);
    }
});
