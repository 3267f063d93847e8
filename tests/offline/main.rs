//! Checks that need no daemon: the layers, parsers under property tests, the tool specs, loopback-only tests, `check-config`, `deploy/` and what `install.sh` puts.

#[path = "../common/mod.rs"]
mod common;

mod check_config;
mod deploy;
mod install;
mod layers;
mod loopback_only;
mod properties;
mod provider_schemas;
mod tool_specs;
