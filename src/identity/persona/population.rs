//! The populations a persona is drawn from: what people's Linux desktops
//! show, with weights from the published surveys (Steam's hardware and
//! software survey, Linux section, and StatCounter's desktop screen
//! resolutions, 2024–2026, rounded). A weight is a share in a hundred or a
//! thousand; only the ratios matter.

/// A desktop screen in CSS pixels, its device pixel ratio, and its weight.
/// A 4K monitor at 200 % is 1920×1080 at ratio 2; a 2560×1600 laptop at
/// 200 % is 1280×800 at 2. No fractional ratio (125 %, 150 %): headless
/// Chromium then makes its window two pixels larger than asked, larger
/// than its screen when maximised, which no person's browser shows.
pub const SCREENS: &[(u32, u32, f64, u32)] = &[
    (1920, 1080, 1.0, 380),
    (2560, 1440, 1.0, 140),
    (1366, 768, 1.0, 80),
    (1920, 1200, 1.0, 60),
    (1920, 1080, 2.0, 50),
    (1600, 900, 1.0, 40),
    (1440, 900, 1.0, 35),
    (3440, 1440, 1.0, 30),
    (1680, 1050, 1.0, 25),
    (1280, 800, 2.0, 25),
    (2560, 1080, 1.0, 20),
    (1280, 1024, 1.0, 20),
    (1440, 900, 2.0, 20),
    (1280, 800, 1.0, 15),
];

/// The panel a desktop keeps at the bottom of the screen (pixels the
/// window may not use; 0: the panel hides or sits elsewhere).
pub const PANELS: &[(u32, u32)] = &[(0, 25), (32, 25), (40, 15), (44, 15), (48, 20)];

/// Of a hundred people, how many keep the browser maximised; the others
/// have one of [`WINDOWS`].
pub const MAXIMISED: u32 = 55;

/// Window sizes people's un-maximised browsers commonly have.
pub use crate::identity::profile::COMMON_WINDOWS as WINDOWS;

/// Of a hundred people, how many have a dark desktop theme (which the
/// browser follows: `prefers-color-scheme: dark`).
pub const DARK: u32 = 25;

/// Debian's font packages a Linux desktop has, each with how many systems
/// in a hundred have it (a desktop task pulls most; office suites,
/// Ghostscript and GNOME the rest). `fonts-dejavu-core` is on every one.
pub const FONT_PACKAGES: &[(&str, u32)] = &[
    ("fonts-dejavu-core", 100),
    ("fonts-liberation2", 80),
    ("fonts-liberation", 45),
    ("fonts-urw-base35", 60),
    ("fonts-noto-color-emoji", 55),
    ("fonts-noto-core", 50),
    ("fonts-cantarell", 45),
    ("fonts-crosextra-carlito", 40),
    ("fonts-freefont-ttf", 40),
    ("fonts-noto-mono", 40),
    ("fonts-crosextra-caladea", 35),
    ("fonts-dejavu-extra", 35),
    ("fonts-lato", 25),
    ("fonts-croscore", 20),
    ("fonts-open-sans", 20),
    ("fonts-roboto-unhinted", 20),
    ("fonts-hack", 15),
];

/// Font hinting (fontconfig's `hintstyle`), as desktops set it: GNOME and
/// KDE ship slight, older and Windows-like setups full, some turn it off.
/// Glyph shapes, and so every canvas of text, follow it.
pub const HINTING: &[(&str, u32)] = &[
    ("hintslight", 55),
    ("hintfull", 20),
    ("hintnone", 15),
    ("hintmedium", 10),
];
