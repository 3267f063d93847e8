//! A lease: one slot held for one strategy, and the one way to use it.
//!
//! Taken before the work, moved into it, released on drop (in-flight counts,
//! half-open trials). Everything a call does on its slot goes through it:
//! [`Lease::http`] and [`Lease::browse`] run one request each (the SSRF guard,
//! the jar save, the calibration trigger, the classification under the
//! strategy and the request metric happen inside, once), the tier memory is
//! read and written through it, and [`Lease::finish`] feeds the breaker.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

use super::Leases;
use super::gate;
use crate::error::{Error, ErrorKind, Result};
use crate::identity::slot::Slot;
use crate::request::{FetchRequest, RequestKind};
use crate::routing::{Admission, BreakerState, Verdict};
use crate::strategy::web::walls;
use crate::strategy::{self, Body, Outcome, Politeness, Strategy};
use crate::wire::http::FetchResponse;

/// Which tier served a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Http,
    Browser,
}

/// One request's answer on a leased slot, classified under its strategy.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub via: Via,
    pub slot: usize,
    pub strategy: String,
    /// This request was its breaker's half-open trial.
    pub trial: bool,
    pub outcome: Outcome,
    /// Why the outcome is a refusal: the marker that matched (`[block]
    /// body has "validateCaptcha"`), or the status of a failed answer.
    pub detail: Option<String>,
    pub response: FetchResponse,
    /// The `wait_for` selector that did not appear in time (browser only).
    pub wait_for_missed: Option<String>,
    /// What the page asked for and the browser's egress refused
    /// (`host:port: reason`; browser only).
    pub refused: Vec<String>,
    /// Whether the answer shows the identity signed in or out (the
    /// strategy's `[session]` markers, or a `[login]` wall), and why.
    pub login: Option<(crate::strategy::LoginState, String)>,
    /// The screenshot and PDF a browser call asked for.
    pub captured: crate::request::Captured,
    /// What of the answer was left out, in words (a browser page longer
    /// than `http.max_body_bytes`).
    pub cut: Vec<String>,
    /// The recording of this browser page (`[recording]`), by id.
    pub recording: Option<String>,
}

/// Permission to use one slot for one strategy.
pub struct Lease {
    pub(super) leases: Arc<Leases>,
    slot: Arc<Slot>,
    pub(super) strategy: String,
    /// The strategy as registered when the lease was taken (`None`: direct).
    rules: Option<Arc<dyn Strategy>>,
    pub(super) politeness: Politeness,
    admission: Admission,
    /// The longest `Retry-After` the site sent under this lease.
    retry_after: Mutex<Option<Duration>>,
    finished: bool,
    /// Its first request's turn in the request budget came before the
    /// lease was handed out (`Leases::next_slot`).
    pub(super) paid: std::sync::atomic::AtomicBool,
    /// The request budget's generation its latest request was reserved
    /// under (in a fleet: the fleet budget's cuts so far; a cut after it
    /// makes that request's pushback old news).
    pub(super) generation: std::sync::atomic::AtomicU64,
    /// The caller's grants (`None`: any identity, any site): every hop and
    /// every page a tab lands on is held to them, like the first URL.
    pub(super) scope: Option<Arc<crate::routing::Scope>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("slot", &self.slot.id)
            .field("strategy", &self.strategy)
            .field("trial", &self.admission.trial)
            .finish()
    }
}

impl Lease {
    pub(super) fn new(
        leases: Arc<Leases>,
        slot: usize,
        strategy: &str,
        admission: Admission,
    ) -> Self {
        let rules = leases.strategy(strategy);
        let politeness = crate::routing::router::politeness_of(rules.as_deref(), &leases.cfg.web);
        Lease {
            politeness,
            slot: leases.slots[slot].clone(),
            leases,
            strategy: strategy.to_string(),
            rules,
            admission,
            retry_after: Mutex::new(None),
            finished: false,
            paid: std::sync::atomic::AtomicBool::new(false),
            generation: std::sync::atomic::AtomicU64::new(0),
            scope: None,
        }
    }

    pub fn slot(&self) -> usize {
        self.slot.id
    }

    /// The leased slot itself, for this module's extensions.
    pub(super) fn slot_ref(&self) -> &Arc<Slot> {
        &self.slot
    }

