//! The SSRF guard: a URL is fetched only when its scheme is http(s), its host is
//! allowed (any host with `security.public_web`, else one a strategy or
//! `security.allowed_hosts` covers), and (unless `allow_private_networks`)
//! it does not resolve to a private, loopback or link-local address.
//! Redirect targets go through the same check, and the HTTP tier connects
//! only to addresses [`GuardedResolver`] checked (no second lookup a
//! rebinding DNS server could answer differently).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::error::{Error, ErrorKind, Result};

/// What may be fetched.
#[derive(Debug)]
pub struct Guard {
    /// Swapped when strategies are reloaded.
    hosts: parking_lot::RwLock<Vec<String>>,
    /// Any public host may be fetched.
    public_web: bool,
    allow_private: bool,
    /// Private addresses allowed one by one.
    private_ok: Vec<IpAddr>,
    /// `security.resolve`: names answered without DNS.
    resolve: HashMap<String, IpAddr>,
}

const DNS_TIMEOUT: Duration = Duration::from_secs(5);

impl Guard {
    /// `hosts`: every strategy host pattern plus `security.allowed_hosts`;
    /// only those are fetched (the closed list, `public_web = false`).
    pub fn new(hosts: Vec<String>, allow_private: bool) -> Self {
        let hosts = hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect();
        Guard {
            hosts: parking_lot::RwLock::new(hosts),
            public_web: false,
            allow_private,
            private_ok: Vec::new(),
            resolve: HashMap::new(),
        }
    }

    /// Replace the host patterns (strategies reloaded).
    pub fn set_hosts(&self, hosts: Vec<String>) {
        *self.hosts.write() = hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect();
    }

    /// From `[security]`: `public_web`, `allow_private_networks`, `resolve`.
    pub fn from_config(hosts: Vec<String>, security: &crate::config::SecurityConfig) -> Self {
        let private = &security.allow_private_networks;
        let mut g = Guard::new(
            hosts,
            matches!(private, crate::config::PrivateNetworks::All(true)),
        );
        if let crate::config::PrivateNetworks::Only(ips) = private {
            g.private_ok = ips.clone();
        }
        g.public_web = security.public_web;
        g.resolve = (security.resolve.iter())
            .map(|(h, ip)| (h.trim_end_matches('.').to_ascii_lowercase(), *ip))
            .collect();
        g
    }

    /// Whether a strategy or `allowed_hosts` names `host` (as opposed to
    /// the open web).
    pub fn covers(&self, host: &str) -> bool {
        host_matches(&self.hosts.read(), host)
    }

    /// Check the scheme and host of `url`, without resolving it.
    pub fn check_static(&self, url: &Url) -> Result<()> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::refused(format!(
                "scheme `{}` is not allowed (http and https only)",
                url.scheme()
            )));
        }
        let host = host_of(url)?;
        if !self.public_web && !host_matches(&self.hosts.read(), &host) {
            return Err(Error::refused(format!(
                "host `{host}` is not covered by any strategy or security.allowed_hosts (security.public_web is off)"
            )));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_address(&host, ip)?;
        }
        Ok(())
    }

    /// Full check: scheme, host, and every address the host resolves to.
    pub async fn check(&self, url: &Url) -> Result<()> {
        self.check_static(url)?;
        let host = host_of(url)?;
        if self.allow_private || host.parse::<IpAddr>().is_ok() {
            return Ok(());
        }
        let port = url.port_or_known_default().unwrap_or(443);
        for addr in self.lookup(&host, port).await? {
            self.check_address(&host, addr.ip())?;
        }
        Ok(())
    }

    /// The addresses `host` resolves to: `security.resolve` first, then the
    /// system resolver (bounded by a timeout). Not checked.
    pub async fn lookup(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        if let Some(ip) = self.resolve.get(&key) {
            return Ok(vec![SocketAddr::new(*ip, port)]);
        }
        let addrs = tokio::time::timeout(DNS_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| Error::new(ErrorKind::Timeout, format!("resolving `{host}` timed out")))?
            .map_err(|e| {
                Error::new(ErrorKind::Network, format!("cannot resolve `{host}`")).with_source(e)
            })?
            .collect::<Vec<_>>();
        if addrs.is_empty() {
            return Err(Error::new(
                ErrorKind::Network,
                format!("`{host}` resolves to no address"),
            ));
        }
        Ok(addrs)
    }

    /// The address part of the check alone: may `host`, resolved to `ip`,
    /// be connected to? (Also the browser egress's whole check: pages load
    /// from any host, never from our own networks.)
    pub fn check_address(&self, host: &str, ip: IpAddr) -> Result<()> {
        if !self.allow_private && is_private(ip) && !self.private_ok.contains(&ip) {
            return Err(Error::refused(format!(
                "`{host}` is a private, loopback or link-local address ({ip}); set security.allow_private_networks to allow it"
            )));
        }
        Ok(())
    }
}

