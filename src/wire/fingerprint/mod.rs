//! What a client's HTTP looks like on the wire, beyond TLS: the HTTP/2
//! connection preface (SETTINGS, WINDOW_UPDATE, PRIORITY frames), each
//! request's HEADERS priority, and every request's header list in the order
//! the client sent it (HTTP/2 via HPACK, HTTP/1.1 from the request head).
//!
//! `tls` parses ClientHellos (JA4 and its parts); `hello` reads one off a
//! fresh connection before the TLS server sees it.
//!
//! `Tap` copies the first bytes a server reads from a (decrypted) connection;
//! [`request_view`] finds one request in them. The testbed logs it; identity
//! calibration compares a slot's browser and HTTP tier with it.

pub mod calibration;
pub mod h1;
pub mod h2;
pub mod hello;
pub mod residual;
mod tap;
pub mod tls;
mod view;

pub use calibration::{
    ASK_ALL, Asked, Calibration, Capture, H1Names, NavigationProfile, Observed, RequestProfile,
    merge_order,
};
pub use residual::Report;
pub use tap::{Tap, TapBuf};
pub use view::{RequestView, h2_view, request_view};
