#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = idpool::wire::fingerprint::tls::parse_client_hello(data);
});
