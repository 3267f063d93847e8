//! A persona per slot: the device a person could have, drawn once from
//! what people's machines of this platform show ([`population`]) and kept
//! with the identity (`identity.json`, and so in bundles).
//!
//! A persona is its seed: [`Persona::draw`] makes the same persona from the
//! same seed on any build (ChaCha8, whose stream is fixed, and our own
//! weighted choice), so a stored one is checked against its seed when read
//! and an identity moved to another machine is the same device there. It
//! holds the screen (and its panel), the device pixel ratio, the window
//! (maximised, or a common size that fits), the desktop's colour scheme,
//! its font hinting and a set of Debian font packages. Where the
//! profile pins a value (`viewport`, `screen`) or the proxy's country
//! fixes one (the time zone), that wins ([`Persona::device`]).
//!
//! It is applied by launch flags, the process environment (a fontconfig of
//! the slot's own) and DevTools overrides only: no script runs in a page.
//! What one machine cannot vary (its GPU and so WebGL, its audio stack,
//! its maths library, its memory, its processors) is the same on every
//! slot of it; the linkage report says so. Processors are among them:
//! DevTools can override `hardwareConcurrency` in a page, but a dedicated
//! worker starts with the machine's before any override reaches it (the
//! driver resumes it at once), and a page that asks both sees the lie.

mod book;
mod draw;
mod fonts;
pub mod linkage;
pub mod population;

pub use book::Book;
pub use draw::Persona;
pub use fonts::font_files;
