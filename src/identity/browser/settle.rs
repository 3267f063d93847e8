//! Waiting for a navigated page to settle: its main document's responses
//! (status, headers) and lifecycle, then as few looks into the page as it
//! takes. Chromium says when the document has loaded (`Page.lifecycleEvent`
//! `load` of the navigation's loader), so nothing is evaluated in the page
//! before that; then the page is read, and only a `wait_for` that is not
//! there yet or a challenge page that solves itself makes it look again.

use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{EventResponseReceived, ResourceType};
use chromiumoxide::cdp::browser_protocol::page::{EventLifecycleEvent, NavigateParams};
use futures_util::{FutureExt, StreamExt};

use super::page::{Probe, cdp, content};
use super::{PageResult, PageState};
use crate::error::{Error, ErrorKind, Result};

/// When no lifecycle event came (a document Chromium reports none for),
/// how often `document.readyState` is asked instead.
const LOAD_CHECK: Duration = Duration::from_millis(250);

/// Navigate `page` to `url`, then wait for `wait_for` (polling) and for any
/// challenge to pass, until `deadline`; a blocked page ends the wait at once.
pub async fn navigate(
    page: &Page,
    url: &str,
    wait_for: Option<&str>,
    probe: &Probe<'_>,
    deadline: Instant,
    limit: usize,
) -> Result<PageResult> {
    let started = Instant::now();
    let mut doc = MainDocument::navigate(page, url).await?;
    let settled = settle(page, wait_for, probe, deadline, limit, &mut doc).await?;
    doc.drain();
    let final_url = page
        .url()
        .await
        .map_err(cdp("read the URL"))?
        .unwrap_or_else(|| url.to_string());
    let (status, headers) = doc.last.unwrap_or((0, Vec::new()));
    Ok(PageResult {
        status,
        headers,
        final_url,
        html: settled.html,
        cut_from: settled.cut_from,
        wait_for_met: settled.wait_for_met,
        challenge_left: settled.challenge_left,
        elapsed: started.elapsed(),
        cookies: Vec::new(),
        captured: Default::default(),
    })
}

/// How long after a step a navigation it started must have shown (the
/// frame started loading, or its document answered) to be waited for.
const STEP_LEADS: Duration = Duration::from_millis(600);

