//! `[cluster]`: many daemons, one pool, through Redis or Valkey. Off unless
//! `redis_url` is set; a single daemon needs none of it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `[cluster]`: the fleet this daemon belongs to (its `Debug` hides the
/// Redis password).
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// `redis://[:password@]host:port[/db]` or `rediss://…` (TLS). The
    /// password may instead come from `IDPOOL_REDIS_URL` (which wins), so it
    /// stays out of the config file. Unset: no fleet.
    pub redis_url: Option<String>,
    /// This daemon's name in the fleet; default the host name
    /// (`IDPOOL_NODE` wins). Identities it starts with are `<node>/<slot>`.
    pub node: Option<String>,
    /// Every key the fleet writes starts with this.
    pub key_prefix: String,
    /// Where the other daemons reach this one (`http://host:port`: an IP
    /// literal or a host name, a port, nothing else); default `http://` +
    /// `server.listen`. `IDPOOL_ADVERTISE` wins.
    pub advertise: Option<String>,
    /// The only addresses (`http://host:port`) this daemon sends the cluster
    /// key to. Empty: any daemon whose advertised address is a loopback or
    /// private-network address (a host name must resolve only to such).
    pub peers: Vec<String>,
    /// The shared secret daemons present to each other when they forward a
    /// call (one line, file mode 0600). Without it nothing is forwarded.
    pub key_file: Option<PathBuf>,
    /// A daemon's registration, and with it every lease it holds, lasts this
    /// long unless renewed (every quarter of it). Once it lapsed, its
    /// identities are without a host; another daemon adopts one only after
    /// one more beat (a late daemon comes back first).
    pub lease_ttl_secs: u64,
    /// Every Redis command gives up after this long (then: degraded).
    pub command_timeout_ms: u64,
    /// Take over identities whose daemon died (its lease expired).
    pub adopt: bool,
    /// How many identities this daemon may adopt: empty slots opened at
    /// start after the configured ones, with `spare_profile`.
    pub spare_slots: usize,
    /// More slots opened at start for identities without a host only: used
    /// while some identity's daemon is gone and no spare slot is left, and
    /// only while the host's available memory holds one more browser
    /// (`browser.max_rss_mb`, at least 512 MiB). Not advertised as spares.
    pub adopt_beyond_spares: usize,
    /// The profile spare slots wear; only identities of this profile are
    /// adopted (an identity keeps its fingerprint). Default `pool.profile`
    /// or `default`.
    pub spare_profile: Option<String>,
    /// Forward a call to a daemon with an admitted identity when none of
    /// this daemon's own is.
    pub forward: bool,
    /// Set by commands that open the pool themselves (`idpool fetch`, …):
    /// only `idpool serve` joins the fleet.
    #[serde(skip)]
    pub local_only: bool,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("redis_url", &self.redis_url.as_deref().map(redact))
            .field("node", &self.node)
            .field("key_prefix", &self.key_prefix)
            .field("advertise", &self.advertise)
            .field("peers", &self.peers)
            .field("key_file", &self.key_file)
            .field("lease_ttl_secs", &self.lease_ttl_secs)
            .field("adopt", &self.adopt)
            .field("spare_slots", &self.spare_slots)
            .field("adopt_beyond_spares", &self.adopt_beyond_spares)
            .finish_non_exhaustive()
    }
}

/// A Redis URL without its credentials (`redis://***@host:port/db`).
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(a), Some(b)) if b > a => format!("{}://***{}", &url[..a], &url[b..]),
        _ => url.to_string(),
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            redis_url: None,
            node: None,
            key_prefix: "idpool:".into(),
            advertise: None,
            peers: Vec::new(),
            key_file: None,
            lease_ttl_secs: 15,
            command_timeout_ms: 1000,
            adopt: false,
            spare_slots: 0,
            adopt_beyond_spares: 0,
            spare_profile: None,
            forward: true,
            local_only: false,
        }
    }
}