/// The HTTP tier's DNS: [`Guard::lookup`], keeping only addresses the guard
/// allows, so the connection goes where the check looked. The slot's own
/// proxy is exempt (an operator's proxy may live on a private network).
pub struct GuardedResolver {
    guard: Arc<Guard>,
    proxy_host: Option<String>,
}

impl GuardedResolver {
    pub fn new(guard: Arc<Guard>, proxy_host: Option<String>) -> Self {
        GuardedResolver {
            guard,
            proxy_host: proxy_host.map(|h| h.to_ascii_lowercase()),
        }
    }
}

impl wreq::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: wreq::dns::Name) -> wreq::dns::Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_ascii_lowercase();
        let exempt = self.proxy_host.as_deref() == Some(host.as_str());
        Box::pin(async move {
            // Port 0: wreq puts in the URL's port.
            let addrs = guard.lookup(&host, 0).await?;
            if !exempt {
                for a in &addrs {
                    guard.check_address(&host, a.ip())?;
                }
            }
            Ok(Box::new(addrs.into_iter()) as wreq::dns::Addrs)
        })
    }
}

fn host_of(url: &Url) -> Result<String> {
    let host = url
        .host_str()
        .ok_or_else(|| Error::refused("URL has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    Ok(host)
}

/// Loopback, private (RFC 1918, ULA, site-local), link-local, CGNAT,
/// unspecified, multicast, broadcast, documentation, benchmarking and reserved
/// ranges; an IPv6 address that carries an IPv4 one (mapped, compatible,
/// translated, NAT64, 6to4) is judged by the IPv4 inside, and the local-use
/// NAT64 prefix `64:ff9b:1::/48` is private as a whole.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(v6) {
                return is_private_v4(v4);
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                // 64:ff9b:1::/48, RFC 8215's local-use NAT64 prefix: the IPv4
                // sits wherever the local translator's prefix length puts it,
                // and only a local translator answers there, so all of it.
                || s[..3] == [0x64, 0xff9b, 1]
        }
    }
}

fn is_private_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || o[0] == 0
        // 198.18.0.0/15: benchmarking (RFC 2544).
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
        // 240.0.0.0/4: reserved (255.255.255.255 included).
        || o[0] >= 240
}

