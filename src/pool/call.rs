//! A call that holds its identity: every request of a multi-request call
//! goes out through a lease on one slot, the one the router picks first (or
//! the one the caller pins), so a site sees one person for the whole call.
//! Each request is its own lease (the guard, robots, pacing, metrics, the
//! breaker's feedback and the jar save happen per request, in the lease);
//! when that slot rests, the call's next request fails rather than moving
//! to another identity.

use std::sync::Arc;

use super::{Fetched, Pool};
use crate::error::Result;
use crate::strategy::Outcome;
use crate::web::Robots;
use crate::wire::http::FetchRequest;

pub struct Call<'a> {
    pool: &'a Pool,
    slot: Option<usize>,
}

impl<'a> Call<'a> {
    /// A call on `pool`, on slot `pin` when given.
    pub fn new(pool: &'a Pool, pin: Option<usize>) -> Self {
        Call { pool, slot: pin }
    }

    /// The slot the call holds, once it has made a request (or was pinned).
    pub fn slot(&self) -> Option<usize> {
        self.slot
    }

    /// The `robots.txt` of `url`'s origin, read (when not kept) on the
    /// call's slot.
    pub async fn robots(&mut self, url: &url::Url) -> Result<Arc<Robots>> {
        let lease = self.pool.lease_for(url, self.slot).await?;
        self.slot = Some(lease.slot());
        let robots = lease.robots(url).await;
        lease.finish(Outcome::Skipped);
        robots
    }

    /// One HTTP request on the call's slot: lease, [`super::Lease::http`],
    /// finish with its outcome.
    pub async fn http(&mut self, req: FetchRequest) -> Result<Fetched> {
        let lease = self.pool.lease_for(&req.url, self.slot).await?;
        self.slot = Some(lease.slot());
        let result = lease.http(req, |_, _| ()).await;
        lease.close(result.map(|(f, ())| f))
    }
}
