//! Who may receive the cluster key, and what it may ask for.
//!
//! Anyone who can write to the fleet's Redis can plant a node record with
//! an address of their choosing; a daemon forwarding to it would hand over
//! the key. So a daemon sends the key only to an address that is
//! `http://host:port` and, with `cluster.peers` set, one of them; without
//! it, a loopback or private-network address (an IP literal, or a name that
//! resolves only to such addresses, connected to at the address checked).
//! The key itself buys only the calls a fleet forwards
//! ([`FORWARDED_TOOLS`]), as an operator at most.

use std::net::SocketAddr;
use std::time::Duration;

use super::Cluster;
use super::address::refused_address;
use crate::config::{PeerAddr, PeerHost, shown_addr};

/// The tools one daemon forwards to another, and so the only ones the
/// cluster key may call: the forwarder and the receiver both read this.
pub const FORWARDED_TOOLS: [&str; 3] = ["scrape", "get_reviews", "extract"];

/// Whether `tool` is one a fleet forwards.
pub fn is_forwarded(tool: &str) -> bool {
    FORWARDED_TOOLS.contains(&tool)
}

/// How long resolving a peer's name may take.
const DNS_TIMEOUT: Duration = Duration::from_secs(3);

/// Where a forwarded call goes: the address to connect to and the `Host`
/// it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// `http://ip:port` (or `http://name:port` for a listed peer).
    pub base: String,
    /// `host:port` as advertised.
    pub host: String,
}

impl Cluster {
    /// The cheap half of [`Cluster::reach`] (no DNS): whether `advertise`
    /// may be forwarded to at all. A refusal is logged (the address masked).
    pub fn may_forward_to(&self, advertise: &str) -> bool {
        let verdict = PeerAddr::parse(advertise).and_then(|a| {
            if !self.peers.is_empty() {
                return self.listed(&a).map(drop);
            }
            match a.host {
                PeerHost::Ip(ip) => refused_address(ip).map_or(Ok(()), |w| Err(w.to_string())),
                PeerHost::Name(_) => Ok(()),
            }
        });
        match verdict {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!(address = %shown_addr(advertise), reason = %why, "a node's advertised address is refused: nothing is forwarded there");
                false
            }
        }
    }

    fn listed(&self, a: &PeerAddr) -> Result<Reach, String> {
        if self.peers.contains(a) {
            Ok(Reach {
                base: a.to_string(),
                host: a.authority(),
            })
        } else {
            Err(format!("`{a}` is not in cluster.peers"))
        }
    }

    /// Where a call forwarded to `advertise` may go, or why it may not.
    pub async fn reach(&self, advertise: &str) -> Result<Reach, String> {
        let refused =
            |why: String| format!("refused to forward to `{}`: {why}", shown_addr(advertise));
        let a = PeerAddr::parse(advertise).map_err(refused)?;
        if !self.peers.is_empty() {
            return self.listed(&a).map_err(refused);
        }
        let ip = match &a.host {
            PeerHost::Ip(ip) => *ip,
            PeerHost::Name(name) => {
                let found = tokio::time::timeout(
                    DNS_TIMEOUT,
                    tokio::net::lookup_host((name.as_str(), a.port)),
                )
                .await
                .map_err(|_| refused(format!("resolving `{name}` timed out")))?
                .map_err(|e| refused(format!("cannot resolve `{name}`: {e}")))?
                .collect::<Vec<SocketAddr>>();
                // Every address must pass: the connection goes to the first.
                if let Some(bad) = found
                    .iter()
                    .find_map(|s| refused_address(s.ip()).map(|w| (s.ip(), w)))
                {
                    return Err(refused(format!(
                        "`{name}` resolves to {} ({})",
                        bad.0, bad.1
                    )));
                }
                found
                    .first()
                    .map(SocketAddr::ip)
                    .ok_or_else(|| refused(format!("`{name}` resolves to no address")))?
            }
        };
        if let Some(why) = refused_address(ip) {
            return Err(refused(format!("{ip} is {why}")));
        }
        Ok(Reach {
            base: format!("http://{}", SocketAddr::new(ip, a.port)),
            host: a.authority(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::refused_address;
    use crate::config::{PeerAddr, PeerHost};

    #[test]
    fn only_plain_host_and_port_addresses_parse() {
        let ok = PeerAddr::parse("http://127.0.0.1:8790").expect("plain");
        assert_eq!(ok.host, PeerHost::Ip("127.0.0.1".parse().expect("ip")));
        assert_eq!(ok.port, 8790);
        assert_eq!(
            PeerAddr::parse("http://idpool-a:7777/")
                .expect("name")
                .to_string(),
            "http://idpool-a:7777"
        );
        assert_eq!(
            PeerAddr::parse("http://[fd00::1]:7777")
                .expect("v6")
                .authority(),
            "[fd00::1]:7777"
        );
        for bad in [
            "http://user:pw@127.0.0.2:1/x",
            "http://127.0.0.2:1/x",
            "http://127.0.0.2:1?a=b",
            "http://127.0.0.2:1#f",
            "https://127.0.0.2:1",
            "ftp://127.0.0.2:1",
            "127.0.0.2:1",
            "http://127.0.0.2",
            "http://127.0.0.2:0",
            "http://127.0.0.2:99999",
            "http://127.1:80",
            "http://2130706433:80",
            "http://0x7f.0.0.1:80",
            "http://-bad-.test:80",
            "http://a b:80",
            "http://a%2fb:80",
        ] {
            assert!(PeerAddr::parse(bad).is_err(), "{bad} parsed");
        }
        let e = PeerAddr::parse("http://user:S3cret@127.0.0.2:1/x").expect_err("creds");
        assert!(!e.contains("S3cret"), "{e}");
    }

    #[test]
    fn the_key_goes_to_loopback_and_private_networks_only() {
        for ok in [
            "127.0.0.1",
            "127.0.0.2",
            "10.1.2.3",
            "172.18.0.4",
            "192.168.1.9",
            "100.64.0.1",
            "::1",
            "fd12::7",
            "::ffff:10.0.0.1",
        ] {
            let ip = ok.parse().expect("ip");
            assert_eq!(refused_address(ip), None, "{ok}");
        }
        for bad in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "fe80::1",
            "ff02::1",
        ] {
            let ip = bad.parse().expect("ip");
            assert!(refused_address(ip).is_some(), "{bad} accepted");
        }
    }
}
