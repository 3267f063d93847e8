//! A recording in progress: what a browser did on a tab, as a person
//! reviewing it afterwards wants to see it. Screencast frames (JPEG, at
//! most `fps` a second), the action log (navigations, clicks, keys, waits;
//! typed text never, only how many characters) and a network summary
//! (URL without its credentials, status, bytes; no bodies, no headers, so
//! no cookie values). Bounded: frames past `max_bytes` are dropped and
//! counted, the logs stop at [`MAX_ENTRIES`].
//!
//! [`film`] points a tab at a tape: it starts the tab's screencast and
//! listens to its network, until [`Filming::stop`]. What keeps tapes on
//! disk is the lease source's (`lease::recordings`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{EventLoadingFinished, EventResponseReceived};
use chromiumoxide::cdp::browser_protocol::page::EventScreencastFrame;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// Most action and network entries kept per recording.
pub const MAX_ENTRIES: usize = 5_000;
/// Longest URL kept in the logs.
const MAX_URL: usize = 512;

/// What a tape keeps, at most.
#[derive(Debug, Clone, Copy)]
pub struct TapeLimits {
    /// Frames a second, at most.
    pub fps: f64,
    /// Bytes of frames, at most.
    pub max_bytes: usize,
    /// The screencast's largest side, in pixels.
    pub frame_width: i64,
}

/// One frame: when (ms since the tape began) and the JPEG.
#[derive(Debug, Clone)]
pub struct TapeFrame {
    pub at_ms: u64,
    pub jpeg: bytes::Bytes,
}

/// One entry of the action log.
#[derive(Debug, Clone, Serialize)]
pub struct TapeAction {
    pub at_ms: u64,
    /// `navigate`, `click`, `type`, `press`, `scroll`, `wait`, `select`,
    /// `snapshot`, `screenshot`, `input`, `end`...
    pub kind: String,
    /// What it acted on, in words (typed text is never here).
    pub detail: String,
}

/// One response the tab received.
#[derive(Debug, Clone, Serialize)]
pub struct TapeRequest {
    pub at_ms: u64,
    pub url: String,
    pub status: u16,
    /// Bytes on the wire, when the load finished.
    pub bytes: u64,
}

/// A recording in progress.
pub struct Tape {
    /// The recording's id (fixed when it begins, so a call can name it).
    pub id: String,
    pub begun: Instant,
    pub begun_at: SystemTime,
    limits: TapeLimits,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    frames: Vec<TapeFrame>,
    frame_bytes: usize,
    frames_dropped: u64,
    actions: Vec<TapeAction>,
    network: Vec<TapeRequest>,
    entries_dropped: u64,
}

/// What a tape holds once it ends.
pub struct TapeContents {
    pub frames: Vec<TapeFrame>,
    pub frames_dropped: u64,
    pub actions: Vec<TapeAction>,
    pub network: Vec<TapeRequest>,
    pub entries_dropped: u64,
    pub duration_ms: u64,
}

