//! The linkage report: which fingerprint components each pair of slots
//! shares, from what each slot measured of itself at calibration (the
//! self-check page's `components`: canvas, fonts, screen, window, pixel
//! ratio, theme, languages, time zone, locale, WebGL, audio, maths,
//! processors, memory, heap limit). Two slots whose components are all
//! equal are one device to a fingerprinting library.

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// A slot's measured components, by name.
pub type Components = BTreeMap<String, String>;

/// Components one machine cannot vary between its slots (its GPU, audio
/// stack, maths library, processors and memory): every slot of a machine
/// shares them, and only a fleet of machines spreads them.
pub const MACHINE: &[&str] = &["audio", "cores", "heap", "math", "memory", "webgl"];

/// The components in what the self-check page saw (`seen.components`);
/// `None` in a record made before it measured them. Values are cut to 512
/// characters and at most 64 are read.
pub fn components_of(seen: &serde_json::Value) -> Option<Components> {
    let map = seen.get("components")?.as_object()?;
    Some(
        map.iter()
            .take(64)
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (
                    k.chars().take(64).collect(),
                    text.chars().take(512).collect(),
                )
            })
            .collect(),
    )
}

/// The device fingerprint: a hash over every component (16 hex digits),
/// equal for two slots exactly when a library reading all of them sees
/// one device.
pub fn fingerprint(c: &Components) -> String {
    let mut h = Sha256::new();
    for (k, v) in c {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..8])
}

/// What two slots share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub slots: [usize; 2],
    /// Shared components a slot's persona sets (the ones that matter).
    pub shared: Vec<String>,
    /// Shared components of the machine ([`MACHINE`]).
    pub machine: Vec<String>,
    /// Every component is equal: one device.
    pub same_device: bool,
}

/// Every pair of `slots` (each with its components).
pub fn pairs(slots: &[(usize, Components)]) -> Vec<Pair> {
    let mut out = Vec::new();
    for (i, (a, ca)) in slots.iter().enumerate() {
        for (b, cb) in &slots[i + 1..] {
            let equal: Vec<&String> = ca
                .iter()
                .filter(|(k, v)| cb.get(*k) == Some(v))
                .map(|(k, _)| k)
                .collect();
            let (machine, shared): (Vec<&String>, Vec<&String>) = equal
                .into_iter()
                .partition(|k| MACHINE.contains(&k.as_str()));
            out.push(Pair {
                slots: [*a, *b],
                same_device: ca == cb,
                shared: shared.into_iter().cloned().collect(),
                machine: machine.into_iter().cloned().collect(),
            });
        }
    }
    out
}

/// The report operators see: each measured slot's fingerprint, every
/// pair's shared components, which pairs are one device, and what the
/// machine makes common to all.
pub fn report(slots: &[(usize, Components)]) -> serde_json::Value {
    let pairs = pairs(slots);
    serde_json::json!({
        "measured": slots.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        "fingerprints": slots.iter().map(|(id, c)| (id.to_string(), fingerprint(c))).collect::<BTreeMap<_, _>>(),
        "same_device": pairs.iter().filter(|p| p.same_device).map(|p| p.slots).collect::<Vec<_>>(),
        "pairs": pairs,
        "machine": MACHINE,
        "note": "Components in `machine` (WebGL, audio, maths, processors, memory, heap limit) are the machine's: every slot of one machine shares them, and a fleet of machines spreads them. Each slot's persona sets the others; slots are measured at calibration.",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(pairs: &[(&str, &str)]) -> Components {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pairs_say_what_they_share_and_when_they_are_one_device() {
        let a = c(&[
            ("canvas", "1"),
            ("fonts", "A,B"),
            ("webgl", "swift"),
            ("screen", "1920x1080"),
        ]);
        let b = c(&[
            ("canvas", "2"),
            ("fonts", "A,B"),
            ("webgl", "swift"),
            ("screen", "2560x1440"),
        ]);
        let slots = vec![(0, a.clone()), (1, b), (2, a.clone())];
        let p = pairs(&slots);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].slots, [0, 1]);
        assert_eq!(p[0].shared, ["fonts"]);
        assert_eq!(p[0].machine, ["webgl"]);
        assert!(!p[0].same_device);
        assert!(p[1].same_device, "{:?}", p[1]);
        assert_eq!(fingerprint(&a), fingerprint(&slots[2].1));
        assert_ne!(fingerprint(&a), fingerprint(&slots[1].1));
        let r = report(&slots);
        assert_eq!(r["same_device"], serde_json::json!([[0, 2]]));
    }

    #[test]
    fn hostile_values_are_bounded() {
        let seen = serde_json::json!({"components": {"canvas": "x".repeat(10_000), "n": 5}});
        let got = components_of(&seen).unwrap();
        assert_eq!(got["canvas"].len(), 512);
        assert_eq!(got["n"], "5");
        assert!(components_of(&serde_json::json!({})).is_none());
    }
}
