//! What a caller asks for, as plain values every layer above the
//! foundation may name: an HTTP request (`http.rs`), a browser's actions,
//! captures and waits (`browser.rs`), a session file's format
//! (`session.rs`). They carry no behaviour: the wire sends a request, the
//! browser runs actions, the identity reads sessions. A tool builds them
//! from its arguments without reaching into those layers.

mod browser;
mod http;
mod session;

pub use browser::{Action, Capture, Captured, Direction, MAX_ACTIONS, MAX_WAIT_MS, Until};
pub use http::{FetchRequest, RequestKind};
pub use session::SessionFormat;
