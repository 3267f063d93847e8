#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // What the daemon does first with a POST /mcp body: decode it as MCP's
    // client messages, and find the tool a call names.
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Some(name) = v["params"]["name"].as_str() {
            let _ = idpool::tools::find(name);
        }
        let _ = serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(v);
    }
});
