//! The device a slot's Chromium is launched as (its persona, under its
//! profile): screen, window, pixel ratio, theme, time zone and fonts, all
//! carried by launch flags and the environment, so that the page, its
//! iframes and its workers agree.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
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

/// Give a slot's browser only `files`: links to them in `<slot>/fonts`
/// and a `fonts.conf` that lists that folder alone, keeps its cache in the
/// slot's, and takes the system's rendering rules and aliases
/// (`/etc/fonts/conf.d`: Arial is Liberation Sans where that is installed,
/// as on any Debian desktop), and the desktop's hinting. The folder is made
/// anew only when the set changed, so that fontconfig's cache of it holds
/// from launch to launch. Returns the file for `FONTCONFIG_FILE`.
pub(super) fn write_fontconfig(
    slot_dir: &Path,
    files: &[PathBuf],
    hinting: Option<&str>,
) -> Result<PathBuf> {
    let dir = slot_dir.join("fonts");
    let conf = slot_dir.join("fonts.conf");
    if links_of(&dir) != Some(files.to_vec()) {
        link_fonts(&dir, files)?;
    }
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
    let text = format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n\
         <!-- This slot's fonts (its persona's); written by idpool at each launch. -->\n\
         <fontconfig>\n  <dir>{}</dir>\n  <cachedir>{}</cachedir>\n  \
         <include ignore_missing=\"yes\">/etc/fonts/conf.d</include>\n{hint}</fontconfig>\n",
        xml_text(&dir.display().to_string()),
        xml_text(&cache.display().to_string())
    );
    if std::fs::read_to_string(&conf).ok().as_deref() != Some(text.as_str()) {
        crate::fsutil::write_atomically(&conf, text.as_bytes())?;
    }
    Ok(conf)
}

/// `dir` anew, holding a link to each of `files` (numbered, in order).
fn link_fonts(dir: &Path, files: &[PathBuf]) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot clear {}", dir.display()), e))?;
    }
    crate::fsutil::create_private_dir(dir)?;
    for (n, file) in files.iter().enumerate() {
        let name = file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let link = dir.join(format!("{n:05}-{name}"));
        std::os::unix::fs::symlink(file, &link)
            .map_err(|e| Error::io(format!("cannot link {}", link.display()), e))?;
    }
    Ok(())
}

/// The targets of the links in `dir`, in their order (`None`: no folder,
/// or something in it that is not one of our links).
fn links_of(dir: &Path) -> Option<Vec<PathBuf>> {
    let mut links: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .map(|e| {
            let e = e.ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_link(e.path()).ok()?,
            ))
        })
        .collect::<Option<_>>()?;
    links.sort();
    Some(links.into_iter().map(|(_, t)| t).collect())
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
    fn the_fontconfig_lists_the_slots_folder_alone() {
        let dir = tempfile::tempdir().unwrap();
        let font = dir.path().join("X.ttf");
        std::fs::write(&font, b"f").unwrap();
        let slot = dir.path().join("slot");
        std::fs::create_dir(&slot).unwrap();
        let conf = write_fontconfig(&slot, std::slice::from_ref(&font), Some("hintfull")).unwrap();
        let text = std::fs::read_to_string(&conf).unwrap();
        assert_eq!(text.matches("<dir>").count(), 1, "{text}");
        assert!(text.contains("<const>hintfull</const>"), "{text}");
        assert!(text.contains(&format!("<dir>{}</dir>", slot.join("fonts").display())));
        let links: Vec<_> = std::fs::read_dir(slot.join("fonts"))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(links.len(), 1);
        assert_eq!(std::fs::read_link(links[0].path()).unwrap(), font);
        // The same set again leaves the folder as it was (its cache holds).
        let made = std::fs::metadata(slot.join("fonts"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_fontconfig(&slot, std::slice::from_ref(&font), Some("hintfull")).unwrap();
        let again = std::fs::metadata(slot.join("fonts"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(made, again);
        // A launch with fewer fonts leaves none of the first.
        write_fontconfig(&slot, &[], Some("<evil/>")).unwrap();
        assert!(!std::fs::read_to_string(&conf).unwrap().contains("evil"));
        assert_eq!(std::fs::read_dir(slot.join("fonts")).unwrap().count(), 0);
    }
}
