//! How a client presents itself on the wire: the browser it emulates, on
//! which platform, its user agent, language and client hints, and the proxy
//! it leaves through. A slot's profile says it; the HTTP tier only reads it.

use crate::config::ProxyUrl;

#[derive(Debug, Clone)]
pub struct Persona {
    /// Whose it is, for errors (the profile's name).
    pub name: String,
    pub emulation: wreq_util::Profile,
    pub platform: wreq_util::Platform,
    pub user_agent: String,
    pub accept_language: String,
    /// `sec-ch-ua`, following the user agent's Chromium major.
    pub sec_ch_ua: Option<String>,
    pub proxy: Option<ProxyUrl>,
}
