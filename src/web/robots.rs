//! `robots.txt` (RFC 9309) for hosts no strategy covers: the decision is
//! Google's matcher (the `robotstxt` crate, a port of Google's parser); the
//! rule a refusal names and the `Sitemap:` lines come from one more pass of
//! the same parser.

use robotstxt::matcher::{LongestMatchRobotsMatchStrategy, RobotsMatchStrategy};
use robotstxt::{DefaultMatcher, RobotsParseHandler};

/// RFC 9309 §2.5: at least 500 KiB must be parsed; what follows is ignored.
pub const MAX_BYTES: usize = 500 * 1024;

/// One host's `robots.txt`, as fetched.
#[derive(Debug, Clone)]
pub enum Robots {
    /// No usable file (a 4xx answer): everything may be fetched.
    AllowAll,
    /// The file could not be read (5xx, network error): nothing may be
    /// fetched until it can (RFC 9309 §2.3.1.4).
    Unreachable(String),
    /// A file to obey.
    Rules { body: String, agent: String },
}

impl Robots {
    /// From the answer to `GET /robots.txt` (after redirects).
    pub fn from_answer(status: u16, body: &[u8], agent: &str) -> Robots {
        match status {
            200..=299 => {
                let body = &body[..body.len().min(MAX_BYTES)];
                Robots::Rules {
                    body: String::from_utf8_lossy(body).into_owned(),
                    agent: agent.to_string(),
                }
            }
            // Google reads a 429 as a server error, as do we.
            400..=428 | 430..=499 => Robots::AllowAll,
            s => Robots::Unreachable(format!("robots.txt answered HTTP {s}")),
        }
    }

    /// `Ok` when `url` may be fetched, else the reason: the rule that
    /// refuses it (`Disallow: /private/` on line 3, for `User-agent: *`).
    pub fn check(&self, url: &url::Url) -> std::result::Result<(), String> {
        let (body, agent) = match self {
            Robots::AllowAll => return Ok(()),
            Robots::Unreachable(why) => {
                return Err(format!(
                    "{why}; RFC 9309 treats an unreachable robots.txt as disallowing everything"
                ));
            }
            Robots::Rules { body, agent } => (body, agent),
        };
        let path = path_of(url);
        if path == "/robots.txt" {
            return Ok(());
        }
        let mut matcher = DefaultMatcher::default();
        if matcher.one_agent_allowed_by_robots(body, agent, url.as_str()) {
            return Ok(());
        }
        let mut lines = Lines::new(agent);
        robotstxt::parse_robotstxt(body, &mut lines);
        Err(lines.explain(&path))
    }

    /// The `Sitemap:` URLs the file lists (any group).
    pub fn sitemaps(&self) -> Vec<String> {
        match self {
            Robots::Rules { body, agent } => {
                let mut lines = Lines::new(agent);
                robotstxt::parse_robotstxt(body, &mut lines);
                lines.sitemaps
            }
            _ => Vec::new(),
        }
    }
}

/// Path and query, as robots rules see them.
fn path_of(url: &url::Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

/// Every rule line, with the group it belongs to.
struct Lines {
    agent: String,
    /// (line, allow, pattern, group's user-agent as written, group is ours)
    rules: Vec<(u32, bool, String, String, bool)>,
    sitemaps: Vec<String>,
    /// The current group's agents, and whether the last line was one.
    group: Vec<String>,
    in_agents: bool,
}

impl Lines {
    fn new(agent: &str) -> Self {
        Lines {
            agent: agent.to_ascii_lowercase(),
            rules: Vec::new(),
            sitemaps: Vec::new(),
            group: Vec::new(),
            in_agents: false,
        }
    }

    fn push(&mut self, line: u32, allow: bool, value: &str) {
        self.in_agents = false;
        let ours = self
            .group
            .iter()
            .any(|a| a.to_ascii_lowercase() == self.agent);
        let global = self.group.iter().any(|a| a == "*");
        if !(ours || global) {
            return;
        }
        let name = if ours { self.agent.clone() } else { "*".into() };
        self.rules
            .push((line, allow, value.to_string(), name, ours));
    }

    /// The disallow rule that decided against `path`: the longest match in
    /// our own group if the file has one, else in `*`'s.
    fn explain(&self, path: &str) -> String {
        let ours = self.rules.iter().any(|r| r.4);
        let best = (self.rules.iter())
            .filter(|r| r.4 == ours && !r.1 && LongestMatchRobotsMatchStrategy::matches(path, &r.2))
            .max_by_key(|r| r.2.len());
        match best {
            Some((line, _, pattern, agent, _)) => format!(
                "robots.txt disallows {path}: `Disallow: {pattern}` (line {line}, User-agent: {agent})"
            ),
            None => format!("robots.txt disallows {path}"),
        }
    }
}

impl RobotsParseHandler for Lines {
    fn handle_robots_start(&mut self) {}
    fn handle_robots_end(&mut self) {}
    fn handle_user_agent(&mut self, _line: u32, user_agent: &str) {
        if !self.in_agents {
            self.group.clear();
        }
        self.in_agents = true;
        // `Googlebot/2.1` matches as `Googlebot`.
        let token: String = (user_agent.chars())
            .take_while(|c| c.is_ascii_alphabetic() || *c == '-' || *c == '_' || *c == '*')
            .collect();
        self.group.push(token);
    }
    fn handle_allow(&mut self, line: u32, value: &str) {
        self.push(line, true, value);
    }
    fn handle_disallow(&mut self, line: u32, value: &str) {
        if !value.is_empty() {
            self.push(line, false, value);
        } else {
            self.in_agents = false;
        }
    }
    fn handle_sitemap(&mut self, _line: u32, value: &str) {
        self.sitemaps.push(value.to_string());
    }
    fn handle_unknown_action(&mut self, _line: u32, _action: &str, _value: &str) {
        self.in_agents = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TXT: &str = "# testbed\nUser-agent: *\nDisallow: /site/private/\nAllow: /site/private/open\n\nUser-agent: otherbot\nDisallow: /\n\nSitemap: https://127.0.0.1/sitemap.xml\n";

    fn url(path: &str) -> url::Url {
        url::Url::parse(&format!("https://127.0.0.1{path}")).unwrap()
    }

    #[test]
    fn the_refusal_names_the_rule_and_allow_wins_where_longer() {
        let r = Robots::from_answer(200, TXT.as_bytes(), "idpool");
        let e = r.check(&url("/site/private/x")).unwrap_err();
        assert_eq!(
            e,
            "robots.txt disallows /site/private/x: `Disallow: /site/private/` (line 3, User-agent: *)"
        );
        r.check(&url("/site/private/open")).unwrap();
        r.check(&url("/site/")).unwrap();
        r.check(&url("/robots.txt")).unwrap();
        let other = Robots::from_answer(200, TXT.as_bytes(), "otherbot");
        let e = other.check(&url("/site/")).unwrap_err();
        assert!(
            e.contains("`Disallow: /` (line 7, User-agent: otherbot)"),
            "{e}"
        );
        assert_eq!(r.sitemaps(), vec!["https://127.0.0.1/sitemap.xml"]);
    }

    #[test]
    fn missing_files_allow_and_broken_servers_refuse() {
        Robots::from_answer(404, b"", "idpool")
            .check(&url("/a"))
            .unwrap();
        let e = (Robots::from_answer(503, b"", "idpool").check(&url("/a"))).unwrap_err();
        assert!(e.contains("HTTP 503") && e.contains("RFC 9309"), "{e}");
    }
}