    /// A page a tab landed on (after a step of a session), classified
    /// under the strategy and counted as tier 3.
    pub(super) fn judge_landed(
        &self,
        page: crate::identity::browser::PageResult,
        at: url::Url,
        started: std::time::Instant,
    ) -> (Fetched, ()) {
        self.judge_page(page, at, Vec::new(), started, None, |_, _| ())
    }

    pub fn strategy(&self) -> &str {
        &self.strategy
    }
    /// This lease is its breaker's half-open trial: one request on one tier.
    pub fn is_trial(&self) -> bool {
        self.admission.trial
    }

    /// Whether `tier` hard-blocked this (slot, strategy) within the cascade's
    /// `tier_cooldown_secs`.
    pub fn tier_blocked(&self, tier: u8) -> bool {
        let cooldown = Duration::from_secs(self.leases.cfg.cascade.tier_cooldown_secs);
        let now = Instant::now();
        let mut router = self.leases.router.lock();
        router
            .site(self.slot.id, &self.strategy, self.leases.cfg.breaker)
            .tier_blocked_at
            .get(usize::from(tier))
            .copied()
            .flatten()
            .is_some_and(|t| now.duration_since(t) < cooldown)
    }

    /// `op`'s page was the sign-in wall for this (slot, strategy) now.
    pub fn note_walled(&self, op: &str) {
        let mut router = self.leases.router.lock();
        let site = router.site(self.slot.id, &self.strategy, self.leases.cfg.breaker);
        site.note_walled(op, Instant::now());
    }

    /// Remember that `tier` hard-blocked this (slot, strategy) now.
    pub fn mark_tier_blocked(&self, tier: u8, why: Option<&str>) {
        {
            let mut router = self.leases.router.lock();
            let site = router.site(self.slot.id, &self.strategy, self.leases.cfg.breaker);
            if let Some(t) = site.tier_blocked_at.get_mut(usize::from(tier)) {
                *t = Some(Instant::now());
            }
        }
        self.leases.events.emit(
            "tier_blocked",
            Some(self.slot.id),
            Some(&self.strategy),
            serde_json::json!({"tier": tier, "detail": why}),
        );
    }