impl Tape {
    pub fn new(id: String, limits: TapeLimits) -> Self {
        Tape {
            id,
            begun: Instant::now(),
            begun_at: SystemTime::now(),
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.begun.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Keep a frame, unless one was kept less than `1/fps` ago or the
    /// frames' bytes would pass the limit (then it is counted as dropped).
    pub fn frame(&self, jpeg: bytes::Bytes) {
        let at_ms = self.now_ms();
        let gap = if self.limits.fps > 0.0 {
            (1000.0 / self.limits.fps) as u64
        } else {
            u64::MAX
        };
        let mut inner = self.inner.lock();
        if inner.frames.last().is_some_and(|f| at_ms < f.at_ms + gap) {
            return;
        }
        if inner.frame_bytes + jpeg.len() > self.limits.max_bytes {
            inner.frames_dropped += 1;
            return;
        }
        inner.frame_bytes += jpeg.len();
        inner.frames.push(TapeFrame { at_ms, jpeg });
    }

    /// Whether no frame is kept yet.
    pub fn has_no_frame(&self) -> bool {
        self.inner.lock().frames.is_empty()
    }

    /// Keep `jpeg` as the final frame whatever the rate says (the byte cap
    /// still holds): what the page looked like when the work ended.
    pub fn last_frame(&self, jpeg: bytes::Bytes) {
        let at_ms = self.now_ms();
        let mut inner = self.inner.lock();
        if inner.frame_bytes + jpeg.len() > self.limits.max_bytes {
            inner.frames_dropped += 1;
            return;
        }
        inner.frame_bytes += jpeg.len();
        inner.frames.push(TapeFrame { at_ms, jpeg });
    }

    /// Log an action. `detail` must not hold typed text or secrets.
    pub fn action(&self, kind: &str, detail: impl Into<String>) {
        let entry = TapeAction {
            at_ms: self.now_ms(),
            kind: kind.to_string(),
            detail: clip(detail.into()),
        };
        let mut inner = self.inner.lock();
        if inner.actions.len() < MAX_ENTRIES {
            inner.actions.push(entry);
        } else {
            inner.entries_dropped += 1;
        }
    }

    /// Log a response: its URL without credentials, its status and bytes.
    pub fn request(&self, url: &str, status: u16, bytes: u64) {
        let entry = TapeRequest {
            at_ms: self.now_ms(),
            url: clip(without_credentials(url)),
            status,
            bytes,
        };
        let mut inner = self.inner.lock();
        if inner.network.len() < MAX_ENTRIES {
            inner.network.push(entry);
        } else {
            inner.entries_dropped += 1;
        }
    }

    /// Everything kept, leaving the tape empty.
    pub fn take(&self) -> TapeContents {
        let duration_ms = self.now_ms();
        let inner = std::mem::take(&mut *self.inner.lock());
        TapeContents {
            frames: inner.frames,
            frames_dropped: inner.frames_dropped,
            actions: inner.actions,
            network: inner.network,
            entries_dropped: inner.entries_dropped,
            duration_ms,
        }
    }
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape").field("id", &self.id).finish()
    }
}

fn clip(mut s: String) -> String {
    if s.len() > MAX_URL {
        let mut end = MAX_URL;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// `url` as a recording shows it: without `user:password@`, its query's
/// values and its fragment (a GET form's typed text, a sign-in link's
/// token); `data:` URLs as their media type only.
pub fn without_credentials(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("data:") {
        let kind = rest.split([',', ';']).next().unwrap_or_default();
        return format!("data:{kind},…");
    }
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_fragment(None);
            let names: Vec<String> = u.query_pairs().map(|(k, _)| format!("{k}=…")).collect();
            u.set_query(None);
            match names.is_empty() {
                true => u.to_string(),
                false => format!("{u}?{}", names.join("&")),
            }
        }
        Err(_) => "(not a URL)".to_string(),
    }
}

/// A tab being filmed onto a tape. Dropped without [`Filming::stop`] (a
/// navigation that timed out), it stops listening at once.
pub struct Filming {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The tab whose screencast it started.
    page: Option<Page>,
    tape: Arc<Tape>,
}

/// Start filming `page` onto `tape`: its screencast and its responses.
pub async fn film(page: &Page, tape: Arc<Tape>) -> Result<Filming> {
    film_with(page, tape, true).await
}

/// Log `page`'s responses on `tape`, without a screencast of its own (a
/// live view runs the tab's screencast and hands the tape its frames).
pub async fn listen(page: &Page, tape: Arc<Tape>) -> Result<Filming> {
    film_with(page, tape, false).await
}

async fn film_with(page: &Page, tape: Arc<Tape>, screencast: bool) -> Result<Filming> {
    let responses = page
        .event_listener::<EventResponseReceived>()
        .await
        .map_err(super::page::cdp("listen to responses"))?;
    let finished = page
        .event_listener::<EventLoadingFinished>()
        .await
        .map_err(super::page::cdp("listen to finished loads"))?;
    let frames = match screencast {
        true => Some(super::live::start(page, tape.limits.frame_width).await?),
        false => None,
    };
    let stop = CancellationToken::new();
    let task = tokio::spawn(run(
        page.clone(),
        tape.clone(),
        (frames, responses, finished),
        stop.clone(),
    ));
    Ok(Filming {
        stop,
        task: Some(task),
        page: screencast.then(|| page.clone()),
        tape,
    })
}

type Streams = (
    Option<chromiumoxide::listeners::EventStream<EventScreencastFrame>>,
    chromiumoxide::listeners::EventStream<EventResponseReceived>,
    chromiumoxide::listeners::EventStream<EventLoadingFinished>,
);

async fn run(page: Page, tape: Arc<Tape>, streams: Streams, stop: CancellationToken) {
    let (mut frames, mut responses, mut finished) = streams;
    // request id -> (url, status), until its load finishes.
    let mut open: std::collections::HashMap<String, (String, u16)> = Default::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            f = next_frame(&mut frames) => match f {
                Some(f) => {
                    super::live::ack(&page, f.session_id).await;
                    let b64: &str = f.data.as_ref();
                    if let Ok(jpeg) = base64::engine::general_purpose::STANDARD.decode(b64) {
                        tape.frame(jpeg.into());
                    }
                }
                None => break,
            },
            r = responses.next() => match r {
                Some(r) => {
                    if open.len() < MAX_ENTRIES {
                        let status = u16::try_from(r.response.status).unwrap_or(0);
                        open.insert(r.request_id.inner().clone(), (r.response.url.clone(), status));
                    }
                }
                None => break,
            },
            l = finished.next() => match l {
                Some(l) => {
                    if let Some((url, status)) = open.remove(l.request_id.inner()) {
                        tape.request(&url, status, l.encoded_data_length.max(0.0) as u64);
                    }
                }
                None => break,
            },
        }
    }
    // What never finished loading is logged with no bytes.
    for (url, status) in open.into_values() {
        tape.request(&url, status, 0);
    }
}

