//! `robots.txt` for hosts no strategy covers (`web.respect_robots`): fetched
//! once per origin through the slot that first needs it, kept for
//! `web.robots_cache_secs` (an unreachable file for a minute), bounded in
//! number. A refusal is an error naming the rule.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::slot::Slot;
use crate::config::WebConfig;
use crate::error::{Error, Result};
use crate::web::Robots;
use crate::wire::http::FetchRequest;

/// Origins whose file is kept; past this, expired ones go, then all.
const MAX_ORIGINS: usize = 1024;
/// How long a file that could not be read is believed.
const UNREACHABLE_FOR: Duration = Duration::from_secs(60);

type Cell = Arc<OnceCell<(Instant, Arc<Robots>)>>;

#[derive(Default)]
pub(super) struct Cache {
    origins: parking_lot::Mutex<HashMap<String, Cell>>,
}

impl Cache {
    /// The cell of `origin`, fresh when its file expired.
    fn cell(&self, origin: &str, now: Instant) -> Cell {
        let mut map = self.origins.lock();
        let expired = |c: &Cell| c.get().is_some_and(|(until, _)| *until <= now);
        if map.get(origin).is_some_and(expired) {
            map.remove(origin);
        }
        if map.len() >= MAX_ORIGINS && !map.contains_key(origin) {
            map.retain(|_, c| !expired(c));
            if map.len() >= MAX_ORIGINS {
                map.clear();
            }
        }
        map.entry(origin.to_string()).or_default().clone()
    }

    /// The file of `url`'s origin, fetched through `slot` when not kept. A
    /// host that cannot be reached at all is the caller's error (the page
    /// could not be fetched either), not kept.
    pub(super) async fn robots(
        &self,
        slot: &Slot,
        web: &WebConfig,
        url: &url::Url,
    ) -> Result<Arc<Robots>> {
        let origin = url.origin().ascii_serialization();
        let ttl = Duration::from_secs(web.robots_cache_secs);
        let cell = self.cell(&origin, Instant::now());
        let (_, robots) = cell
            .get_or_try_init(|| async {
                let robots = fetch(slot, &origin, &web.robots_agent).await?;
                let keep = match robots {
                    Robots::Unreachable(_) => UNREACHABLE_FOR.min(ttl),
                    _ => ttl,
                };
                Ok::<_, Error>((Instant::now() + keep, Arc::new(robots)))
            })
            .await?;
        Ok(robots.clone())
    }

    /// Refuse `url` when its host's `robots.txt` disallows it.
    pub(super) async fn check(&self, slot: &Slot, web: &WebConfig, url: &url::Url) -> Result<()> {
        if !web.respect_robots {
            return Ok(());
        }
        self.robots(slot, web, url)
            .await?
            .check(url)
            .map_err(|why| Error::refused(format!("{why} (web.respect_robots)")).retryable(false))
    }
}

async fn fetch(slot: &Slot, origin: &str, agent: &str) -> Result<Robots> {
    let url = url::Url::parse(&format!("{origin}/robots.txt"))
        .map_err(|e| Error::refused(format!("no robots.txt URL for {origin} ({e})")))?;
    let r = slot.fetch(FetchRequest::get(url)).await?;
    Ok(Robots::from_answer(r.status, &r.body, agent))
}

impl super::Pool {
    /// The `robots.txt` of `url`'s origin (kept, or read now through
    /// `slot`), whether or not `web.respect_robots` is on: `map` reads its
    /// `Sitemap:` lines.
    pub async fn robots_txt(&self, slot: usize, url: &url::Url) -> Result<Arc<Robots>> {
        let s = self
            .slot(slot)
            .ok_or_else(|| Error::not_found(format!("slot {slot} does not exist")))?;
        self.inner.guard.check(url).await?;
        self.inner.robots.robots(s, &self.inner.web, url).await
    }
}
