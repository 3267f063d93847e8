//! The pool's person desk: when a call on a strategy with `[handoff]`
//! meets what it names (a captcha, a sign-in wall, a second factor), the
//! daemon opens a live view of the slot's browser on that page, says so
//! (the `handoff_needed` event, the `[notify] url` webhook, the status
//! page's banner, the call's MCP progress), and the call waits until a
//! person has cleared the page there, up to the strategy's `wait_secs`.
//! The daemon never solves anything itself: without a person in time the
//! call fails `needs_person` with `retry_after`.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::json;

use super::live::{LoginLimits, Logins, Purpose};
use crate::config::NotifyConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::events::Events;
use crate::lease::{Asked, HeldLease, PersonAsk, PersonDesk};

/// How often a waiting call hears that it still waits.
const TELL_EVERY: Duration = Duration::from_secs(15);
/// A webhook's whole request.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Finds a person in the live views.
pub struct Desk {
    /// Weak: the lease source holds the desk, and the logins hold the
    /// lease source.
    logins: Weak<Logins>,
    events: Arc<Events>,
    notify: Option<url::Url>,
    /// What links start with (`http://<server.listen>`).
    link_base: String,
}

impl Desk {
    pub fn new(
        logins: &Arc<Logins>,
        events: Arc<Events>,
        cfg: &NotifyConfig,
        listen: &str,
    ) -> Self {
        Desk {
            logins: Arc::downgrade(logins),
            events,
            notify: cfg.url.as_deref().and_then(|u| url::Url::parse(u).ok()),
            link_base: cfg
                .link_base
                .clone()
                .unwrap_or_else(|| format!("http://{listen}"))
                .trim_end_matches('/')
                .to_string(),
        }
    }

    async fn run(&self, lease: &dyn HeldLease, ask: PersonAsk<'_>) -> Result<()> {
        let (slot, strategy) = (lease.slot(), lease.strategy().to_string());
        let site = ask.url.host_str().unwrap_or_default().to_string();
        let wait = ask.wait;
        let no_person = |what: String| {
            Error::new(
                ErrorKind::NeedsPerson,
                format!(
                    "the site wants a person on slot {slot}, {site} ({}): {what}",
                    ask.why
                ),
            )
            .retryable(false)
            .with_retry_after(wait)
        };
        let cannot = |what: String| {
            Error::new(
                ErrorKind::Unavailable,
                format!("a person cannot be asked on slot {slot}: {what}"),
            )
        };
        let Some(logins) = self.logins.upgrade() else {
            return Err(cannot("the daemon is shutting down".into()));
        };
        let purpose = Purpose::Handoff {
            why: ask.why.clone(),
        };
        let (session, input) = logins
            .register(slot, &strategy, &ask.url, purpose)
            .map_err(|e| cannot(e.message().to_string()))?;
        // A call that goes away while it waits (its client cancelled or
        // hung up) ends the hand-off: the session, its recording, the event.
        let mut waiting = Waiting {
            logins: &logins,
            session: session.clone(),
            events: &self.events,
            slot,
            strategy: &strategy,
            armed: true,
        };
        let live = format!("/live/{}", session.id);
        let link = format!("{}{live}", self.link_base);
        let started = Instant::now();
        let facts = json!({
            "event": "handoff_needed",
            "slot": slot, "strategy": strategy, "site": site,
            "reason": ask.outcome.as_str(), "why": ask.why,
            "live_url": link, "session": session.id, "wait_secs": wait.as_secs(),
        });
        self.events.emit(
            "handoff_needed",
            Some(slot),
            Some(&strategy),
            json!({"site": site, "reason": ask.outcome.as_str(), "why": ask.why,
                   "live": live, "session": session.id, "wait_secs": wait.as_secs()}),
        );
        tracing::warn!(slot, strategy = %strategy, site = %site, why = %ask.why, live = %link, "a call waits for a person");
        if let Some(url) = self.notify.clone() {
            tokio::spawn(post(url, facts));
        }
        (ask.tell)(format!(
            "waiting for a person on slot {slot}, {site}: {} ({}); live view {link}, up to {} s",
            ask.outcome.as_str(),
            ask.why,
            wait.as_secs()
        ));
        let limits = LoginLimits {
            timeout: wait,
            idle: wait,
        };
        let sign_in = ask.outcome == crate::strategy::Outcome::LoginRequired;
        let clearing = logins.clear(lease, &session, input, (ask.url.clone(), sign_in), limits);
        let telling = async {
            let mut every = tokio::time::interval(TELL_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                let left = wait.saturating_sub(started.elapsed()).as_secs();
                (ask.tell)(format!(
                    "still waiting for a person on slot {slot}, {site} ({left} s left)"
                ));
            }
        };
        let end = tokio::select! {
            end = clearing => end,
            () = telling => unreachable!("the telling loop never ends"),
        };
        waiting.armed = false;
        let state = match &end {
            Ok(s) => *s,
            Err(_) => "failed",
        };
        self.events.emit(
            "handoff_done",
            Some(slot),
            Some(&strategy),
            json!({"site": site, "session": session.id, "state": state,
                   "seconds": started.elapsed().as_secs()}),
        );
        match end {
            Ok("cleared" | "logged_in") => {
                (ask.tell)(format!(
                    "a person cleared it on slot {slot}, {site}: the call goes on"
                ));
                Ok(())
            }
            Ok("cancelled") => Err(no_person("the hand-off was cancelled".into())),
            Ok(_) => Err(no_person(format!(
                "nobody cleared it in the live view within {} s",
                wait.as_secs()
            ))),
            Err(e) => Err(cannot(format!("the live view failed: {}", e.message()))),
        }
    }
}

/// A hand-off in progress; dropped armed (its call went away), it ends the
/// live session as cancelled and says so.
struct Waiting<'a> {
    logins: &'a Arc<Logins>,
    session: Arc<super::live::LiveSession>,
    events: &'a Events,
    slot: usize,
    strategy: &'a str,
    armed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.logins.abandon(&self.session);
        self.events.emit(
            "handoff_done",
            Some(self.slot),
            Some(self.strategy),
            json!({"session": self.session.id, "state": "cancelled",
                   "seconds": self.session.started.elapsed().as_secs()}),
        );
    }
}

impl PersonDesk for Desk {
    fn ask<'a>(&'a self, lease: &'a dyn HeldLease, ask: PersonAsk<'a>) -> Asked<'a> {
        Box::pin(self.run(lease, ask))
    }
}

/// POST `facts` to the webhook, once, bounded; a failure is logged.
async fn post(url: url::Url, facts: serde_json::Value) {
    let shown = format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    );
    let client = match wreq::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(3))
        .timeout(NOTIFY_TIMEOUT)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the notify client");
            return;
        }
    };
    let req = client
        .post(url.as_str())
        .header("content-type", "application/json")
        .body(facts.to_string());
    match req.send().await {
        Ok(r) if r.status().is_success() => {
            tracing::info!(to = %shown, "handoff_needed sent to [notify] url");
        }
        Ok(r) => {
            tracing::warn!(to = %shown, status = r.status().as_u16(), "[notify] url refused the notification")
        }
        Err(e) => {
            tracing::warn!(to = %shown, error = %e.without_uri(), "cannot reach [notify] url")
        }
    }
}