/// One JPEG of what `page` shows now.
async fn still(page: &Page) -> Result<Vec<u8>> {
    use chromiumoxide::cdp::browser_protocol::page::{
        CaptureScreenshotFormat, CaptureScreenshotParams,
    };
    let params = CaptureScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Jpeg)
        .quality(60)
        .build();
    let shot = page
        .execute(params)
        .await
        .map_err(super::page::cdp("take the recording's final frame"))?;
    let b64: &str = shot.result.data.as_ref();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| {
            crate::error::Error::new(
                crate::error::ErrorKind::Internal,
                format!("final frame: {e}"),
            )
        })
}

/// The next frame; never, without a screencast.
async fn next_frame(
    frames: &mut Option<chromiumoxide::listeners::EventStream<EventScreencastFrame>>,
) -> Option<Arc<EventScreencastFrame>> {
    match frames {
        Some(f) => f.next().await,
        None => std::future::pending().await,
    }
}

impl Filming {
    /// Stop the screencast and the listeners; what came so far is on the tape.
    pub async fn stop(mut self) {
        // The last frames in flight are taken before the screencast stops.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        if let Some(page) = &self.page {
            let _ = tokio::time::timeout(Duration::from_secs(2), super::live::stop(page)).await;
            // A page that loaded before the screencast's first frame (a
            // fast one, under load) still leaves its final look behind.
            if self.tape.has_no_frame()
                && let Ok(Ok(jpeg)) =
                    tokio::time::timeout(Duration::from_secs(3), still(page)).await
            {
                self.tape.last_frame(jpeg.into());
            }
        }
    }
}

impl Drop for Filming {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tape(fps: f64, max_bytes: usize) -> Tape {
        Tape::new(
            "t".into(),
            TapeLimits {
                fps,
                max_bytes,
                frame_width: 800,
            },
        )
    }

    #[test]
    fn frames_keep_to_the_rate_and_the_byte_limit() {
        let t = tape(1.0, 10);
        t.frame(bytes::Bytes::from_static(b"abcd"));
        // Within a second of the last one: not kept, not counted.
        t.frame(bytes::Bytes::from_static(b"efgh"));
        let got = t.take();
        assert_eq!(got.frames.len(), 1);
        assert_eq!(got.frames_dropped, 0);

        let t = tape(1000.0, 10);
        t.frame(bytes::Bytes::from_static(b"abcdef"));
        std::thread::sleep(Duration::from_millis(5));
        t.frame(bytes::Bytes::from_static(b"ghijkl"));
        let got = t.take();
        assert_eq!(got.frames.len(), 1, "the second frame passes 10 bytes");
        assert_eq!(got.frames_dropped, 1);
    }

    #[test]
    fn logs_keep_no_credentials_and_stop_at_their_limit() {
        let t = tape(1.0, 10);
        t.request("https://ann:s3cret@shop.test/a?q=typed#t0ken", 200, 10);
        t.request(
            &format!("data:image/png;base64,{}", "A".repeat(5000)),
            200,
            0,
        );
        for _ in 0..MAX_ENTRIES + 3 {
            t.action("click", "x");
        }
        let got = t.take();
        assert_eq!(got.network[0].url, "https://shop.test/a?q=…");
        assert_eq!(got.network[1].url, "data:image/png,…");
        assert_eq!(got.actions.len(), MAX_ENTRIES);
        assert_eq!(got.entries_dropped, 3);
        t.action("navigate", "y".repeat(2000));
        assert!(t.take().actions[0].detail.len() <= MAX_URL + '…'.len_utf8());
    }
}
