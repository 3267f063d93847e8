//! The client side of an HTTP/2 connection, from its raw (decrypted) bytes:
//! the first SETTINGS, the connection WINDOW_UPDATE, PRIORITY frames, and every
//! request's header list (HPACK-decoded in order, one decoder per connection)
//! with its HEADERS priority.

use std::fmt;

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const SETTINGS: u8 = 4;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;
const ACK: u8 = 0x1;

/// A stream priority: weight 1–256, exclusive bit, parent stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub weight: u16,
    pub exclusive: bool,
    pub depends_on: u32,
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.weight,
            u8::from(self.exclusive),
            self.depends_on
        )
    }
}

/// One request's HEADERS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub stream: u32,
    pub headers: Vec<(String, String)>,
    pub priority: Option<Priority>,
}

impl Request {
    pub fn pseudo(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the client sent on one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// The first SETTINGS frame, in order.
    pub settings: Vec<(u16, u32)>,
    /// The connection-level WINDOW_UPDATE sent before the first request.
    pub window_update: Option<u32>,
    /// PRIORITY frames sent before the first request: (stream, priority).
    pub priority_frames: Vec<(u32, Priority)>,
    pub requests: Vec<Request>,
}

impl Connection {
    /// The Akamai fingerprint: `SETTINGS|WINDOW_UPDATE|PRIORITY|pseudo order`,
    /// e.g. `1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p`.
    pub fn akamai(&self) -> String {
        let settings: Vec<String> = self
            .settings
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        let wu = self
            .window_update
            .map_or_else(|| "00".to_string(), |w| w.to_string());
        let prio = if self.priority_frames.is_empty() {
            "0".to_string()
        } else {
            self.priority_frames
                .iter()
                .map(|(s, p)| {
                    format!(
                        "{s}:{}:{}:{}",
                        u8::from(p.exclusive),
                        p.depends_on,
                        p.weight
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let pseudo: Vec<&str> = self
            .requests
            .first()
            .map(|r| {
                r.headers
                    .iter()
                    .filter_map(|(k, _)| match k.as_str() {
                        ":method" => Some("m"),
                        ":authority" => Some("a"),
                        ":scheme" => Some("s"),
                        ":path" => Some("p"),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!("{}|{wu}|{prio}|{}", settings.join(";"), pseudo.join(","))
    }
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

fn priority_at(b: &[u8]) -> Option<Priority> {
    let dep = u32_at(b, 0)?;
    Some(Priority {
        weight: u16::from(*b.get(4)?) + 1,
        exclusive: dep & 0x8000_0000 != 0,
        depends_on: dep & 0x7fff_ffff,
    })
}

/// Parse the client's frames after the preface; stops at a truncated frame or
/// a header block that does not decode.
pub fn parse(bytes: &[u8]) -> Connection {
    let mut p = Parser::default();
    p.feed(bytes);
    p.conn
}

/// [`parse`], resumable: fed the connection's bytes as they grow, it reads
/// only what is new (a long-lived connection is not decoded again from its
/// first frame for each request).
pub struct Parser {
    decoder: loona_hpack::Decoder<'static>,
    /// A header block split over HEADERS + CONTINUATION frames.
    pending: Option<(u32, Option<Priority>, Vec<u8>)>,
    /// How far the bytes were read (whole frames only).
    offset: usize,
    /// Not HTTP/2, or a frame that cannot be read: nothing more is read.
    stopped: bool,
    pub conn: Connection,
}

impl Default for Parser {
    fn default() -> Self {
        Parser {
            decoder: loona_hpack::Decoder::new(),
            pending: None,
            offset: 0,
            stopped: false,
            conn: Connection::default(),
        }
    }
}

impl Parser {
    /// Read what `bytes` (the connection's bytes so far, from its first)
    /// holds beyond what was read before.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.stopped {
            return;
        }
        if self.offset == 0 {
            if bytes.len() < PREFACE.len() {
                self.stopped = !PREFACE.starts_with(bytes);
                return;
            }
            if !bytes.starts_with(PREFACE) {
                self.stopped = true;
                return;
            }
            self.offset = PREFACE.len();
        }
        let Some(mut rest) = bytes.get(self.offset..) else {
            return;
        };
        let c = &mut self.conn;
        while rest.len() >= 9 {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            let (kind, flags) = (rest[3], rest[4]);
            let Some(stream) = u32_at(rest, 5).map(|s| s & 0x7fff_ffff) else {
                break;
            };
            let Some(payload) = rest.get(9..9 + len) else {
                // Not all here yet.
                break;
            };
            rest = &rest[9 + len..];
            self.offset += 9 + len;
            match kind {
                SETTINGS if flags & ACK == 0 && c.settings.is_empty() => {
                    c.settings = payload
                        .chunks_exact(6)
                        .map(|e| {
                            (
                                u16::from_be_bytes([e[0], e[1]]),
                                u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
                            )
                        })
                        .collect();
                }
                WINDOW_UPDATE
                    if stream == 0 && c.requests.is_empty() && c.window_update.is_none() =>
                {
                    c.window_update = u32_at(payload, 0).map(|w| w & 0x7fff_ffff);
                }
                PRIORITY if c.requests.is_empty() && self.pending.is_none() => {
                    if let Some(p) = priority_at(payload) {
                        c.priority_frames.push((stream, p));
                    }
                }
                HEADERS => {
                    let mut body = payload;
                    let mut pad = 0usize;
                    if flags & PADDED != 0 {
                        let Some((&p, b)) = body.split_first() else {
                            self.stopped = true;
                            return;
                        };
                        pad = usize::from(p);
                        body = b;
                    }
                    let mut prio = None;
                    if flags & PRIORITY_FLAG != 0 {
                        prio = priority_at(body);
                        body = body.get(5..).unwrap_or_default();
                    }
                    let Some(block) = body.get(..body.len().saturating_sub(pad)) else {
                        self.stopped = true;
                        return;
                    };
                    self.pending = Some((stream, prio, block.to_vec()));
                    if flags & END_HEADERS == 0 {
                        continue;
                    }
                }
                CONTINUATION => {
                    if let Some((_, _, block)) = self.pending.as_mut() {
                        block.extend_from_slice(payload);
                    }
                    if flags & END_HEADERS == 0 {
                        continue;
                    }
                }
                DATA => {}
                _ => {}
            }
            if matches!(kind, HEADERS | CONTINUATION)
                && let Some((stream, priority, block)) = self.pending.take()
            {
                let Ok(list) = self.decoder.decode(&block) else {
                    self.stopped = true;
                    return;
                };
                c.requests.push(Request {
                    stream,
                    headers: list
                        .into_iter()
                        .map(|(k, v)| {
                            (
                                String::from_utf8_lossy(&k).into_owned(),
                                String::from_utf8_lossy(&v).into_owned(),
                            )
                        })
                        .collect(),
                    priority,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_chrome_like_preface_gives_its_akamai_string_and_headers() {
        let mut b = PREFACE.to_vec();
        let settings: Vec<u8> = [(1u16, 65536u32), (2, 0), (4, 6_291_456), (6, 262_144)]
            .iter()
            .flat_map(|(k, v)| [k.to_be_bytes().to_vec(), v.to_be_bytes().to_vec()].concat())
            .collect();
        b.extend(frame(SETTINGS, 0, 0, &settings));
        b.extend(frame(WINDOW_UPDATE, 0, 0, &15_663_105u32.to_be_bytes()));
        let mut enc = loona_hpack::Encoder::new();
        let block = enc.encode(vec![
            (&b":method"[..], &b"GET"[..]),
            (&b":authority"[..], &b"127.0.0.1"[..]),
            (&b":scheme"[..], &b"https"[..]),
            (&b":path"[..], &b"/x"[..]),
            (&b"user-agent"[..], &b"UA"[..]),
        ]);
        // Priority: exclusive, depends on 0, weight 256; split into a CONTINUATION.
        let mut payload = vec![0x80, 0, 0, 0, 255];
        payload.extend_from_slice(&block[..3]);
        b.extend(frame(HEADERS, PRIORITY_FLAG | 0x1, 1, &payload));
        b.extend(frame(CONTINUATION, END_HEADERS, 1, &block[3..]));
        let c = parse(&b);
        assert_eq!(
            c.akamai(),
            "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"
        );
        assert_eq!(c.requests.len(), 1);
        assert_eq!(c.requests[0].pseudo(":path"), Some("/x"));
        assert_eq!(c.requests[0].headers[4], ("user-agent".into(), "UA".into()));
        assert_eq!(
            c.requests[0].priority.map(|p| p.to_string()).as_deref(),
            Some("256:1:0")
        );
        // A truncated frame stops the parse without a panic.
        assert_eq!(parse(&b[..b.len() - 2]).requests.len(), 0);
    }

    #[test]
    fn a_parser_fed_as_the_bytes_grow_reads_what_one_parse_reads() {
        // Three requests on one connection, the encoder's dynamic table in
        // use (the later blocks refer back to the first).
        let mut b = PREFACE.to_vec();
        b.extend(frame(SETTINGS, 0, 0, &[0, 1, 0, 1, 0, 0]));
        let mut enc = loona_hpack::Encoder::new();
        for (k, path) in ["/a", "/b?q=1", "/c"].iter().enumerate() {
            let block = enc.encode(vec![
                (&b":method"[..], &b"GET"[..]),
                (&b":path"[..], path.as_bytes()),
                (&b"cookie"[..], &b"sid=0123456789"[..]),
            ]);
            let stream = 1 + 2 * k as u32;
            b.extend(frame(HEADERS, 0, stream, &block[..2]));
            b.extend(frame(CONTINUATION, END_HEADERS, stream, &block[2..]));
            b.extend(frame(DATA, 0, stream, b"body"));
        }
        let whole = parse(&b);
        assert_eq!(whole.requests.len(), 3);
        // Fed in every cut, mid-preface, mid-frame and mid-block included.
        for step in [1usize, 5, 9, 13, 64] {
            let mut p = Parser::default();
            let mut end = 0;
            while end < b.len() {
                end = (end + step).min(b.len());
                p.feed(&b[..end]);
            }
            assert_eq!(p.conn, whole, "step {step}");
        }
        // Not HTTP/2: nothing is read, now or later.
        let mut p = Parser::default();
        p.feed(b"GET / HTTP/1.1\r\n");
        p.feed(&b);
        assert!(p.conn.requests.is_empty());
    }
}
