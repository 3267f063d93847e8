//! A strategy's host patterns: exact (`shop.example`) or wildcard
//! (`*.shop.example`).

pub(super) fn validate_host_pattern(host: &str) -> Result<(), String> {
    let bare = host.strip_prefix("*.").unwrap_or(host);
    if bare.is_empty()
        || bare.contains(['*', '/', ':', ' '])
        || bare.starts_with('.')
        || bare.ends_with('.')
    {
        return Err(format!(
            "host `{host}` is not a host name (expected `example.com` or `*.example.com`, no scheme or port)"
        ));
    }
    Ok(())
}
