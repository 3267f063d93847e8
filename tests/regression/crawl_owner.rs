//! Issue 32: see main.rs.
