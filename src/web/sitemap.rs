//! Sitemaps (sitemaps.org): a `<urlset>` lists pages, a `<sitemapindex>`
//! lists more sitemaps; either may come gzipped. Bounded: at most
//! [`MAX_UNZIPPED`] bytes are read out of a gzip (a sitemap is at most
//! 50 MB by the protocol), at most [`MAX_LOCS`] locations per file.

use std::io::Read;

use quick_xml::events::Event;

/// Largest sitemap read, unzipped.
pub const MAX_UNZIPPED: u64 = 50 * 1024 * 1024;
/// Most `<loc>`s taken from one file (the protocol's own limit).
pub const MAX_LOCS: usize = 50_000;

/// What one sitemap file lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sitemap {
    /// Pages (`<urlset><url><loc>`).
    pub pages: Vec<String>,
    /// More sitemaps (`<sitemapindex><sitemap><loc>`).
    pub sitemaps: Vec<String>,
}

/// Parse a sitemap body, gunzipping it first when it is gzip (by its magic
/// bytes, whatever the URL or `Content-Type` say).
pub fn parse(body: &[u8]) -> Result<Sitemap, String> {
    let xml = if body.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body)
            .take(MAX_UNZIPPED)
            .read_to_end(&mut out)
            .map_err(|e| format!("not a valid gzip file ({e})"))?;
        out
    } else {
        body.to_vec()
    };
    let mut reader = quick_xml::Reader::from_reader(xml.as_slice());
    let mut out = Sitemap::default();
    // The element a `<loc>` sits in: `url` or `sitemap`.
    let mut parent: Option<Vec<u8>> = None;
    let mut in_loc = false;
    let mut text = String::new();
    let mut buf = Vec::new();
    let mut saw_root = false;
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("not valid XML at byte {} ({e})", reader.buffer_position()))?;
        match event {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_ascii_lowercase();
                match name.as_slice() {
                    b"urlset" | b"sitemapindex" => saw_root = true,
                    b"url" | b"sitemap" => parent = Some(name),
                    b"loc" => {
                        in_loc = true;
                        text.clear();
                    }
                    _ => {}
                }
            }
            Event::Text(t) if in_loc => {
                let t = t.decode().map_err(|e| format!("bad text in <loc> ({e})"))?;
                text.push_str(
                    &quick_xml::escape::unescape(&t)
                        .map_err(|e| format!("bad entity in <loc> ({e})"))?,
                );
            }
            Event::CData(t) if in_loc => text.push_str(&String::from_utf8_lossy(&t)),
            Event::GeneralRef(r) if in_loc => {
                // `&amp;` and the like arrive on their own in quick-xml 0.38.
                let name = String::from_utf8_lossy(&r).into_owned();
                let entity = format!("&{name};");
                text.push_str(
                    &quick_xml::escape::unescape(&entity)
                        .map_err(|e| format!("bad entity in <loc> ({e})"))?,
                );
            }
            Event::End(e) => {
                let name = e.local_name().as_ref().to_ascii_lowercase();
                if name == b"loc" {
                    in_loc = false;
                    let loc = text.trim().to_string();
                    let list = match parent.as_deref() {
                        Some(b"sitemap") => &mut out.sitemaps,
                        _ => &mut out.pages,
                    };
                    if !loc.is_empty() && list.len() < MAX_LOCS {
                        list.push(loc);
                    }
                } else if name == b"url" || name == b"sitemap" {
                    parent = None;
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !saw_root {
        return Err("neither a <urlset> nor a <sitemapindex>".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn urlsets_indexes_gzip_entities_and_junk() {
        let set = "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
            <url><loc> https://127.0.0.1/a?x=1&amp;y=2 </loc><lastmod>2026-01-01</lastmod></url>\
            <url><loc><![CDATA[https://127.0.0.1/b]]></loc></url></urlset>";
        let s = parse(set.as_bytes()).unwrap();
        assert_eq!(
            s.pages,
            ["https://127.0.0.1/a?x=1&y=2", "https://127.0.0.1/b"]
        );
        assert!(s.sitemaps.is_empty());
        let index = "<sitemapindex><sitemap><loc>https://127.0.0.1/s1.xml.gz</loc></sitemap></sitemapindex>";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(index.as_bytes()).unwrap();
        let s = parse(&gz.finish().unwrap()).unwrap();
        assert_eq!(s.sitemaps, ["https://127.0.0.1/s1.xml.gz"]);
        assert!(
            parse(b"<html><body>not found</body></html>")
                .unwrap_err()
                .contains("urlset")
        );
        assert!(parse(&[0x1f, 0x8b, 1, 2, 3]).unwrap_err().contains("gzip"));
    }
}
