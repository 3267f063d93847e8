//! `robots.txt` for hosts no strategy covers (`web.respect_robots`): fetched
//! once per origin through the lease that first needs it, kept for
//! `web.robots_cache_secs` (an unreachable file for a minute), bounded in
//! number. A refusal is an error naming the rule.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::config::WebConfig;
use crate::error::{Error, Result};
use crate::web::Robots;
use crate::wire::http::FetchResponse;

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

    /// The file of `url`'s origin, read by `fetch` (a lease's request) when
    /// not kept. A host that cannot be reached at all is the caller's error
    /// (the page could not be fetched either), not kept.
    pub(super) async fn robots<F, Fut>(
        &self,
        web: &WebConfig,
        url: &url::Url,
        fetch: F,
    ) -> Result<Arc<Robots>>
    where
        F: FnOnce(url::Url) -> Fut,
        Fut: Future<Output = Result<FetchResponse>>,
    {
        let origin = url.origin().ascii_serialization();
        let ttl = Duration::from_secs(web.robots_cache_secs);
        let cell = self.cell(&origin, Instant::now());
        let (_, robots) = cell
            .get_or_try_init(|| async {
                let at = url::Url::parse(&format!("{origin}/robots.txt"))
                    .map_err(|e| Error::refused(format!("no robots.txt URL for {origin} ({e})")))?;
                let r = fetch(at).await?;
                let robots = Robots::from_answer(r.status, &r.body, &web.robots_agent);
                let keep = match robots {
                    Robots::Unreachable(_) => UNREACHABLE_FOR.min(ttl),
                    _ => ttl,
                };
                Ok::<_, Error>((Instant::now() + keep, Arc::new(robots)))
            })
            .await?;
        Ok(robots.clone())
    }
}
