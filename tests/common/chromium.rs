//! A Chromium of the test's own, driven over CDP with chromiumoxide (for
//! pages the daemon serves, such as the status page). Started headless on a
//! port it picks itself, ended and reaped by PID when dropped.

use std::path::Path;
use std::time::Duration;

use chromiumoxide::Browser;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use futures::StreamExt;

pub struct Chromium {
    child: tokio::process::Child,
    pub browser: Browser,
    handler: tokio::task::JoinHandle<()>,
}

impl Chromium {
    /// Start Debian's Chromium with a fresh profile under `dir`.
    pub async fn start(dir: &Path) -> Chromium {
        let profile = dir.join("chromium-profile");
        std::fs::create_dir_all(&profile).expect("profile dir");
        let exe = std::env::var("IDPOOL_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let child = tokio::process::Command::new(exe)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromium starts");
        // Chromium writes the port it took, and the browser's target path.
        let file = profile.join("DevToolsActivePort");
        let mut ws = None;
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(&file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    ws = Some(format!("ws://127.0.0.1:{port}{path}"));
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ws = ws.expect("chromium wrote DevToolsActivePort within 10 s");
        let (browser, mut handler) = Browser::connect(ws).await.expect("CDP connects");
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        Chromium {
            child,
            browser,
            handler,
        }
    }

    /// A new tab the size of a `width` × `height` screen (`mobile`: a phone's
    /// viewport rules), at `url`.
    pub async fn page(&self, width: i64, height: i64, mobile: bool, url: &str) -> Page {
        let page = self.browser.new_page("about:blank").await.expect("new tab");
        size(&page, width, height, mobile).await;
        page.goto(url).await.expect("navigates");
        page
    }

    /// End the browser and reap it (by its PID).
    pub async fn stop(mut self) {
        let _ = self.browser.close().await;
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
        self.handler.abort();
    }
}

/// Emulate a `width` × `height` screen on `page`.
pub async fn size(page: &Page, width: i64, height: i64, mobile: bool) {
    let scale = if mobile { 3.0 } else { 1.0 };
    page.execute(SetDeviceMetricsOverrideParams::new(
        width, height, scale, mobile,
    ))
    .await
    .expect("device metrics");
}

/// Evaluate `js` (an expression) on `page` as JSON.
pub async fn eval(page: &Page, js: &str) -> serde_json::Value {
    page.evaluate(js)
        .await
        .unwrap_or_else(|e| panic!("evaluate {js}: {e}"))
        .into_value()
        .unwrap_or(serde_json::Value::Null)
}

/// Wait until `js` is truthy on `page` (within `secs`); panics with `what`.
pub async fn until(page: &Page, js: &str, secs: u64, what: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let v = page
            .evaluate(js)
            .await
            .ok()
            .and_then(|r| r.into_value::<serde_json::Value>().ok());
        if let Some(v) = v
            && !v.is_null()
            && v != serde_json::Value::Bool(false)
        {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            // What the page showed, to tell why.
            let text = eval(page, "document.body.innerText").await;
            panic!(
                "{what}: not within {secs} s; the page:\n{}",
                text.as_str().unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// With `$IDPOOL_TEST_SCREENSHOTS` set to a folder, save the whole page
/// there as `name.png` (to look at what a test saw).
pub async fn keep_screenshot(page: &Page, name: &str) {
    let Some(dir) = std::env::var_os("IDPOOL_TEST_SCREENSHOTS") else {
        return;
    };
    let params = chromiumoxide::page::ScreenshotParams::builder()
        .full_page(true)
        .build();
    let png = page.screenshot(params).await.expect("screenshot");
    std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).expect("write screenshot");
}
