//! The personas of one machine's slots. A new identity draws the persona
//! least like the others': of a handful of seeds, the first whose look
//! (the fonts a page's Arial falls to, colour emoji, hinting) no other slot
//! has, else the one that shares it with the fewest. A pool's slots so
//! spread over the population instead of clustering in its commonest
//! desktop, where their canvases would be one. Each persona is still its
//! seed's own draw.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use super::draw::Persona;

/// Seeds tried for a new identity.
const CANDIDATES: usize = 24;

/// Which packages give a page's Arial, in fontconfig's order of metric
/// aliases (Liberation Sans 2, Liberation Sans 1, Arimo; DejaVu else:
/// URW's Nimbus Sans is no alias of Arial here). Measured: each renders
/// the self-check's canvas differently.
const ARIAL: &[&str] = &["fonts-liberation2", "fonts-liberation", "fonts-croscore"];

/// What a canvas of text shows of a persona.
#[derive(Debug, PartialEq, Eq)]
struct Look<'a> {
    arial: &'a str,
    emoji: bool,
    hinting: &'a str,
}

fn look(p: &Persona) -> Look<'_> {
    let has = |pkg: &str| p.fonts.iter().any(|f| f == pkg);
    Look {
        arial: ARIAL.iter().copied().find(|a| has(a)).unwrap_or("dejavu"),
        emoji: has("fonts-noto-color-emoji"),
        // Medium and full hinting draw Liberation's glyphs alike.
        hinting: match p.hinting.as_str() {
            "hintmedium" => "hintfull",
            h => h,
        },
    }
}

/// The machine's slots' personas, by slot.
#[derive(Debug, Default)]
pub struct Book {
    kept: Mutex<BTreeMap<usize, Persona>>,
}

impl Book {
    /// Slot `slot` is `persona` now.
    pub fn keep(&self, slot: usize, persona: &Persona) {
        self.kept.lock().insert(slot, persona.clone());
    }

    /// A new persona for slot `slot`, least like the other slots' (and
    /// kept as its own).
    pub fn fresh_for(&self, slot: usize) -> Persona {
        let mut kept = self.kept.lock();
        let others: Vec<&Persona> = kept
            .iter()
            .filter(|(s, _)| **s != slot)
            .map(|(_, p)| p)
            .collect();
        let alike = |p: &Persona| others.iter().filter(|o| look(o) == look(p)).count();
        let mut best: Option<(usize, Persona)> = None;
        for _ in 0..CANDIDATES {
            let p = Persona::fresh();
            let n = alike(&p);
            if best.as_ref().is_none_or(|(b, _)| n < *b) {
                best = Some((n, p));
            }
            if n == 0 {
                break;
            }
        }
        let persona = best.map_or_else(Persona::fresh, |(_, p)| p);
        kept.insert(slot, persona.clone());
        persona
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_slot_takes_a_look_no_other_slot_has() {
        let book = Book::default();
        let mut looks = Vec::new();
        for slot in 0..6 {
            let p = book.fresh_for(slot);
            assert!(p.problem().is_none(), "its seed's own draw");
            looks.push(format!("{:?}", look(&p)));
        }
        let mut distinct = looks.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 6, "{looks:?}");
        // A slot renewed is compared with the others, not with itself.
        let again = book.fresh_for(0);
        assert!(
            !looks[1..].contains(&format!("{:?}", look(&again))),
            "{looks:?} / {again:?}"
        );
    }
}
