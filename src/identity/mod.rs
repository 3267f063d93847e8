//! What one identity is made of: its profile (`profile/`), its cookie jar
//! (`jar/`), sessions in and out (`session/`), its lazily launched Chromium
//! (`browser/`), the device it is (`persona/`) and its HTTP tier calibrated
//! against that Chromium (`calibrate/`).

pub mod browser;
pub mod bundle;
pub mod calibrate;
pub mod jar;
pub mod lock;
pub mod persona;
pub mod profile;
pub mod session;
pub mod slot;
