//! A call that holds its identity: every request of a multi-request call
//! goes out through a lease on one slot, the one the router picks first (or
//! the one the caller pins), so a site sees one person for the whole call.
//! Each request is its own lease (the guard, robots, pacing, metrics, the
//! breaker's feedback and the jar save happen per request, in the lease);
//! when that slot rests, the call's next request fails rather than moving
//! to another identity.

use std::sync::Arc;

use super::{Fetched, Lease, Leases};
use crate::error::{Error, ErrorKind, Result};
use crate::request::FetchRequest;
use crate::routing::{Scope, web_key};
use crate::strategy::Outcome;
use crate::web::Robots;

pub struct Call {
    leases: Arc<Leases>,
    slot: Option<usize>,
    /// The caller pinned the slot: it is the call's whatever happens.
    pinned: bool,
    /// Requests this call sent itself (robots.txt and [`Call::http`]).
    sent: usize,
    /// The caller's grants: the identities the call may use.
    scope: Option<Arc<Scope>>,
}

impl Call {
    /// A call on the pool's leases, on slot `pin` when given, on the
    /// identities `scope` grants (`None`: any).
    pub fn new(leases: &Arc<Leases>, pin: Option<usize>, scope: Option<Arc<Scope>>) -> Self {
        Call {
            leases: leases.clone(),
            slot: pin,
            pinned: pin.is_some(),
            sent: 0,
            scope,
        }
    }

    /// A call that holds `slot` for now: a cascade starts there while it is
    /// admitted, and moves the call to the slot that serves it.
    pub fn holding(leases: &Arc<Leases>, slot: usize, scope: Option<Arc<Scope>>) -> Self {
        Call {
            leases: leases.clone(),
            slot: Some(slot),
            pinned: false,
            sent: 0,
            scope,
        }
    }

    /// The caller's grants.
    pub fn scope(&self) -> Option<&Scope> {
        self.scope.as_deref()
    }

    pub fn leases(&self) -> &Arc<Leases> {
        &self.leases
    }

    /// The slot a cascade starts on: the one the call holds, unless pinned
    /// (a pin is the cascade's own option).
    pub(crate) fn held(&self) -> Option<usize> {
        self.slot.filter(|_| !self.pinned)
    }

    /// The call holds `slot` from now on (it served the call).
    pub(crate) fn hold(&mut self, slot: usize) {
        if !self.pinned {
            self.slot = Some(slot);
        }
    }

    /// The slot the call holds, once it has made a request (or was pinned).
    pub fn slot(&self) -> Option<usize> {
        self.slot
    }

    /// Requests the call sent through [`Call::robots`] and [`Call::http`]
    /// (a cascade counts its own tries in its result).
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// The `robots.txt` of `url`'s origin, read (when not kept) on the
    /// call's slot.
    pub async fn robots(&mut self, url: &url::Url) -> Result<Arc<Robots>> {
        let lease = self.leases.lease_for(url, self.slot, self.scope()).await?;
        self.slot = Some(lease.slot());
        self.sent += 1;
        let robots = lease.robots(url).await;
        lease.finish(Outcome::Skipped);
        robots
    }

    /// One HTTP request on the call's slot: lease, [`super::Lease::http`],
    /// finish with its outcome.
    pub async fn http(&mut self, req: FetchRequest) -> Result<Fetched> {
        let lease = self
            .leases
            .lease_for(&req.url, self.slot, self.scope())
            .await?;
        self.slot = Some(lease.slot());
        self.sent += 1;
        let result = lease.http(req, |_, _| ()).await;
        lease.close(result.map(|(f, ())| f))
    }
}

