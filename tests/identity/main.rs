//! Identities: jars, sessions in and out, retirement, accounts and the live view, fidelity, the JA4 gate, the page's looks, trust, headful browsers.

#[path = "../common/mod.rs"]
mod common;

mod fidelity;
mod headful;
mod ja4_gate;
mod jar;
mod linkage;
mod live;
mod login;
mod looks;
mod retire;
mod session;
mod trust;
