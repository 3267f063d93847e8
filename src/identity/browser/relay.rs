//! A cap on what Chromium may send the daemon over DevTools.
//!
//! chromiumoxide opens its WebSocket with no message limit, so a page that
//! makes Chromium send one huge message (a console call with a string of a
//! gigabyte, an event carrying a page's data) would be held in the daemon's
//! memory whole. The daemon's connection goes through this relay instead: it
//! reads Chromium's side with a cap, checked on each frame's header before
//! anything is allocated. A message over the cap ends that browser (its slot
//! relaunches on the next use) and says so: the failed operation's error and
//! the slot's `last_error` name the cap.
//!
//! The relay listens on loopback where the DevTools port lives (inside the
//! browsers' namespace when there is one), takes exactly one connection,
//! the daemon's, and closes its listener.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

use super::process;
use super::supervisor::Flags;
use crate::error::{Error, ErrorKind, Result};

/// The largest DevTools message accepted from Chromium: four times the page
/// limit (a page's HTML is measured in the page and sent at most once; a
/// screenshot's base64 and the JSON around it fit), and never under 64 MiB.
pub fn cap(page_limit: usize) -> usize {
    page_limit.saturating_mul(4).max(64 << 20)
}

/// How long the relay waits for its one connection, and its handshake.
const ACCEPT_WITHIN: Duration = Duration::from_secs(30);

/// What the relay needs to end its browser.
pub struct Relayed {
    pub slot: usize,
    /// The browser's process group.
    pub pid: u32,
    pub flags: Arc<Flags>,
}

/// Start a relay to `ws_url` (Chromium's DevTools) in the calling runtime;
/// returns the URL chromiumoxide connects to instead.
pub async fn open(ws_url: &str, cap: usize, who: Relayed) -> Result<String> {
    let network = |what: &str, e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::Network,
            format!("slot {}: DevTools relay: {what}: {e}", who.slot),
        )
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(cap))
        .max_frame_size(Some(cap));
    let (chromium, _) = tokio_tungstenite::connect_async_with_config(ws_url, Some(config), true)
        .await
        .map_err(|e| network("cannot reach Chromium", &e))?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| network("cannot listen", &e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| network("no address", &e))?;
    let path = ws_url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("/");
    tokio::spawn(async move {
        let accepted = tokio::time::timeout(ACCEPT_WITHIN, listener.accept()).await;
        drop(listener);
        let Ok(Ok((stream, _))) = accepted else {
            tracing::warn!(
                slot = who.slot,
                "DevTools relay: the daemon never connected"
            );
            return;
        };
        let _ = stream.set_nodelay(true);
        let Ok(Ok(daemon)) =
            tokio::time::timeout(ACCEPT_WITHIN, tokio_tungstenite::accept_async(stream)).await
        else {
            tracing::warn!(slot = who.slot, "DevTools relay: no WebSocket handshake");
            return;
        };
        pump(daemon, chromium, cap, &who).await;
    });
    Ok(format!("ws://{addr}{path}"))
}

/// Forward both ways until either side closes; a message over the cap from
/// Chromium ends the browser.
async fn pump<D, C>(daemon: D, chromium: C, cap: usize, who: &Relayed)
where
    D: StreamExt<Item = tungstenite::Result<Message>> + SinkExt<Message> + Unpin,
    C: StreamExt<Item = tungstenite::Result<Message>> + SinkExt<Message> + Unpin,
{
    let (mut to_daemon, mut from_daemon) = daemon.split();
    let (mut to_chromium, mut from_chromium) = chromium.split();
    loop {
        tokio::select! {
            m = from_daemon.next() => match m {
                Some(Ok(m)) if !m.is_close() => {
                    if to_chromium.send(m).await.is_err() {
                        break;
                    }
                }
                _ => break,
            },
            m = from_chromium.next() => match m {
                Some(Ok(m)) if !m.is_close() => {
                    if to_daemon.send(m).await.is_err() {
                        break;
                    }
                }
                Some(Err(tungstenite::Error::Capacity(e))) => {
                    let why = format!(
                        "Chromium sent a DevTools message over {} MiB ({e}): the browser was ended",
                        cap >> 20
                    );
                    tracing::warn!(slot = who.slot, "{why}");
                    *who.flags.ended_because.lock() = Some(why);
                    process::signal_group(who.pid, libc::SIGKILL);
                    break;
                }
                _ => break,
            },
        }
    }
    let _ = to_daemon.close().await;
    let _ = to_chromium.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_follows_the_page_limit_and_has_a_floor() {
        assert_eq!(cap(16 << 20), 64 << 20);
        assert_eq!(cap(1 << 20), 64 << 20);
        assert_eq!(cap(32 << 20), 128 << 20);
        assert_eq!(cap(usize::MAX), usize::MAX);
    }
}