/// Run `step` on `page` (a click, typed text and Enter, a key, a choice)
/// and, when it made the tab load a new main document (a link, a form, a
/// script's own navigation), wait for that page to settle until
/// `deadline`: the page it led to, or `None` when it loaded none.
pub async fn after<T>(
    page: &Page,
    step: impl std::future::Future<Output = Result<T>>,
    deadline: Instant,
    limit: usize,
) -> Result<(T, Option<PageResult>)> {
    use chromiumoxide::cdp::browser_protocol::page::EventFrameStartedLoading;
    let started = Instant::now();
    let mut loading = page
        .event_listener::<EventFrameStartedLoading>()
        .await
        .map_err(cdp("listen to frame loads"))?;
    let mut doc = MainDocument::listen(page).await?;
    let out = step.await?;
    let frame = doc.frame.clone();
    let lead = (Instant::now() + STEP_LEADS).min(deadline);
    let mut moved = false;
    while !moved && Instant::now() < lead {
        while let Some(Some(ev)) = loading.next().now_or_never() {
            moved |= ev.frame_id == frame;
        }
        doc.drain();
        moved |= doc.last.is_some();
        if !moved {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    if !moved {
        return Ok((out, None));
    }
    let normal = |_: &str, _: &str, _: u16| PageState::Normal;
    let settled = settle(page, None, &normal, deadline, limit, &mut doc).await?;
    doc.drain();
    let final_url = page
        .url()
        .await
        .map_err(cdp("read the URL"))?
        .unwrap_or_default();
    let (status, headers) = doc.last.unwrap_or((0, Vec::new()));
    Ok((
        out,
        Some(PageResult {
            status,
            headers,
            final_url,
            html: settled.html,
            cut_from: settled.cut_from,
            wait_for_met: true,
            challenge_left: settled.challenge_left,
            elapsed: started.elapsed(),
            cookies: Vec::new(),
            captured: Default::default(),
        }),
    ))
}

/// The main document's responses as they arrive (redirects, a challenge's
/// reload): the last one's status and headers are the page's.
pub(super) struct MainDocument {
    responses: chromiumoxide::listeners::EventStream<EventResponseReceived>,
    lifecycle: chromiumoxide::listeners::EventStream<EventLifecycleEvent>,
    frame: chromiumoxide::cdp::browser_protocol::page::FrameId,
    /// The navigation's loader: its `load` is the page's.
    loader: Option<chromiumoxide::cdp::browser_protocol::network::LoaderId>,
    /// A `load` of the loader we wait for has come (a loader that is not the
    /// last one judged, after a challenge page).
    loaded: bool,
    /// The loader of the document a look last judged a challenge: its own
    /// `load` does not count again.
    judged: Option<chromiumoxide::cdp::browser_protocol::network::LoaderId>,
    /// The loader of the last `load` taken.
    current: Option<chromiumoxide::cdp::browser_protocol::network::LoaderId>,
    pub(super) last: Option<(u16, Vec<(String, String)>)>,
}

impl MainDocument {
    /// Start navigating `page` to `url`, listening to its responses first.
    pub(super) async fn navigate(page: &Page, url: &str) -> Result<MainDocument> {
        let (responses, lifecycle) = Self::listeners(page).await?;
        let nav = page.execute(NavigateParams::new(url)).await.map_err(|e| {
            Error::new(
                ErrorKind::Network,
                format!("browser navigation to {url} failed"),
            )
            .with_source(e)
        })?;
        if let Some(err) = &nav.result.error_text {
            return Err(Error::new(
                ErrorKind::Network,
                format!("browser navigation to {url} failed: {err}"),
            )
            .with_net(crate::error::NetError::from_code(err)));
        }
        let mut doc = MainDocument {
            responses,
            lifecycle,
            frame: nav.result.frame_id.clone(),
            loader: nav.result.loader_id.clone(),
            loaded: false,
            judged: None,
            current: None,
            last: None,
        };
        doc.drain();
        Ok(doc)
    }

    /// Listen to `page`'s main frame before a step that may navigate it
    /// (no navigation of ours: whichever document loads next is its page).
    pub(super) async fn listen(page: &Page) -> Result<MainDocument> {
        let (responses, lifecycle) = Self::listeners(page).await?;
        let frame = page
            .mainframe()
            .await
            .map_err(cdp("read the main frame"))?
            .ok_or_else(|| Error::new(ErrorKind::Network, "browser: the tab has no main frame"))?;
        Ok(MainDocument {
            responses,
            lifecycle,
            frame,
            loader: None,
            loaded: false,
            judged: None,
            current: None,
            last: None,
        })
    }

    /// The page's responses and lifecycle events, from now on.
    async fn listeners(
        page: &Page,
    ) -> Result<(
        chromiumoxide::listeners::EventStream<EventResponseReceived>,
        chromiumoxide::listeners::EventStream<EventLifecycleEvent>,
    )> {
        let responses = page
            .event_listener::<EventResponseReceived>()
            .await
            .map_err(cdp("listen to network events"))?;
        let lifecycle = page
            .event_listener::<EventLifecycleEvent>()
            .await
            .map_err(cdp("listen to lifecycle events"))?;
        Ok((responses, lifecycle))
    }

    /// Take in the responses that arrived so far.
    pub(super) fn drain(&mut self) {
        while let Some(Some(ev)) = self.lifecycle.next().now_or_never() {
            self.note(&ev);
        }
        while let Some(Some(ev)) = self.responses.next().now_or_never() {
            let is_main = ev.frame_id.as_ref().is_none_or(|f| *f == self.frame);
            if ev.r#type == ResourceType::Document && is_main {
                let headers = ev
                    .response
                    .headers
                    .inner()
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| {
                                (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_string())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.last = Some((u16::try_from(ev.response.status).unwrap_or(0), headers));
            }
        }
    }

    /// A main-frame `load`: of the navigation's loader, or after a
    /// challenge of any loader but the challenge's own.
    fn note(&mut self, ev: &EventLifecycleEvent) {
        if ev.name != "load" || ev.frame_id != self.frame {
            return;
        }
        let ours = match (&self.judged, &self.loader) {
            (Some(judged), _) => ev.loader_id != *judged,
            (None, Some(loader)) => ev.loader_id == *loader,
            (None, None) => true,
        };
        if ours {
            self.loaded = true;
            self.current = Some(ev.loader_id.clone());
        }
    }

    /// Until the document has loaded or `until` passes: the lifecycle
    /// event, else (every [`LOAD_CHECK`]) `document.readyState`. An error
    /// when the tab's events end: its browser or the tab is gone.
    async fn wait_loaded(&mut self, page: &Page, until: Instant) -> Result<()> {
        while !self.loaded && Instant::now() < until {
            let wait = LOAD_CHECK.min(until.saturating_duration_since(Instant::now()));
            match tokio::time::timeout(wait, self.lifecycle.next()).await {
                Ok(Some(ev)) => self.note(&ev),
                Ok(None) => {
                    return Err(Error::new(
                        ErrorKind::Network,
                        "browser: the tab's events ended while its page loaded (the browser or the tab is gone)",
                    ));
                }
                Err(_) if self.judged.is_some() => {
                    // A challenge that solves itself without a new
                    // document: look again at this pace.
                    self.loaded = true;
                }
                Err(_) => {
                    // No event in time: ask (a failure here, as while a
                    // page reloads, only means "not yet").
                    self.loaded = document_complete(page).await.unwrap_or(false);
                }
            }
        }
        Ok(())
    }

    fn status(&self) -> u16 {
        self.last.as_ref().map_or(0, |d| d.0)
    }
}

/// The page as it settled.
pub(super) struct Settled {
    pub html: String,
    pub cut_from: Option<usize>,
    pub challenge_left: bool,
    pub wait_for_met: bool,
}

/// Wait for the document's `load`, then look until no challenge is left
/// and `wait_for` is met (or the page is a block page, where nothing more
/// will come), or the deadline passes. A challenge page solves itself and
/// reloads (a new document's `load` is waited for); a `wait_for` element
/// may arrive late (looked for again, backing off to every 100 ms).
pub(super) async fn settle(
    page: &Page,
    wait_for: Option<&str>,
    probe: &Probe<'_>,
    deadline: Instant,
    limit: usize,
    doc: &mut MainDocument,
) -> Result<Settled> {
    let mut settled = Settled {
        html: String::new(),
        cut_from: None,
        challenge_left: false,
        wait_for_met: wait_for.is_none(),
    };
    let mut last_err: Option<Error> = None;
    let mut looked = false;
    let mut poll = Duration::from_millis(5);
    loop {
        doc.drain();
        doc.wait_loaded(page, deadline).await?;
        let out_of_time = Instant::now() >= deadline;
        if !doc.loaded && looked {
            break;
        }
        doc.drain();
        // While the page reloads, CDP calls can fail ("Cannot find context"):
        // that only means "not settled yet".
        match look(page, wait_for, probe, doc.status(), limit).await {
            Ok(l) => {
                last_err = None;
                looked = true;
                if l.challenge {
                    doc.judged = doc.current.clone().or(doc.loader.clone());
                    doc.loaded = false;
                }
                let done = !l.challenge && (l.met || l.state == PageState::Blocked);
                settled = Settled {
                    html: l.html,
                    cut_from: l.cut_from,
                    challenge_left: l.challenge,
                    wait_for_met: l.met,
                };
                if done {
                    break;
                }
            }
            Err(e) => {
                last_err = Some(e);
                doc.loaded = false;
            }
        }
        if out_of_time || Instant::now() >= deadline {
            break;
        }
        if doc.loaded {
            // Loaded, waiting for `wait_for`: look again soon, then back
            // off to every 100 ms for pages that take their time.
            tokio::time::sleep(poll).await;
            poll = (poll * 2).min(Duration::from_millis(100));
        }
    }
    match last_err {
        Some(e) => Err(e),
        None => Ok(settled),
    }
}

/// One look at the page.
struct Look {
    html: String,
    cut_from: Option<usize>,
    state: PageState,
    challenge: bool,
    met: bool,
}

async fn look(
    page: &Page,
    wait_for: Option<&str>,
    probe: &Probe<'_>,
    status: u16,
    limit: usize,
) -> Result<Look> {
    let (html, cut_from) = content(page, limit).await?;
    let here = page.url().await.ok().flatten().unwrap_or_default();
    let state = probe(&html, &here, status);
    let challenge = state == PageState::Challenge;
    let met = match (challenge, wait_for) {
        (true, _) => false,
        (false, Some(sel)) => selector_present(page, sel).await?,
        (false, None) => true,
    };
    // The selector may have appeared after the snapshot above: take the
    // page again so what we return contains what we waited for.
    let (html, cut_from) = if met && wait_for.is_some() {
        content(page, limit).await?
    } else {
        (html, cut_from)
    };
    Ok(Look {
        html,
        cut_from,
        state,
        challenge,
        met,
    })
}

async fn document_complete(page: &Page) -> Result<bool> {
    let r = super::world::eval(page, "document.readyState === 'complete'")
        .await
        .map_err(cdp("query the page"))?;
    Ok(r.into_value::<bool>().unwrap_or(false))
}

async fn selector_present(page: &Page, selector: &str) -> Result<bool> {
    let js = format!(
        "document.querySelector({}) !== null",
        serde_json::to_string(selector).unwrap_or_else(|_| "\"\"".into())
    );
    let r = super::world::eval(page, js)
        .await
        .map_err(cdp("query the page"))?;
    Ok(r.into_value::<bool>().unwrap_or(false))
}