impl ClusterConfig {
    /// The Redis URL in force (`IDPOOL_REDIS_URL` first), if the fleet is on.
    pub fn url(&self) -> Option<String> {
        if self.local_only {
            return None;
        }
        std::env::var("IDPOOL_REDIS_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(|| self.redis_url.clone())
    }

    /// The node name in force: `IDPOOL_NODE` (a StatefulSet's pod name),
    /// else `node`, else the host name.
    pub fn node_name(&self) -> String {
        std::env::var("IDPOOL_NODE")
            .ok()
            .filter(|n| !n.is_empty())
            .or_else(|| self.node.clone())
            .unwrap_or_else(host_name)
    }

    /// The advertised address in force: `IDPOOL_ADVERTISE`, else `advertise`.
    pub fn advertised(&self) -> Option<String> {
        std::env::var("IDPOOL_ADVERTISE")
            .ok()
            .filter(|a| !a.is_empty())
            .or_else(|| self.advertise.clone())
    }

    /// Spare slots when adopting (none otherwise), those of
    /// `adopt_beyond_spares` included.
    pub fn spares(&self) -> usize {
        if self.adopt {
            self.spare_slots + self.adopt_beyond_spares
        } else {
            0
        }
    }

    /// The spare slots of `adopt_beyond_spares` when adopting.
    pub fn beyond_spares(&self) -> usize {
        if self.adopt {
            self.adopt_beyond_spares
        } else {
            0
        }
    }

    /// What is wrong with the section, if anything.
    pub fn problem(&self) -> Option<String> {
        let url = self.url()?;
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Some("cluster.redis_url must start with redis:// or rediss://".into());
        }
        if self.lease_ttl_secs < 3 {
            return Some("cluster.lease_ttl_secs must be at least 3".into());
        }
        if self.command_timeout_ms == 0 {
            return Some("cluster.command_timeout_ms must be at least 1".into());
        }
        let node = self.node_name();
        if node.is_empty()
            || !node
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Some(format!(
                "cluster.node `{node}` must be letters, digits, `-`, `_` and `.`"
            ));
        }
        if self.key_prefix.contains(char::is_whitespace) {
            return Some("cluster.key_prefix must not contain spaces".into());
        }
        if let Some(a) = self.advertised()
            && let Err(e) = PeerAddr::parse(&a)
        {
            return Some(format!("cluster.advertise (or IDPOOL_ADVERTISE): {e}"));
        }
        self.peers.iter().find_map(|p| {
            PeerAddr::parse(p)
                .err()
                .map(|e| format!("cluster.peers: {e}"))
        })
    }

    /// `peers`, parsed (an entry that does not parse is left out: `problem`
    /// names it before the fleet opens).
    pub fn peer_addrs(&self) -> Vec<PeerAddr> {
        self.peers
            .iter()
            .filter_map(|p| PeerAddr::parse(p).ok())
            .collect()
    }

    pub(super) fn rebase(&mut self, rebase: impl Fn(&mut PathBuf)) {
        if let Some(k) = self.key_file.as_mut() {
            rebase(k);
        }
    }

    /// The cluster key, read from `key_file` (trimmed); `Ok(None)` without one.
    pub fn read_key(&self) -> std::io::Result<Option<String>> {
        match &self.key_file {
            None => Ok(None),
            Some(p) => read_secret(p).map(Some),
        }
    }
}

fn read_secret(p: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(p)?;
    let key = text.trim().to_string();
    if key.len() < 16 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: the cluster key must be at least 16 characters",
                p.display()
            ),
        ));
    }
    Ok(key)
}

/// A daemon's address as the fleet accepts it: `http://host:port`, where
/// `host` is a dotted-quad IPv4, a bracketed IPv6 or a DNS name; no
/// credentials, path, query or fragment (one trailing `/` is allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddr {
    pub host: PeerHost,
    pub port: u16,
}

/// The host of a [`PeerAddr`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerHost {
    Ip(std::net::IpAddr),
    /// Lowercase.
    Name(String),
}