/// The IPv4 address an IPv6 one carries, where a host or a gateway would
/// reach it: `::ffff:a.b.c.d` (mapped), `::a.b.c.d` (compatible, deprecated
/// but still routed by some stacks), `::ffff:0:a.b.c.d` (translated, RFC
/// 2765), `64:ff9b::/96` (NAT64, RFC 6052) and
/// `2002::/16` (6to4: the IPv4 is bits 16..48).
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // `::` and `::1` are IPv6's own unspecified and loopback.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// `*.example.com` covers every subdomain of example.com but not example.com itself.
pub fn host_matches(patterns: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    patterns.iter().any(|p| match p.strip_prefix("*.") {
        Some(suffix) => {
            host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host[..host.len() - suffix.len()].ends_with('.')
        }
        None => *p == host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_subdomains_only() {
        let p = vec!["*.shop.test".to_string(), "other.test".to_string()];
        assert!(host_matches(&p, "a.shop.test"));
        assert!(host_matches(&p, "x.y.shop.test"));
        assert!(!host_matches(&p, "shop.test"));
        assert!(!host_matches(&p, "evilshop.test"));
        assert!(host_matches(&p, "OTHER.test"));
        assert!(!host_matches(&p, "a.other.test"));
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[tokio::test]
    async fn refuses_other_hosts_schemes_and_private_addresses() {
        let g = Guard::new(vec!["127.0.0.1".into(), "*.shop.test".into()], false);
        assert!(g.covers("a.shop.test") && !g.covers("evil.test"));
        let e = g.check(&url("https://evil.test/")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Refused);
        assert!(e.to_string().contains("evil.test"));
        let e = g.check(&url("file:///etc/passwd")).await.unwrap_err();
        assert!(e.to_string().contains("scheme `file`"));
        let e = g.check(&url("http://127.0.0.1:8080/")).await.unwrap_err();
        assert!(e.to_string().contains("allow_private_networks"), "{e}");
        let g = Guard::new(vec!["127.0.0.1".into()], true);
        g.check(&url("http://127.0.0.1:8080/")).await.unwrap();
    }

    #[test]
    fn private_ranges() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn ipv4_inside_ipv6_is_judged_as_ipv4() {
        for ip in [
            "::127.0.0.1",
            "::10.0.0.1",
            "::ffff:0:127.0.0.1",
            "::ffff:0:192.168.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "64:ff9b:1:abcd::5db8:d822",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2002:c0a8:0101:ffff::",
            "fec0::1",
            "feff::1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        // The same wrappers around a public IPv4 stay public, and so does
        // the prefix next to each range.
        for ip in [
            "::93.184.216.34",
            "::ffff:0:93.184.216.34",
            "64:ff9b::93.184.216.34",
            "2002:5db8:d822::1",
            "64:ff9b:2::1",
            "2003::1",
            "fe7f::1",
        ] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn benchmarking_and_reserved_ipv4_ranges() {
        for ip in [
            "198.18.0.1",
            "198.19.255.255",
            "240.0.0.1",
            "250.1.2.3",
            "255.255.255.255",
            "::ffff:198.18.0.1",
            "2002:f000:1::",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["198.17.255.255", "198.20.0.1", "239.255.255.255"] {
            // 239/8 is multicast, private for another reason.
            let private = ip.starts_with("239.");
            assert_eq!(is_private(ip.parse().unwrap()), private, "{ip}");
        }
    }
}

#[cfg(test)]
mod open_web {
    use super::*;
    use crate::config::{PrivateNetworks, SecurityConfig};

    #[tokio::test]
    async fn public_web_admits_any_host_and_resolves_overrides_through_the_address_check() {
        let mut sec = SecurityConfig::default();
        assert!(sec.public_web, "the default");
        sec.allow_private_networks = PrivateNetworks::Only(vec!["127.0.0.1".parse().unwrap()]);
        sec.resolve
            .insert("news.web.test".into(), "127.0.0.1".parse().unwrap());
        sec.resolve
            .insert("intranet.web.test".into(), "127.0.0.2".parse().unwrap());
        let g = Guard::from_config(Vec::new(), &sec);
        let u = |s: &str| Url::parse(s).unwrap();
        g.check(&u("https://news.web.test:8443/a")).await.unwrap();
        let e = g.check(&u("https://Intranet.web.test/")).await.unwrap_err();
        assert!(e.to_string().contains("127.0.0.2"), "{e}");
        assert_eq!(
            g.lookup("news.web.test.", 80).await.unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
        sec.public_web = false;
        let g = Guard::from_config(vec!["*.shop.test".into()], &sec);
        let e = g.check(&u("https://news.web.test/")).await.unwrap_err();
        assert!(e.to_string().contains("security.public_web is off"), "{e}");
    }
}
