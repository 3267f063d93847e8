//! The device a slot's Chromium is launched as (its persona, under its
//! profile): screen, window, pixel ratio, theme, time zone and fonts, all
//! carried by launch flags and the environment, so that the page, its
//! iframes and its workers agree.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::identity::profile::Screen;

#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub window: (u32, u32),
    pub screen: Screen,
    pub dpr: f64,
    /// A dark desktop theme (`--force-dark-mode`): the browser's
    /// `prefers-color-scheme` follows it, as on a person's machine.
    pub dark: bool,
    /// IANA zone (`TZ`); `None`: the machine's.
    pub timezone: Option<String>,
    /// The only font files the browser sees (its own fontconfig); `None`:
    /// the machine's fonts.
    pub fonts: Option<Vec<PathBuf>>,
    /// The desktop's font hinting (fontconfig's `hintstyle`: `hintnone`,
    /// `hintslight`, `hintmedium`, `hintfull`), with `fonts`.
    pub hinting: Option<&'static str>,
}

impl Device {
    /// The machine as it is, in a desktop window of `width`×`height`.
    pub fn desktop(width: u32, height: u32) -> Device {
        Device {
            window: (width, height),
            screen: Screen::DESKTOP,
            dpr: 1.0,
            dark: false,
            timezone: None,
            fonts: None,
            hinting: None,
        }
    }
}

/// The system's font cache (`fc-cache`, run by every font package's
/// install): read so that a launch scans no font the system already knows.
const SYSTEM_CACHE: &str = "/var/cache/fontconfig";

/// The most files looked at under a persona's font folders.
const FOLDER_FILES_MAX: usize = 20_000;

/// Give a slot's browser only `files`: a `fonts.conf` that lists the
/// system folders holding them, refuses every other font file in those
/// folders (packages share folders: DejaVu's core and extra, Noto's core,
/// mono and emoji), reads the system's font cache (so a launch scans
/// nothing the system knows) and writes any cache of its own in the
/// slot's, and takes the system's rendering rules and aliases
/// (`/etc/fonts/conf.d`: Arial is Liberation Sans where that is installed,
/// as on any Debian desktop), and the desktop's hinting. Returns the file
/// for `FONTCONFIG_FILE`.
pub(super) fn write_fontconfig(
    slot_dir: &Path,
    files: &[PathBuf],
    hinting: Option<&str>,
) -> Result<PathBuf> {
    let conf = slot_dir.join("fonts.conf");
    let mut dirs: Vec<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    dirs.sort();
    dirs.dedup();
    // A folder under another listed one is scanned with it.
    let tops: Vec<&Path> = dirs
        .iter()
        .copied()
        .filter(|d| !dirs.iter().any(|o| o != d && d.starts_with(o)))
        .collect();
    let chosen: std::collections::HashSet<&Path> = files.iter().map(PathBuf::as_path).collect();
    let mut others = Vec::new();
    let mut seen = 0;
    for top in &tops {
        font_files_under(top, 4, &mut seen, &mut |f| {
            if !chosen.contains(f.as_path()) {
                others.push(f);
            }
        });
    }
    others.sort();
    let cache = slot_dir.join("xdg").join("cache").join("fontconfig");
    let hint = hinting
        .filter(|h| ["hintnone", "hintslight", "hintmedium", "hintfull"].contains(h))
        .map(|h| {
            format!(
                "  <match target=\"font\">\n    <edit name=\"hinting\" mode=\"assign\"><bool>{}</bool></edit>\n    \
                 <edit name=\"hintstyle\" mode=\"assign\"><const>{h}</const></edit>\n  </match>\n",
                h != "hintnone"
            )
        })
        .unwrap_or_default();
    let mut text = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n\
         <!-- This slot's fonts (its persona's); written by idpool at each launch. -->\n<fontconfig>\n",
    );
    for d in &tops {
        text.push_str(&format!(
            "  <dir>{}</dir>\n",
            xml_text(&d.display().to_string())
        ));
    }
    text.push_str(&format!(
        "  <cachedir>{}</cachedir>\n  <cachedir>{SYSTEM_CACHE}</cachedir>\n",
        xml_text(&cache.display().to_string())
    ));
    // Glob patterns: a name holding a pattern character is left as it is.
    let refused: Vec<String> = others
        .iter()
        .map(|f| f.display().to_string())
        .filter(|f| !f.contains(['*', '?', '[', ']']))
        .map(|f| format!("      <glob>{}</glob>\n", xml_text(&f)))
        .collect();
    if !refused.is_empty() {
        text.push_str("  <selectfont>\n    <rejectfont>\n");
        text.extend(refused);
        text.push_str("    </rejectfont>\n  </selectfont>\n");
    }
    text.push_str(&format!(
        "  <include ignore_missing=\"yes\">/etc/fonts/conf.d</include>\n{hint}</fontconfig>\n"
    ));
    if std::fs::read_to_string(&conf).ok().as_deref() != Some(text.as_str()) {
        crate::fsutil::write_atomically(&conf, text.as_bytes())?;
    }
    Ok(conf)
}

/// Every font file under `dir` (at most `depth` folders down, at most
/// [`FOLDER_FILES_MAX`] entries looked at in all).
fn font_files_under(dir: &Path, depth: usize, seen: &mut usize, found: &mut dyn FnMut(PathBuf)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        *seen += 1;
        if *seen > FOLDER_FILES_MAX {
            return;
        }
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && depth > 0 => font_files_under(&path, depth - 1, seen, found),
            Ok(_) if is_font(&path) => found(path),
            _ => {}
        }
    }
}

fn is_font(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["ttf", "otf", "ttc", "otc", "pfb", "pfa", "t1"].contains(&e.to_ascii_lowercase().as_str())
    })
}

fn xml_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fontconfig_lists_the_folders_and_refuses_the_other_files_in_them() {
        let dir = tempfile::tempdir().unwrap();
        let fonts = dir.path().join("share");
        std::fs::create_dir_all(fonts.join("a/sub")).unwrap();
        std::fs::create_dir_all(fonts.join("b")).unwrap();
        for f in [
            "a/Keep.ttf",
            "a/Other.ttf",
            "a/sub/Deep.otf",
            "a/readme.txt",
            "b/Not.ttf",
        ] {
            std::fs::write(fonts.join(f), b"f").unwrap();
        }
        let slot = dir.path().join("slot");
        std::fs::create_dir(&slot).unwrap();
        let keep = vec![fonts.join("a/Keep.ttf"), fonts.join("a/sub/Deep.otf")];
        let conf = write_fontconfig(&slot, &keep, Some("hintfull")).unwrap();
        let text = std::fs::read_to_string(&conf).unwrap();
        assert_eq!(text.matches("<dir>").count(), 1, "{text}");
        assert!(
            text.contains(&format!("<dir>{}</dir>", fonts.join("a").display())),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "<glob>{}</glob>",
                fonts.join("a/Other.ttf").display()
            )),
            "{text}"
        );
        assert!(
            !text.contains("Keep.ttf") && !text.contains("Deep.otf") && !text.contains("readme"),
            "{text}"
        );
        assert!(
            !text.contains("Not.ttf"),
            "a folder of no chosen file is not listed: {text}"
        );
        assert!(
            text.contains("<cachedir>/var/cache/fontconfig</cachedir>"),
            "{text}"
        );
        assert!(text.contains("<const>hintfull</const>"), "{text}");
        write_fontconfig(&slot, &keep, Some("<evil/>")).unwrap();
        assert!(!std::fs::read_to_string(&conf).unwrap().contains("evil"));
    }
}
