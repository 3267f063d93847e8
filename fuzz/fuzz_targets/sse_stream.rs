#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The first byte says where to cut the stream in two.
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut).min(rest.len());
    let mut p = idpool::mcp::client::SseParser::default();
    let mut events = p.push(&rest[..at]);
    events.extend(p.push(&rest[at..]));
    let whole = idpool::mcp::client::SseParser::default().push(rest);
    assert_eq!(events, whole, "cutting the stream changed its events");
});
