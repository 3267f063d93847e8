#![no_main]
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut b = PREFACE.to_vec();
    b.extend_from_slice(data);
    let _ = idpool::wire::fingerprint::h2::parse(&b);
});
