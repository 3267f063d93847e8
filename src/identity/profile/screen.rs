//! The screen a profile's browser reports, and its pointing device.
//!
//! Headless Chromium reports an 800×600 screen behind a 1366×768 window and
//! no pointer at all (`(pointer: fine)` and `(hover: hover)` false), which
//! no person's desktop does. A profile has a screen (desktop default:
//! 1920×1080, a 40-pixel task bar, so `availHeight` 1040) that its window
//! must fit, and a pointer that follows its platform: fine with hover on a
//! desktop, coarse without on a phone. Both are launch flags, so the page,
//! its iframes and its workers see the same values.

use serde::{Deserialize, Serialize};

/// A screen, in CSS pixels at device pixel ratio 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Screen {
    pub width: u32,
    pub height: u32,
    /// Pixels at the bottom the window may not use (a task bar or dock):
    /// `availHeight` is `height` less this.
    #[serde(default = "desktop_taskbar")]
    pub taskbar: u32,
}

fn desktop_taskbar() -> u32 {
    40
}

/// Window sizes people's un-maximised desktop browsers commonly have
/// (`vary_window`, and the personas' windows).
pub const COMMON_WINDOWS: &[(u32, u32)] = &[
    (1366, 768),
    (1536, 864),
    (1440, 900),
    (1280, 800),
    (1600, 900),
    (1280, 720),
    (1680, 1010),
    (1920, 1040),
    (1200, 900),
    (1024, 768),
];

/// How the browser says it is pointed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pointer {
    /// A mouse: `pointer: fine`, `hover: hover`, no touch points.
    Fine,
    /// A finger: `pointer: coarse`, `hover: none`.
    Coarse,
}

impl Screen {
    /// The most common desktop screen.
    pub const DESKTOP: Screen = Screen {
        width: 1920,
        height: 1080,
        taskbar: 40,
    };

    /// The screen a profile has when its file names none: the desktop one,
    /// or on a phone the window's own size.
    pub fn default_for(mobile: bool, window: Viewport) -> Screen {
        if mobile {
            Screen {
                width: window.width,
                height: window.height,
                taskbar: 0,
            }
        } else {
            Screen::DESKTOP
        }
    }

    pub fn avail_height(&self) -> u32 {
        self.height.saturating_sub(self.taskbar)
    }

    /// Why `window` does not fit on this screen (`None`: it fits).
    pub fn misfit(&self, window: Viewport) -> Option<String> {
        (window.width > self.width || window.height > self.avail_height()).then(|| {
            format!(
                "the viewport {}x{} does not fit the screen {}x{} less its {}-pixel task bar: \
                 a window larger than its screen is what no person's browser shows",
                window.width, window.height, self.width, self.height, self.taskbar
            )
        })
    }

    /// Slot `slot`'s window when the profile varies it (`vary_window`):
    /// one of the window sizes people's desktops commonly show, taken in
    /// turn by slot number from the profile's own, each fitting this screen
    /// less its task bar, so that eight slots do not share one size.
    pub fn window_for_slot(&self, own: Viewport, slot: usize) -> Viewport {
        let mut sizes = vec![own];
        sizes.extend(
            COMMON_WINDOWS
                .iter()
                .map(|&(width, height)| Viewport { width, height })
                .filter(|w| {
                    (w.width, w.height) != (own.width, own.height) && self.misfit(*w).is_none()
                }),
        );
        sizes[slot % sizes.len()]
    }

    /// Chromium's flag for this screen at device pixel ratio `dpr`. The
    /// flag takes device pixels: a 1920×1080 screen at ratio 2 is a
    /// 3840×2160 panel, its task bar twice as tall.
    pub fn chromium_arg(&self, dpr: f64) -> String {
        let px = |css: u32| (f64::from(css) * dpr).round() as u32;
        if dpr == 1.0 {
            format!(
                "--screen-info={{0,0 {}x{} workAreaBottom={}}}",
                self.width, self.height, self.taskbar
            )
        } else {
            format!(
                "--screen-info={{0,0 {}x{} devicePixelRatio={dpr} workAreaBottom={}}}",
                px(self.width),
                px(self.height),
                px(self.taskbar)
            )
        }
    }
}

impl Pointer {
    pub fn for_mobile(mobile: bool) -> Pointer {
        if mobile {
            Pointer::Coarse
        } else {
            Pointer::Fine
        }
    }

    /// Blink's pointer and hover settings (`PointerType`: coarse 2, fine 4;
    /// `HoverType`: none 1, hover 2).
    pub fn chromium_arg(&self) -> &'static str {
        match self {
            Pointer::Fine => {
                "--blink-settings=primaryPointerType=4,availablePointerTypes=4,primaryHoverType=2,availableHoverTypes=2"
            }
            Pointer::Coarse => {
                "--blink-settings=primaryPointerType=2,availablePointerTypes=2,primaryHoverType=1,availableHoverTypes=1"
            }
        }
    }
}

/// Browser window size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_take_windows_in_turn_and_every_one_fits() {
        let own = Viewport {
            width: 1366,
            height: 768,
        };
        let screen = Screen::DESKTOP;
        let windows: Vec<(u32, u32)> = (0..8)
            .map(|n| screen.window_for_slot(own, n))
            .map(|w| (w.width, w.height))
            .collect();
        assert_eq!(windows[0], (1366, 768), "slot 0 keeps the profile's own");
        let mut distinct = windows.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 8, "{windows:?}");
        for n in 0..20 {
            assert!(screen.misfit(screen.window_for_slot(own, n)).is_none());
        }
        let small = Screen {
            width: 1280,
            height: 800,
            taskbar: 40,
        };
        let w = Viewport {
            width: 1280,
            height: 720,
        };
        assert!((0..10).all(|n| small.misfit(small.window_for_slot(w, n)).is_none()));
    }

    #[test]
    fn a_window_fits_its_screen_or_is_named() {
        let s = Screen::DESKTOP;
        assert_eq!(s.avail_height(), 1040);
        assert_eq!(
            s.misfit(Viewport {
                width: 1366,
                height: 768
            }),
            None
        );
        assert_eq!(
            s.misfit(Viewport {
                width: 1920,
                height: 1040
            }),
            None
        );
        let e = s
            .misfit(Viewport {
                width: 1920,
                height: 1080,
            })
            .expect("taller than the work area");
        assert!(e.contains("1920x1080") && e.contains("40-pixel"), "{e}");
        assert_eq!(
            s.chromium_arg(1.0),
            "--screen-info={0,0 1920x1080 workAreaBottom=40}"
        );
        assert_eq!(
            s.chromium_arg(1.25),
            "--screen-info={0,0 2400x1350 devicePixelRatio=1.25 workAreaBottom=50}"
        );
        let phone = Screen::default_for(
            true,
            Viewport {
                width: 412,
                height: 915,
            },
        );
        assert_eq!(
            (phone.width, phone.height, phone.avail_height()),
            (412, 915, 915)
        );
    }
}
