//! One tier on one slot: the request built from the tier's template, sent
//! through the lease, and judged (classified, extracted) from one parse of
//! its body.

use serde_json::{Map, Value};

use crate::error::ErrorKind;

use crate::error::Error;
use crate::lease::{Fetched, Lease};
use crate::request::{FetchRequest, RequestKind};
use crate::strategy::extract::Extracted;
use crate::strategy::operation::{Operation, Tier};
use crate::strategy::template::{is_whole_var, render, render_json};
use crate::strategy::{Body, Outcome, Strategy};

/// How one tier ended on one slot.
pub(super) struct TierRun {
    pub(super) end: TierEnd,
    pub(super) status: Option<u16>,
    pub(super) error: Option<String>,
    /// The marker that decided the outcome, or the failed answer's status.
    pub(super) detail: Option<String>,
    /// A request went to the site (or was refused on its way by the guard).
    pub(super) sent: bool,
    /// What the page asked for and the browser's egress refused.
    pub(super) refused: Vec<String>,
    /// The page was content but yielded no items it could prove empty.
    pub(super) unextracted: bool,
    /// The page a person would open to clear what this tier met (for tier
    /// 1, the item's page of tier 2 when there is one).
    pub(super) page: Option<url::Url>,
}

impl TierRun {
    pub(super) fn new(end: TierEnd, status: Option<u16>, error: Option<String>) -> Self {
        TierRun {
            end,
            status,
            error,
            detail: None,
            sent: true,
            refused: Vec::new(),
            unextracted: false,
            page: None,
        }
    }

    /// This tier's attempt, as the caller sees it.
    pub(super) fn outcome(&self) -> Outcome {
        match &self.end {
            TierEnd::Done(ex, ..) if ex.items.is_empty() => Outcome::Empty,
            TierEnd::Done(..) => Outcome::Ok,
            TierEnd::HardBlock => Outcome::HardBlock,
            TierEnd::TierBlock => Outcome::TierBlock,
            TierEnd::RateLimited => Outcome::RateLimited,
            TierEnd::Challenge => Outcome::Challenge,
            TierEnd::LoginRequired => Outcome::LoginRequired,
            TierEnd::NextTier | TierEnd::NextSlot | TierEnd::Refused(_) => Outcome::Failed,
        }
    }
}

pub(super) enum TierEnd {
    /// Items, or a page proven genuinely empty (`Extracted::empty`).
    Done(Extracted, u16, String),
    /// The identity is refused: stop on this slot.
    HardBlock,
    /// This tier is refused: the next HTTP tier may not be.
    TierBlock,
    /// The identity goes too fast: stop on this slot, it rests.
    RateLimited,
    Challenge,
    /// The site wants a signed-in identity: stop on this slot, no breaker
    /// failure (it is `logged_out` now).
    LoginRequired,
    /// Try the next tier on this slot (e.g. extraction found nothing usable).
    NextTier,
    /// Give up on this slot (network, timeout, 5xx).
    NextSlot,
    /// The SSRF guard refused the URL or a redirect: no slot may go there.
    Refused(Error),
}

/// One tier on the lease's slot: the request built from the tier's
/// template, sent through the lease, and judged from one parse of its body.
pub(super) async fn run_tier(
    lease: &Lease,
    strategy: &dyn Strategy,
    op: &Operation,
    tier: &Tier,
    vars: &Map<String, Value>,
    record: Option<&super::Recorder>,
) -> TierRun {
    let url_text = render(&tier.url, vars, true);
    let url = match url::Url::parse(&url_text) {
        Ok(u) => u,
        Err(e) => {
            let error = format!("bad URL `{url_text}` ({e})");
            return TierRun {
                sent: false,
                ..TierRun::new(TierEnd::NextTier, None, Some(error))
            };
        }
    };
    // A URL the caller gave whole stays on the strategy's own hosts: one
    // road to each site, under its own routing key.
    if is_whole_var(&tier.url) && !url.host_str().is_some_and(|h| strategy.covers(h)) {
        let e = Error::refused(format!(
            "`{}` is not on a host of strategy `{}`",
            url.origin().ascii_serialization(),
            strategy.name()
        ))
        .retryable(false);
        let error = Some(e.to_string());
        return TierRun {
            sent: false,
            ..TierRun::new(TierEnd::Refused(e), None, error)
        };
    }
    let judged = |f: &Fetched, body: &Body<'_>| {
        if let Some(r) = record {
            r.keep(tier.number, f);
        }
        judge(strategy, op, tier, f, body)
    };
    let page = match tier.number {
        1 => (op.tiers.iter())
            .find(|t| t.number == 2)
            .and_then(|t| url::Url::parse(&render(&t.url, vars, true)).ok())
            .or_else(|| Some(url.clone())),
        _ => Some(url.clone()),
    };
    let result = if tier.number == 3 {
        lease.browse(url, tier.wait_for.as_deref(), judged).await
    } else {
        lease.http(http_request(op, tier, url, vars), judged).await
    };
    match result {
        Ok((fetched, ran)) => TierRun {
            refused: fetched.refused,
            page,
            ..ran
        },
        // Refused by the guard, or by the caller's grants on a hop: no
        // tier and no slot would be let go there either.
        Err(e) if matches!(e.kind(), ErrorKind::Refused | ErrorKind::NotGranted) => {
            let error = Some(e.to_string());
            TierRun::new(TierEnd::Refused(e), None, error)
        }
        // The strategy's request budget has no room: nothing was sent, and
        // no other slot would do better.
        Err(e) if e.kind() == ErrorKind::Unavailable => {
            let error = Some(e.to_string());
            TierRun {
                sent: false,
                ..TierRun::new(TierEnd::Refused(e), None, error)
            }
        }
        Err(e) => TierRun::new(TierEnd::NextSlot, None, Some(e.to_string())),
    }
}