    /// One HTTP request on this slot (tier 1 for an XHR, else tier 2): its
    /// redirects checked by the SSRF guard, its cookies saved, its answer
    /// classified and counted. `read` sees the answer and its body before
    /// the body's parse is dropped (extraction shares it).
    pub async fn http<T>(
        &self,
        req: FetchRequest,
        read: impl FnOnce(&Fetched, &Body<'_>) -> T,
    ) -> Result<(Fetched, T)> {
        let tier = if req.kind == RequestKind::Xhr { 1 } else { 2 };
        let started = self.pass(&req.url, gate::HTTP).await?;
        // Redirects are followed here, hop by hop, so each one passes the
        // gates the first URL passed (the guard, in the client; the key's
        // grants, robots and the site's pacing, here).
        let mut req = req;
        req.follow = false;
        let max = self.slot.max_redirects();
        let mut hops = 0;
        let response = loop {
            let r = self.counted(tier, started, self.slot.fetch(&req).await)?;
            let Some(next) = req.redirected(&r) else {
                break r;
            };
            if hops >= max {
                return self.counted(
                    tier,
                    started,
                    Err(Error::refused(format!(
                        "{}: more than {max} redirects",
                        crate::diag::redact_text(req.url.as_str())
                    ))
                    .retryable(false)),
                );
            }
            hops += 1;
            let judged = self
                .judge_hop(&req.url, "was redirected to", &next.url)
                .await;
            self.counted(tier, started, judged)?;
            self.pace().await?;
            req = next;
        };
        if let Some(d) = strategy::outcome::retry_after(response.retry_after()) {
            self.wait_asked(d);
        }
        // `Bytes` clones share the buffer: the body is read in place.
        let raw = response.body.clone();
        crate::dom::offload::read_page(raw.len());
        // A big page is read without holding up the runtime thread's
        // other tasks (the parse is bounded; this keeps it off their time).
        let (fetched, seen) = crate::dom::offload::heavy(raw.len(), || {
            let text = crate::wire::http::utf8_text(&raw);
            let body = Body::new(&text, response.content_type());
            let outcome = self.classify(response.status, response.final_url.as_str(), &body);
            self.leases
                .record(&self.strategy, tier, outcome.as_str(), started.elapsed());
            let detail = self.explain(outcome, response.status, response.final_url.as_str(), &body);
            let mut fetched = self.fetched(Via::Http, outcome, response, None);
            fetched.detail = detail;
            self.judge_login(&mut fetched, &body);
            let seen = read(&fetched, &body);
            (fetched, seen)
        });
        Ok((fetched, seen))
    }

    /// One navigation of this slot's browser (tier 3): the URL and the page
    /// it ended on checked by the SSRF guard, challenges waited out, cookies
    /// synced with the jar and saved, the answer classified and counted, and
    /// the slot calibrated behind it when due. `read` as for [`Lease::http`].
    pub async fn browse<T>(
        &self,
        url: url::Url,
        wait_for: Option<&str>,
        read: impl FnOnce(&Fetched, &Body<'_>) -> T,
    ) -> Result<(Fetched, T)> {
        let opts = super::BrowseOptions {
            wait_for: wait_for.map(str::to_string),
            ..super::BrowseOptions::default()
        };
        self.browse_with(url, &opts, read).await
    }

    /// [`Lease::browse`] with actions on the page and captures of it.
    pub async fn browse_with<T>(
        &self,
        url: url::Url,
        opts: &super::BrowseOptions,
        read: impl FnOnce(&Fetched, &Body<'_>) -> T,
    ) -> Result<(Fetched, T)> {
        let wait_for = opts.wait_for.as_deref();
        let started = self.pass(&url, gate::BROWSER).await?;
        let rec = self.begin_recording(super::RecordingKind::Call);
        let tape = rec.as_ref().map(|r| r.tape.clone());
        let result = self.navigate(url, opts, tape).await;
        let recording = self.end_recording(rec, result.as_ref().err()).await;
        let (page, final_url, refused) = self.counted(3, started, result)?;
        let (mut fetched, seen) =
            self.judge_page(page, final_url, refused, started, wait_for, read);
        fetched.recording = recording;
        Ok((fetched, seen))
    }

    /// One navigation of `tab`, a tab an interactive session holds in this
    /// lease's slot's browser (the caller holds the browser's turn): the URL
    /// and the page it ended on checked by the SSRF guard, robots, paced,
    /// classified and counted as tier 3, like [`Lease::browse`]; the caller
    /// hands the answer to [`Lease::close`] for the breaker.
    pub async fn navigate_tab(
        &self,
        tab: &chromiumoxide::Page,
        url: url::Url,
        deadline: std::time::Instant,
    ) -> Result<Fetched> {
        let started = self.pass(&url, gate::BROWSER).await?;
        let normal = |_: &str, _: &str, _: u16| crate::identity::browser::PageState::Normal;
        let limit = self.slot.browser().page_limit();
        let page = crate::identity::browser::settle::navigate(
            tab,
            url.as_str(),
            None,
            &normal,
            deadline,
            limit,
        )
        .await;
        let page = self.counted(3, started, page)?;
        let final_url = match self.ended_on(&page.final_url, url).await {
            Ok(u) => u,
            Err(e) => {
                crate::identity::browser::tab::blank(tab).await;
                return Err(e);
            }
        };
        self.slot.count_page();
        let (fetched, ()) = self.judge_page(page, final_url, Vec::new(), started, None, |_, _| ());
        Ok(fetched)
    }

    /// Open `url` in this slot's browser for a person, and keep the browser:
    /// the turn comes back held with the tab showing the page (a login
    /// session's live view works in it until the turn drops). The page is
    /// guarded, paced, counted and judged like every navigation; what the
    /// person does afterwards leaves through the slot's guarded egress.
    pub async fn hold_browser(
        &self,
        url: url::Url,
    ) -> Result<(
        crate::identity::browser::Turn<'_>,
        chromiumoxide::Page,
        Fetched,
    )> {
        let started = self.pass(&url, gate::BROWSER).await?;
        let probe = |h: &str, u: &str, status: u16| self.page_state(h, u, status);
        let req = self.browser_request(&url, &Default::default());
        let mut turn = self.slot.browser().turn().await?;
        let page = turn.navigate(&req, Some(self.slot.jar()), &probe).await;
        let page = self.counted(3, started, page)?;
        let (_, tab) = turn.running().await?;
        // A tab recycled right after the navigation is blank: open the page
        // again in the tab the person will see.
        let blank = !(tab.url().await.ok().flatten()).is_some_and(|u| u.starts_with("http"));
        if blank {
            let deadline = std::time::Instant::now()
                + Duration::from_secs(self.slot.browser().op_timeout_secs());
            let normal = |_: &str, _: &str, _: u16| crate::identity::browser::PageState::Normal;
            crate::identity::browser::settle::navigate(
                &tab,
                url.as_str(),
                None,
                &normal,
                deadline,
                self.slot.browser().page_limit(),
            )
            .await?;
        }
        let final_url = self.ended_on(&page.final_url, url).await?;
        let (fetched, ()) = self.judge_page(page, final_url, Vec::new(), started, None, |_, _| ());
        Ok((turn, tab, fetched))
    }

    /// The browser's request for `url` under this lease's strategy (its
    /// cookie domain, else the URL's host).
    fn browser_request(
        &self,
        url: &url::Url,
        opts: &super::BrowseOptions,
    ) -> crate::identity::browser::BrowserRequest {
        crate::identity::browser::BrowserRequest {
            url: url.to_string(),
            wait_for: opts.wait_for.clone(),
            cookie_domain: (self.rules.as_deref())
                .map(|s| s.cookie_domain().to_string())
                .or_else(|| url.host_str().map(str::to_string)),
            actions: opts.actions.clone(),
            capture: opts.capture,
            tape: None,
        }
    }

    /// How a page reads to this lease's strategy (to the open web's
    /// markers when there is none).
    fn page_state(&self, html: &str, url: &str, status: u16) -> crate::dom::PageState {
        match self.rules.as_deref() {
            Some(s) => s.page_state(html, url, status),
            None => walls::OPEN_WEB.page_state(html, url, status),
        }
    }

    /// A request that failed before any answer: counted as `failed`, and
    /// passed on.
    fn counted<T>(&self, tier: u8, started: std::time::Instant, r: Result<T>) -> Result<T> {
        r.inspect_err(|_| (self.leases).record(&self.strategy, tier, "failed", started.elapsed()))
    }

    /// Where a navigation of `url` ended (`at`), if the guard lets us be
    /// there: the browser follows redirects itself.
    async fn ended_on(&self, at: &str, url: url::Url) -> Result<url::Url> {
        match url::Url::parse(at) {
            Ok(u) if u.scheme() == "about" => Ok(url),
            Ok(u) if u == url => Ok(u),
            Ok(u) => {
                self.judge_hop(&url, "was redirected to", &u).await?;
                Ok(u)
            }
            Err(_) => Ok(url),
        }
    }

    /// A hop from `from` to `to` (a redirect, a page a tab landed on): the
    /// same gates as the first URL. The SSRF guard, the caller's grants
    /// (`not_granted`, naming the host) and, where they apply, robots.
    /// `how`: what took the call there (`was redirected to`, `led to`).
    pub(super) async fn judge_hop(&self, from: &url::Url, how: &str, to: &url::Url) -> Result<()> {
        let shown = |u: &url::Url| crate::diag::redact_text(u.as_str());
        if let Err(e) = self.leases.guard.check(to).await {
            return Err(Error::refused(format!(
                "{} {how} {}: {}",
                shown(from),
                shown(to),
                e.message()
            ))
            .retryable(false));
        }
        self.granted(to)?;
        let rules = self.leases.strategy_for(to);
        let agreed = rules.as_ref().is_some_and(|r| !r.obeys_robots());
        if !agreed && self.leases.cfg.web.respect_robots {
            self.robots(to).await?.check(to).map_err(|why| {
                Error::refused(format!(
                    "{why} (web.respect_robots; reached from {})",
                    shown(from)
                ))
                .retryable(false)
            })?;
        }
        Ok(())
    }

    /// `Err(not_granted)` when the caller's grants do not cover `url`'s
    /// site on this identity.
    pub fn granted(&self, url: &url::Url) -> Result<()> {
        self.leases
            .granted(url, self.slot.id, self.scope.as_deref())
    }

    /// A page the browser loaded, classified under the strategy and counted.
    fn judge_page<T>(
        &self,
        page: crate::identity::browser::PageResult,
        final_url: url::Url,
        refused: Vec<String>,
        started: std::time::Instant,
        wait_for: Option<&str>,
        read: impl FnOnce(&Fetched, &Body<'_>) -> T,
    ) -> (Fetched, T) {
        let cut = page.cut_from.map(|n| {
            format!(
                "the page in the browser is {n} characters long; only its first {} were read (http.max_body_bytes)",
                page.html.chars().count()
            )
        });
        let html = bytes::Bytes::from(page.html);
        crate::dom::offload::heavy(html.len(), || {
            let text = crate::wire::http::utf8_text(&html);
            let body = Body::html_page(&text);
            let outcome = self.classify(page.status, final_url.as_str(), &body);
            self.leases
                .record(&self.strategy, 3, outcome.as_str(), started.elapsed());
            let detail = self.explain(outcome, page.status, final_url.as_str(), &body);
            let response = FetchResponse {
                status: page.status,
                final_url,
                headers: super::browse::page_headers(&page.headers),
                body: html.clone(),
                cookies_set: page.cookies.iter().map(|c| c.name.clone()).collect(),
                elapsed: page.elapsed,
                http_version: "browser".into(),
            };
            let missed = (!page.wait_for_met).then(|| wait_for.unwrap_or_default().to_string());
            let mut fetched = self.fetched(Via::Browser, outcome, response, missed);
            fetched.detail = detail;
            fetched.refused = refused;
            fetched.captured = page.captured;
            fetched.cut.extend(cut);
            self.judge_login(&mut fetched, &body);
            let seen = read(&fetched, &body);
            (fetched, seen)
        })
    }

    /// Run `checks` on `url` in order (see `gate.rs`): the instant the
    /// request starts, once they all pass.
    pub(super) async fn pass(
        &self,
        url: &url::Url,
        checks: &[gate::Check],
    ) -> Result<std::time::Instant> {
        for check in checks {
            match check {
                gate::Check::Guard => self.leases.guard.check(url).await?,
                gate::Check::Robots => self.obey_robots(url).await?,
                gate::Check::Pace => self.pace().await?,
            }
        }
        Ok(std::time::Instant::now())
    }

    /// A host no strategy covers, or one whose strategy says `robots =
    /// true`: its `robots.txt` must allow `url`.
    async fn obey_robots(&self, url: &url::Url) -> Result<()> {
        let agreed = self.rules.as_ref().is_some_and(|r| !r.obeys_robots());
        if agreed || !self.leases.cfg.web.respect_robots {
            return Ok(());
        }
        self.robots(url)
            .await?
            .check(url)
            .map_err(|why| Error::refused(format!("{why} (web.respect_robots)")).retryable(false))
    }

    /// The `robots.txt` of `url`'s origin: kept, or read now on this lease
    /// (guarded, paced and counted like any request).
    pub async fn robots(&self, url: &url::Url) -> Result<Arc<crate::web::Robots>> {
        self.leases.guard.check(url).await?;
        let read = |at: url::Url| async move {
            // Guarded above (same origin); robots does not apply to
            // itself, so its read is only paced (not `pass`: that runs
            // robots, which would be this read again).
            self.pace().await?;
            let started = std::time::Instant::now();
            let r = self.slot.fetch(&FetchRequest::get(at)).await;
            let outcome = if r.is_ok() { "ok" } else { "failed" };
            self.leases
                .record(&self.strategy, 2, outcome, started.elapsed());
            r
        };
        self.leases
            .robots
            .robots(&self.leases.cfg.web, url, read)
            .await
    }

    /// The guarded navigation itself: the page and the URL it ended on.
    async fn navigate(
        &self,
        url: url::Url,
        opts: &super::BrowseOptions,
        tape: Option<Arc<crate::identity::browser::tape::Tape>>,
    ) -> Result<(crate::identity::browser::PageResult, url::Url, Vec<String>)> {
        let probe = |h: &str, u: &str, status: u16| self.page_state(h, u, status);
        let mut req = self.browser_request(&url, opts);
        req.tape = tape;
        let egress = self.slot.egress();
        let mark = egress.mark();
        let page = self.slot.navigate(&req, &probe).await;
        let refusals = egress.refusals_since(mark);
        let page = super::browse::refused_main_document(page, &refusals)?;
        // The browser follows redirects itself: refuse to hand back what it
        // ended on if the guard would not have let us go there.
        let final_url = self.ended_on(&page.final_url, url).await?;
        let refused = refusals.iter().map(ToString::to_string).collect();
        Ok((page, final_url, refused))
    }

    fn classify(&self, status: u16, url: &str, body: &Body<'_>) -> Outcome {
        match &self.rules {
            Some(s) => s.classify(status, url, body),
            None => walls::classify(status, url, body),
        }
    }

    /// Why `outcome`, when it is a refusal (nothing is worked out for content).
    fn explain(&self, outcome: Outcome, status: u16, url: &str, body: &Body<'_>) -> Option<String> {
        if !outcome.is_failure() {
            return None;
        }
        match &self.rules {
            Some(s) => s.explain(outcome, status, url, body),
            None => walls::explain(outcome, status, url, body),
        }
    }

    fn fetched(
        &self,
        via: Via,
        outcome: Outcome,
        response: FetchResponse,
        wait_for_missed: Option<String>,
    ) -> Fetched {
        Fetched {
            via,
            slot: self.slot.id,
            strategy: self.strategy.clone(),
            trial: self.admission.trial,
            outcome,
            detail: None,
            response,
            wait_for_missed,
            refused: Vec::new(),
            login: None,
            captured: Default::default(),
            cut: Vec::new(),
            recording: None,
        }
    }

    /// This slot's login state for the lease's strategy.
    pub fn login(&self) -> crate::strategy::LoginState {
        self.leases
            .sites()
            .login(self.slot.id, &self.strategy)
            .state
    }

    /// A person is signing this slot in through the live view: its browser
    /// is theirs until the session ends.
    pub fn signing_in(&self) -> bool {
        self.slot.held_by_person()
    }

    /// The strategy as registered when the lease was taken.
    pub fn rules(&self) -> Option<&Arc<dyn Strategy>> {
        self.rules.as_ref()
    }

    /// What the answer says of the identity's sign-in, recorded for its
    /// (slot, strategy): a login wall is `logged_out`, else the `[session]`
    /// markers decide, else nothing changes.
    fn judge_login(&self, fetched: &mut Fetched, body: &Body<'_>) {
        let (status, url) = (fetched.response.status, fetched.response.final_url.as_str());
        let seen = match (fetched.outcome, &self.rules) {
            (Outcome::LoginRequired, _) => Some((
                crate::strategy::LoginState::LoggedOut,
                fetched
                    .detail
                    .clone()
                    .unwrap_or_else(|| "a login wall".into()),
            )),
            (_, Some(s)) => s.login_state(status, url, body),
            (_, None) => None,
        };
        if let Some((state, why)) = &seen {
            self.leases
                .sites()
                .set_login(self.slot.id, &self.strategy, *state, why);
        }
        fetched.login = seen;
    }

    /// The site asked this identity to wait `d` before its next request
    /// (`Retry-After`): the router holds the slot back for this strategy
    /// once the lease finishes. The longest wait asked wins.
    pub fn wait_asked(&self, d: Duration) {
        let mut r = self.retry_after.lock();
        *r = Some(r.map_or(d, |old| old.max(d)));
    }

    /// Record the outcome of the work done under this lease (and any
    /// `Retry-After` the site sent meanwhile).
    pub fn finish(mut self, outcome: Outcome) {
        let retry_after = *self.retry_after.lock();
        // An empty page proves little about the identity either way (a captcha'd
        // identity can still be served an empty listing), so it leaves the breaker as it
        // is, like a network failure; only content closes, only blocks of the
        // identity count, a rate limit rests it. A trial met by a challenge
        // was let in: the browser tier is for that.
        let verdict = match outcome {
            Outcome::Ok => Verdict::Success,
            Outcome::Challenge if self.admission.trial => Verdict::Success,
            Outcome::HardBlock => Verdict::HardBlock,
            Outcome::RateLimited => Verdict::RateLimited(retry_after),
            Outcome::Empty
            | Outcome::TierBlock
            | Outcome::Challenge
            | Outcome::LoginRequired
            | Outcome::Failed
            | Outcome::Skipped => Verdict::Neutral,
        };
        let now = Instant::now();
        let mut router = self.leases.router.lock();
        let site = router.site(self.slot.id, &self.strategy, self.leases.cfg.breaker);
        let before = site.breaker.state(now);
        let until_before = site.breaker.open_until();
        site.breaker.record(self.admission, verdict, now);
        let after = site.breaker.state(now);
        let failures = site.breaker.failures();
        let cause = site.breaker.cause(now);
        let open_until = site.breaker.open_until();
        match verdict {
            Verdict::HardBlock => site.hard_blocks += 1,
            Verdict::Success => site.successes += 1,
            Verdict::RateLimited(_) | Verdict::Neutral => {}
        }
        if let (Some(d), false) = (retry_after, matches!(verdict, Verdict::RateLimited(_))) {
            site.retry_after_until = Some(now + d);
        }
        let budget = router.budget(&self.strategy, &self.politeness);
        let fleet = (self.leases.fleet.as_ref()).filter(|f| f.cluster().is_up());
        if fleet.is_some() {
            // What a cut of the fleet's budget starts from.
            budget.note_outcome(
                now,
                !matches!(verdict, Verdict::HardBlock | Verdict::RateLimited(_)),
                self.generation.load(std::sync::atomic::Ordering::Acquire),
            );
        }
        // Like the breaker, the budget hears a pushback once per identity:
        // answers to requests sent before it was stopped add nothing.
        let current = self.admission.trial || before == BreakerState::Closed;
        let mut cut_fleet = false;
        let change = match verdict {
            Verdict::HardBlock | Verdict::RateLimited(_) if current && fleet.is_some() => {
                // The fleet judges the pushback (two of its identities
                // within the window: the site's word) and cuts its budget;
                // a request paced by the rate before its last cut tells it
                // nothing.
                cut_fleet = self.politeness.adaptive
                    && budget.pushback_is_news(
                        self.generation.load(std::sync::atomic::Ordering::Acquire),
                    );
                None
            }
            Verdict::HardBlock | Verdict::RateLimited(_) if current => {
                budget.pushback(&self.politeness, self.slot.id, now)
            }
            Verdict::HardBlock | Verdict::RateLimited(_) => None,
            Verdict::Success => {
                budget.success(&self.politeness);
                None
            }
            Verdict::Neutral => None,
        };
        drop(router);
        if cut_fleet && let Some(f) = fleet {
            let generation = self.generation.load(std::sync::atomic::Ordering::Acquire);
            (self.leases).cut_fleet(
                f,
                self.slot.id,
                &self.strategy,
                &self.politeness,
                generation,
            );
        }
        if let Some(c) = change {
            self.leases.events.emit(
                "budget",
                Some(self.slot.id),
                Some(&self.strategy),
                serde_json::json!({"from": c.from, "to": c.to, "why": c.why}),
            );
        }
        if before != after || (after == BreakerState::Open && open_until != until_before) {
            let secs = open_until
                .filter(|_| after == BreakerState::Open)
                .map(|t| (t.saturating_duration_since(now).as_secs_f64() * 10.0).round() / 10.0);
            self.leases.events.emit(
                "breaker",
                Some(self.slot.id),
                Some(&self.strategy),
                serde_json::json!({"from": before.as_str(), "to": after.as_str(), "failures": failures,
                    "cause": cause.map(|c| c.as_str()), "open_for_secs": secs}),
            );
        }
        self.finished = true;
        if let Some(f) = &self.leases.fleet {
            // The fleet hears of this identity's new state within a moment.
            f.push.notify_one();
        }
        let hard_block = matches!(verdict, Verdict::HardBlock) && current;
        self.leases
            .after_use(&self.slot, &self.strategy, hard_block);
    }

    /// Finish a one-request call with what its request came to, and hand it
    /// on: a failure when it failed, or when its `wait_for` never appeared.
    pub fn close(self, result: Result<Fetched>) -> Result<Fetched> {
        match result {
            Ok(f) if f.wait_for_missed.is_some() && !f.outcome.is_failure() => {
                self.finish(Outcome::Failed);
                Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "`{}` did not appear on {} in time",
                        f.wait_for_missed.unwrap_or_default(),
                        f.response.final_url
                    ),
                ))
            }
            Ok(f) => {
                self.finish(f.outcome);
                Ok(f)
            }
            Err(e) => {
                self.finish(Outcome::Failed);
                Err(e)
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let admission = (!self.finished).then_some(self.admission);
        self.leases.router.lock().release(
            self.slot.id,
            &self.strategy,
            self.leases.cfg.breaker,
            admission,
        );
        self.leases.released.notify_waiters();
    }
}