impl PeerAddr {
    /// Parse an advertised address; `Err` says what is wrong (never echoing
    /// credentials the text may carry).
    pub fn parse(text: &str) -> Result<PeerAddr, String> {
        let shown = shown_addr(text);
        let bad =
            |why: &str| format!("`{shown}` is not an address of the form http://host:port: {why}");
        let rest = match text.get(..7) {
            Some(s) if s.eq_ignore_ascii_case("http://") => &text[7..],
            _ => return Err(bad("it must start with http://")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if let Some(c) = rest.chars().find(|c| {
            matches!(c, '@' | '/' | '?' | '#' | '\\' | '%') || c.is_whitespace() || c.is_control()
        }) {
            return Err(bad(match c {
                '@' => "no credentials",
                '/' => "no path",
                '?' => "no query",
                '#' => "no fragment",
                _ => "an unexpected character",
            }));
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (ip, port) = v6
                .split_once("]:")
                .ok_or_else(|| bad("an IPv6 address needs [addr]:port"))?;
            let ip: std::net::Ipv6Addr = ip.parse().map_err(|_| bad("not an IPv6 address"))?;
            (PeerHost::Ip(ip.into()), port)
        } else {
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| bad("the port is missing"))?;
            if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
                (PeerHost::Ip(ip.into()), port)
            } else if is_host_name(host) {
                (PeerHost::Name(host.to_ascii_lowercase()), port)
            } else {
                return Err(bad(
                    "the host is neither a dotted-quad IPv4 address nor a host name",
                ));
            }
        };
        let port = (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
            .then(|| port.parse::<u16>().ok())
            .flatten()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
        Ok(PeerAddr { host, port })
    }

    /// `host:port` (an IPv6 host in brackets).
    pub fn authority(&self) -> String {
        match &self.host {
            PeerHost::Ip(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{}", self.port),
            PeerHost::Ip(ip) => format!("{ip}:{}", self.port),
            PeerHost::Name(n) => format!("{n}:{}", self.port),
        }
    }
}

impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}", self.authority())
    }
}

/// DNS labels of letters, digits and `-`, the last one not all digits (a
/// resolver reads `127.1` or `2130706433` as an IPv4 address).
fn is_host_name(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    host.len() <= 253
        && labels.iter().all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && labels
            .last()
            .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()))
}

/// An address as messages show it: credentials masked, one short line.
pub fn shown_addr(text: &str) -> String {
    let masked = match (text.find("://"), text.rfind('@')) {
        (Some(a), Some(b)) if b > a => format!("{}://***{}", &text[..a], &text[b..]),
        (None, Some(b)) => format!("***{}", &text[b..]),
        _ => text.to_string(),
    };
    crate::diag::one_line(&masked, 120)
}

/// The machine's host name (`/proc/sys/kernel/hostname`), else `idpool`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "idpool".into())
}

#[cfg(test)]
mod tests {
    use super::ClusterConfig;

    fn with(url: &str) -> ClusterConfig {
        ClusterConfig {
            redis_url: Some(url.into()),
            node: Some("n1".into()),
            ..ClusterConfig::default()
        }
    }

    #[test]
    fn bad_sections_are_named() {
        assert_eq!(ClusterConfig::default().problem(), None, "off is fine");
        assert_eq!(with("redis://127.0.0.1:6379/").problem(), None);
        let p = with("http://127.0.0.1:6379/").problem().expect("a problem");
        assert!(p.contains("cluster.redis_url"), "{p}");
        let mut c = with("redis://127.0.0.1/");
        c.lease_ttl_secs = 1;
        assert!(c.problem().expect("ttl").contains("lease_ttl_secs"));
        c.lease_ttl_secs = 15;
        c.node = Some("bad name".into());
        assert!(
            c.problem()
                .expect("node")
                .contains("cluster.node `bad name`")
        );
    }

    #[test]
    fn an_advertise_or_peer_that_is_not_host_and_port_is_named() {
        let mut c = with("redis://127.0.0.1:6379/");
        c.advertise = Some("http://user:S3cret@10.0.0.1:80/x".into());
        let p = c.problem().expect("advertise");
        assert!(
            p.contains("cluster.advertise") && !p.contains("S3cret"),
            "{p}"
        );
        c.advertise = Some("http://idpool-a:7777".into());
        assert_eq!(c.problem(), None);
        c.peers = vec!["http://idpool-b:7777".into(), "idpool-c:7777".into()];
        let p = c.problem().expect("peers");
        assert!(p.contains("cluster.peers") && p.contains("idpool-c"), "{p}");
    }

    #[test]
    fn the_password_stays_out_of_debug_output() {
        let c = with("redis://:hunter2secret@127.0.0.1:6379/0");
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2secret"), "{shown}");
        assert!(shown.contains("redis://***@127.0.0.1:6379/0"), "{shown}");
    }

    #[test]
    fn a_short_cluster_key_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("cluster.key");
        std::fs::write(&p, "short\n").expect("write");
        let c = ClusterConfig {
            key_file: Some(p.clone()),
            ..ClusterConfig::default()
        };
        let e = c.read_key().expect_err("too short");
        assert!(e.to_string().contains("cluster.key"), "{e}");
        std::fs::write(&p, "0123456789abcdef0123\n").expect("write");
        assert_eq!(
            c.read_key().expect("ok").as_deref(),
            Some("0123456789abcdef0123")
        );
    }
}
