//! Attaching chromiumoxide to a started Chromium: through the DevTools
//! relay (inside the browsers' namespace when there is one), then handing
//! the process to its supervisor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::Browser;
use chromiumoxide::handler::HandlerConfig;
use tokio::sync::oneshot;

use super::supervisor::{self, Flags};
use super::{LaunchSpec, Running, SlotBrowser, launcher, process, relay};
use crate::error::{Error, ErrorKind, Result};

impl SlotBrowser {
    /// Attach chromiumoxide to a started Chromium and hand the process to
    /// its supervisor; a Chromium that cannot be attached to is ended.
    pub(super) async fn attach(
        &self,
        spec: &LaunchSpec,
        started: launcher::Started,
    ) -> Result<Running> {
        let launcher::Started {
            child,
            pid,
            ws_url,
            outside_group,
            display,
        } = started;
        let handler_cfg = HandlerConfig {
            // Certificate checks stay on: extra roots are pinned by SPKI instead.
            ignore_https_errors: false,
            viewport: None,
            request_timeout: Duration::from_secs(self.cfg.op_timeout_secs),
            ..HandlerConfig::default()
        };
        // Inside the namespace, DevTools is reachable from its thread alone:
        // the connection (through the relay that caps Chromium's messages)
        // is made there, and its handler polled there.
        let flags = Arc::new(Flags::default());
        let cap = relay::cap(self.page_limit);
        let who = relay::Relayed {
            slot: spec.slot,
            pid,
            flags: flags.clone(),
        };
        let slot = spec.slot;
        let connect = async move {
            let url = relay::open(&ws_url, cap, who).await?;
            Browser::connect_with_config(url, handler_cfg)
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Network,
                        format!("slot {slot}: cannot attach to Chromium's DevTools"),
                    )
                    .with_source(e)
                })
        };
        // `None`: timed out (or the namespace's task was lost).
        let connected = match &spec.netns {
            Some(ns) => tokio::time::timeout(spec.launch_timeout, ns.spawn(connect))
                .await
                .ok()
                .and_then(Result::ok),
            None => tokio::time::timeout(spec.launch_timeout, connect)
                .await
                .ok(),
        };
        let (browser, handler) = match connected {
            Some(Ok(pair)) => pair,
            failed => {
                abandon(child, &outside_group, display).await;
                return Err(match failed {
                    Some(Err(e)) => e,
                    _ => Error::new(
                        ErrorKind::Timeout,
                        format!("slot {}: attaching to Chromium timed out", spec.slot),
                    ),
                });
            }
        };
        let (stop_tx, stop_rx) = oneshot::channel();
        {
            let mut f = self.facts.lock();
            f.running = true;
            f.pid = Some(pid);
            f.launches += 1;
            f.ops_since_recycle = 0;
            f.pids.push(pid);
        }
        let supervise = supervisor::supervise(
            supervisor::Watched {
                slot: spec.slot,
                child,
                pid_file: spec.pid_file.clone(),
                outside_group,
                display,
            },
            handler,
            stop_rx,
            flags.clone(),
            self.facts.clone(),
        );
        let supervisor = match &spec.netns {
            Some(ns) => ns.spawn(supervise),
            None => tokio::spawn(supervise),
        };
        Ok(Running {
            browser,
            page: None,
            pid,
            flags,
            stop: Some(stop_tx),
            supervisor,
            last_used: Instant::now(),
        })
    }
}

/// End a Chromium that could not be attached to, with its crashpad
/// handlers and its display.
async fn abandon(
    mut child: tokio::process::Child,
    outside_group: &[u32],
    display: Option<super::display::Xvfb>,
) {
    process::kill_and_reap(&mut child).await;
    process::end_outside(outside_group).await;
    if let Some(d) = display {
        d.end().await;
    }
}
