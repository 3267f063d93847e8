//! Where a checked request goes, or why it does not.

use std::net::SocketAddr;

/// Where a checked request goes.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// The address the guard checked.
    Addr(SocketAddr),
    /// A name only the upstream can resolve (a `socks5h` upstream, when it
    /// does not resolve here).
    Name(String, u16),
}

/// Why a request does not go out.
#[derive(Debug)]
pub(crate) enum Denied {
    /// The guard refused the address.
    Refused(String),
    /// The name did not resolve (not a refusal: nothing to refuse).
    Unresolved(String),
}
