//! One persona, drawn from its seed (the module above says what it holds).

use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use super::fonts::font_files;
use super::population;
use crate::identity::browser::Device;
use crate::identity::profile::{Profile, Screen, Viewport, country_zones};

/// One slot's device, as drawn (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persona {
    /// Everything below follows from it.
    pub seed: u64,
    pub screen: Screen,
    /// Device pixel ratio: 1 or 2.
    pub dpr: f64,
    pub window: Viewport,
    /// The desktop's theme is dark (`prefers-color-scheme: dark`).
    pub dark: bool,
    /// Debian font packages the device has.
    pub fonts: Vec<String>,
    /// The desktop's font hinting (fontconfig's `hintstyle`).
    pub hinting: String,
}

/// Weighted choice: `items[i]` with weight `weight(items[i])`.
fn pick<'a, T>(
    rng: &mut rand_chacha::ChaCha8Rng,
    items: &'a [T],
    weight: impl Fn(&T) -> u32,
) -> &'a T {
    let total: u64 = items.iter().map(|i| u64::from(weight(i))).sum();
    let mut at = rng.next_u64() % total.max(1);
    for item in items {
        let w = u64::from(weight(item));
        if at < w {
            return item;
        }
        at -= w;
    }
    &items[items.len() - 1]
}

/// True `percent` times in a hundred.
fn chance(rng: &mut rand_chacha::ChaCha8Rng, percent: u32) -> bool {
    rng.next_u64() % 100 < u64::from(percent)
}

impl Persona {
    /// A new persona from a random seed.
    pub fn fresh() -> Persona {
        Persona::draw(rand::random())
    }

    /// The persona of `seed`: the same on every build and machine.
    pub fn draw(seed: u64) -> Persona {
        use super::population::*;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let &(width, height, dpr, _) = pick(&mut rng, SCREENS, |s| s.3);
        let &(taskbar, _) = pick(&mut rng, PANELS, |p| p.1);
        let screen = Screen {
            width,
            height,
            taskbar,
        };
        let maximised = chance(&mut rng, MAXIMISED);
        let fitting: Vec<Viewport> = WINDOWS
            .iter()
            .map(|&(width, height)| Viewport { width, height })
            .filter(|w| screen.misfit(*w).is_none())
            .collect();
        let window = if maximised || fitting.is_empty() {
            Viewport {
                width: screen.width,
                height: screen.avail_height(),
            }
        } else {
            *pick(&mut rng, &fitting, |_| 1)
        };
        let dark = chance(&mut rng, DARK);
        let fonts = FONT_PACKAGES
            .iter()
            .filter(|(_, share)| chance(&mut rng, *share))
            .map(|(p, _)| (*p).to_string())
            .collect();
        let &(hinting, _) = pick(&mut rng, HINTING, |h| h.1);
        Persona {
            seed,
            screen,
            dpr,
            window,
            dark,
            fonts,
            hinting: hinting.to_string(),
        }
    }

    /// Why a persona read from a file or a bundle is not one the pool
    /// makes (`None`: it is): it must be its seed's own draw, so nothing
    /// in it can be planted (a font package name ends up in a path).
    pub fn problem(&self) -> Option<String> {
        let own = Persona::draw(self.seed);
        (own != *self).then(|| {
            format!(
                "the persona is not the one its seed {} draws (a persona is re-created from its seed; this one was changed by hand)",
                self.seed
            )
        })
    }

    /// What the slot's browser is launched as under `profile`: the
    /// profile's pinned screen and window (and a phone's own) win, a
    /// window that does not fit a pinned screen is the profile's, and the
    /// time zone is the profile's, else one of its proxy country's (by the
    /// seed), else the machine's. The fonts are the installed files of the
    /// persona's packages; the packages not installed here come back too
    /// (with none at all, the browser keeps the machine's fonts).
    pub fn device(&self, profile: &Profile, slot: usize) -> (Device, Vec<String>) {
        let mobile = profile.mobile();
        let screen = if profile.screen_pinned || mobile {
            profile.screen
        } else {
            self.screen
        };
        let window = if profile.viewport_pinned || mobile {
            if profile.vary_window {
                screen.window_for_slot(profile.viewport, slot)
            } else {
                profile.viewport
            }
        } else if screen.misfit(self.window).is_none() {
            self.window
        } else {
            profile.viewport
        };
        let timezone = profile.timezone.clone().or_else(|| {
            let country = profile.geo.as_ref()?.country.as_deref()?;
            let zones = country_zones(country);
            if zones.is_empty() {
                return None;
            }
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ 0x7a6f6e65);
            Some(pick(&mut rng, zones, |z| z.1).0.to_string())
        });
        let (files, missing) = font_files(&self.fonts);
        let device = Device {
            screen,
            window: (window.width, window.height),
            dpr: if mobile { 1.0 } else { self.dpr },
            dark: self.dark,
            fonts: (!files.is_empty()).then_some(files),
            hinting: population::HINTING
                .iter()
                .map(|(h, _)| *h)
                .find(|h| *h == self.hinting),
            timezone,
        };
        (device, missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_persona_and_every_value_is_coherent() {
        let mut screens = std::collections::BTreeSet::new();
        let mut canvases = std::collections::BTreeSet::new();
        for seed in 0..500u64 {
            let p = Persona::draw(seed);
            assert_eq!(p, Persona::draw(seed), "seed {seed}");
            assert!(p.problem().is_none());
            assert!(p.screen.misfit(p.window).is_none(), "{p:?}");
            assert!(p.fonts.iter().any(|f| f == "fonts-dejavu-core"), "{p:?}");
            assert!([1.0, 2.0].contains(&p.dpr), "{p:?}");
            screens.insert((p.screen.width, p.screen.height, p.window.width));
            canvases.insert(p.fonts.clone());
        }
        assert!(screens.len() > 40, "{}", screens.len());
        assert!(canvases.len() > 300, "{}", canvases.len());
        // The stream is fixed: this seed's persona is this one on every
        // build (a change here breaks every stored identity).
        let p = Persona::draw(42);
        let again = serde_json::to_string(&p).unwrap();
        let back: Persona = serde_json::from_str(&again).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn a_planted_value_is_named() {
        let mut p = Persona::draw(7);
        p.fonts.push("../../etc".into());
        assert!(p.problem().unwrap().contains("seed 7"));
        let mut p = Persona::draw(7);
        p.dark = !p.dark;
        assert!(p.problem().is_some());
    }
}