/// The HTTP request of tier 1 or 2.
fn http_request(
    op: &Operation,
    tier: &Tier,
    url: url::Url,
    vars: &Map<String, Value>,
) -> FetchRequest {
    let mut req = FetchRequest::get(url);
    req.method = tier.method.clone();
    if tier.number == 1 {
        // The page's own AJAX call: a calibrated slot sends its browser's
        // XHR headers, with the item's page (tier 2) as the referer.
        req.kind = RequestKind::Xhr;
        req.referer = op
            .tiers
            .iter()
            .find(|t| t.number == 2)
            .and_then(|t| url::Url::parse(&render(&t.url, vars, true)).ok());
    }
    for (k, v) in &tier.headers {
        req.headers.push((k.clone(), v.clone()));
    }
    if let Some(form) = &tier.form {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(
                form.iter()
                    .map(|(k, v)| (k.clone(), render(v, vars, false))),
            )
            .finish();
        req.headers.push((
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
        req.body = Some(body.into());
    } else if let Some(json) = &tier.json {
        req.headers
            .push(("content-type".into(), "application/json".into()));
        req.body = Some(render_json(json, vars).to_string().into());
    }
    req
}

/// Judge a tier's answer (classified by the lease) and extract its items,
/// from the same parse of its body.
fn judge(
    strategy: &dyn Strategy,
    op: &Operation,
    tier: &Tier,
    fetched: &Fetched,
    body: &Body<'_>,
) -> TierRun {
    let status = fetched.response.status;
    let final_url = &fetched.response.final_url;
    let done = |ex: Extracted| TierEnd::Done(ex, status, final_url.to_string());
    let own_block = || {
        tier.block
            .as_ref()
            .and_then(|b| b.explain(status, final_url.as_str(), body))
            .map(|why| format!("[tier{}.block] {why}", tier.number))
    };
    let mut detail = fetched.detail.clone();
    // An operation that needs a signed-in identity got a signed-out page:
    // the page's content still decides (items are items, signed in or not);
    // only a page without them is the sign-in wall.
    let signed_out = match &fetched.login {
        Some((crate::strategy::LoginState::LoggedOut, why)) if op.requires_login => Some(why),
        _ => None,
    };
    let login_required = |why: &String| TierRun {
        detail: Some(why.clone()),
        ..TierRun::new(TierEnd::LoginRequired, Some(status), None)
    };
    let end = match fetched.outcome {
        Outcome::HardBlock => TierEnd::HardBlock,
        Outcome::LoginRequired => TierEnd::LoginRequired,
        Outcome::RateLimited => TierEnd::RateLimited,
        Outcome::Challenge => TierEnd::Challenge,
        Outcome::TierBlock => TierEnd::TierBlock,
        _ if let Some(why) = own_block() => {
            detail = Some(why);
            TierEnd::TierBlock
        }
        Outcome::Failed | Outcome::Skipped => TierEnd::NextSlot,
        Outcome::Empty => done(Extracted {
            empty: true,
            ..Default::default()
        }),
        Outcome::Ok if fetched.wait_for_missed.is_some() => {
            if let Some(why) = signed_out {
                return login_required(why);
            }
            let error = format!(
                "`{}` did not appear",
                tier.wait_for.clone().unwrap_or_default()
            );
            return TierRun::new(TierEnd::NextTier, Some(status), Some(error));
        }
        Outcome::Ok => match strategy.extract(op, tier, body, final_url) {
            Ok(ex) => done(ex),
            Err(_) if let Some(why) = signed_out => return login_required(why),
            Err(e) => {
                return TierRun {
                    unextracted: true,
                    ..TierRun::new(TierEnd::NextTier, Some(status), Some(e))
                };
            }
        },
    };
    TierRun {
        detail,
        ..TierRun::new(end, Some(status), None)
    }
}
