//! What a live view needs of a slot's tab: its screencast (`Page.startScreencast`
//! frames, acknowledged one by one so Chromium sends the next) and a person's
//! input dispatched into it (`Input.dispatchMouseEvent`, `Input.insertText`,
//! `Input.dispatchKeyEvent`).

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventScreencastFrame, ScreencastFrameAckParams, StartScreencastFormat, StartScreencastParams,
    StopScreencastParams,
};
use chromiumoxide::listeners::EventStream;
use serde::Deserialize;

use super::page::cdp;
use crate::error::Result;

/// One input from the person at the live view, in the frame's CSS pixels.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Input {
    /// A left click.
    Click { x: f64, y: f64 },
    /// The wheel at (x, y).
    Scroll {
        x: f64,
        y: f64,
        #[serde(default)]
        dx: f64,
        dy: f64,
    },
    /// Typed text (into the focused element).
    Text { text: String },
    /// A named key: `Enter`, `Tab`, `Backspace`, `Escape`, `ArrowUp`, ...
    Key { key: String },
}

impl Input {
    /// What a recording's action log says of it: typed text never, its
    /// length only.
    pub fn logged(&self) -> String {
        match self {
            Input::Click { x, y } => format!("click at ({x:.0}, {y:.0})"),
            Input::Scroll { x, y, dx, dy } => {
                format!("scroll ({dx:.0}, {dy:.0}) at ({x:.0}, {y:.0})")
            }
            Input::Text { text } => {
                format!("{} characters typed (not recorded)", text.chars().count())
            }
            Input::Key { key } if !key_of(key).0.is_empty() => format!("key {key}"),
            Input::Key { .. } => "a key".to_string(),
        }
    }
}

/// Start the tab's screencast; the frames as they come.
pub async fn start(page: &Page, max_width: i64) -> Result<EventStream<EventScreencastFrame>> {
    let frames = page
        .event_listener::<EventScreencastFrame>()
        .await
        .map_err(cdp("listen to screencast frames"))?;
    let params = StartScreencastParams {
        format: Some(StartScreencastFormat::Jpeg),
        quality: Some(60),
        max_width: Some(max_width),
        max_height: Some(max_width),
        every_nth_frame: Some(1),
    };
    // One an earlier watcher left running (its call went away) would make
    // Chromium refuse a second one.
    let _ = page.execute(StopScreencastParams::default()).await;
    page.execute(params)
        .await
        .map_err(cdp("start the screencast"))?;
    Ok(frames)
}

/// Ask for the next frame.
pub async fn ack(page: &Page, session_id: i64) {
    let _ = page
        .execute(ScreencastFrameAckParams::new(session_id))
        .await;
}

pub async fn stop(page: &Page) {
    let _ = page.execute(StopScreencastParams::default()).await;
}

/// Put one input into the tab.
pub async fn dispatch(page: &Page, input: &Input) -> Result<()> {
    match input {
        Input::Click { x, y } => {
            for kind in [
                DispatchMouseEventType::MousePressed,
                DispatchMouseEventType::MouseReleased,
            ] {
                let mut p = DispatchMouseEventParams::new(kind, *x, *y);
                p.button = Some(MouseButton::Left);
                p.buttons = Some(1);
                p.click_count = Some(1);
                page.execute(p).await.map_err(cdp("click"))?;
            }
        }
        Input::Scroll { x, y, dx, dy } => {
            let mut p = DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, *x, *y);
            p.delta_x = Some(*dx);
            p.delta_y = Some(*dy);
            page.execute(p).await.map_err(cdp("scroll"))?;
        }
        Input::Text { text } => {
            page.execute(InsertTextParams::new(text.clone()))
                .await
                .map_err(cdp("type"))?;
        }
        Input::Key { key } => {
            let (code, vk, text) = key_of(key);
            for kind in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
                let down = kind == DispatchKeyEventType::KeyDown;
                let p = DispatchKeyEventParams {
                    r#type: kind,
                    key: Some(key.clone()),
                    code: Some(code.to_string()),
                    windows_virtual_key_code: Some(vk),
                    native_virtual_key_code: Some(vk),
                    text: text.filter(|_| down).map(str::to_string),
                    ..DispatchKeyEventParams::new(DispatchKeyEventType::KeyDown)
                };
                page.execute(p).await.map_err(cdp("press a key"))?;
            }
        }
    }
    Ok(())
}

/// A named key's DOM code, Windows virtual key code and the text it types.
fn key_of(key: &str) -> (&str, i64, Option<&'static str>) {
    match key {
        "Enter" => ("Enter", 13, Some("\r")),
        "Tab" => ("Tab", 9, None),
        "Backspace" => ("Backspace", 8, None),
        "Escape" => ("Escape", 27, None),
        "Delete" => ("Delete", 46, None),
        "ArrowLeft" => ("ArrowLeft", 37, None),
        "ArrowUp" => ("ArrowUp", 38, None),
        "ArrowRight" => ("ArrowRight", 39, None),
        "ArrowDown" => ("ArrowDown", 40, None),
        " " | "Space" => ("Space", 32, Some(" ")),
        _ => ("", 0, None),
    }
}