impl Leases {
    /// Lease a slot for whichever strategy covers `url` (its host's
    /// [`web_key`] if none).
    pub async fn lease_for(
        self: &Arc<Self>,
        url: &url::Url,
        pin: Option<usize>,
        scope: Option<&Scope>,
    ) -> Result<Lease> {
        match self.strategy_for(url) {
            Some(s) => self.next_slot(s.name(), pin, scope).await,
            None => {
                // A scheme or host the guard refuses, said in its words.
                self.guard.check_static(url)?;
                let host = url
                    .host_str()
                    .ok_or_else(|| Error::refused("URL has no host"))?;
                self.next_slot(&web_key(host), pin, scope).await
            }
        }
    }

    /// `Err(not_granted)` when `scope` (a caller's grants; `None`: any)
    /// does not cover `url`'s site on slot `slot`: what every hop and page
    /// a call reaches is held to, like its first URL.
    pub fn granted(&self, url: &url::Url, slot: usize, scope: Option<&Scope>) -> Result<()> {
        let Some(scope) = scope else {
            return Ok(());
        };
        let host = url.host_str().unwrap_or_default();
        let key = match self.strategy_for(url) {
            Some(s) => s.name().to_string(),
            None => web_key(host),
        };
        let signed_in = |s: &str| self.sites().signed_in(slot, s);
        let me = crate::routing::grants::Identity {
            slot,
            labels: self.labels(slot),
            signed_in: &signed_in,
        };
        let place = crate::routing::grants::Place {
            key: &key,
            host: Some(host),
        };
        if scope.permits(&me, Some(place)) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::NotGranted,
            format!(
                "key `{}` is not granted {host} (`{key}`) for `{}` on slot {slot}: the call went there by a redirect or from the page, and stopped (`idpool keys list` shows its grants)",
                scope.key, scope.tool
            ),
        ))
    }

    /// One navigation in a slot's browser, as one call: lease, [`Lease::browse`],
    /// finish with its outcome.
    pub async fn browse(
        self: &Arc<Self>,
        url: url::Url,
        wait_for: Option<String>,
        pin: Option<usize>,
        scope: Option<&Scope>,
    ) -> Result<Fetched> {
        let lease = self.lease_for(&url, pin, scope).await?;
        let result = lease.browse(url, wait_for.as_deref(), |_, _| ()).await;
        lease.close(result.map(|(f, ())| f))
    }

    /// One HTTP request, as one call: lease, [`Lease::http`], finish with
    /// its outcome.
    pub async fn http(
        self: &Arc<Self>,
        req: FetchRequest,
        pin: Option<usize>,
        scope: Option<Arc<Scope>>,
    ) -> Result<Fetched> {
        Call::new(self, pin, scope).http(req).await
    }

    /// Warm `slot` up for `strategy`: open `url` in its browser, wait for any
    /// challenge to pass, and save the cookies into its jar. A page still
    /// challenged or blocked at the end is an error.
    pub async fn refresh_cookies(
        self: &Arc<Self>,
        slot: usize,
        strategy: &str,
        url: &url::Url,
    ) -> Result<()> {
        let result = self.warm_up(slot, strategy, url).await;
        let cookies = self.slots.get(slot).map(|s| s.jar().count());
        self.events.emit(
            "cookie_refresh",
            Some(slot),
            Some(strategy),
            serde_json::json!({
                "ok": result.is_ok(),
                "cookies": cookies,
                "error": result.as_ref().err().map(|e| e.to_string()),
            }),
        );
        result
    }

    async fn warm_up(self: &Arc<Self>, slot: usize, strategy: &str, url: &url::Url) -> Result<()> {
        // An operator's own warm-up of a slot they name (the dispatcher
        // checked the slot against the caller's grants).
        let lease = self.next_slot(strategy, Some(slot), None).await?;
        let result = lease.browse(url.clone(), None, |_, _| ()).await;
        let fetched = lease.close(result.map(|(f, ())| f))?;
        match fetched.outcome {
            Outcome::Ok | Outcome::Empty => Ok(()),
            other => Err(Error::new(
                ErrorKind::Refused,
                format!(
                    "the warm-up page ended as {} (HTTP {})",
                    other.as_str(),
                    fetched.response.status
                ),
            )
            .retryable(false)),
        }
    }
}
