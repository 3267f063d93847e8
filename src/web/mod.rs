//! The open web, page by page: what a host's `robots.txt` allows, what its
//! sitemaps list, and a page turned into what a caller asked for (markdown of
//! the main content, cleaned HTML, text, links, fields by CSS selector).
//! Pure functions over what was fetched; the pool fetches.

pub mod content;
pub mod robots;
pub mod sitemap;

pub use content::{Page, Pick};
pub use robots::Robots;
