//! Values as pages write them into structured data, made plain: text with
//! its HTML entities decoded (twice-encoded ones too) and its tags dropped,
//! machine numbers (`"285.00"`, `"1.299,00"`, `4.5`), ratings on their own
//! scale and on 0–5, dates as `YYYY-MM-DD`, availability by its short name.

use serde::Serialize;

use crate::strategy::locale::Locale;

/// The language a page says it is in (`<html lang>`), when it names one
/// we can read: how it writes what people see.
pub fn page_locale(html: &scraper::Html) -> Option<Locale> {
    let lang = html.root_element().value().attr("lang")?;
    Locale::parse(lang).ok()
}

/// Text as a person reads it: entities decoded, tags dropped (a `<br>` is
/// a line break), spaces collapsed, at most `max` bytes.
pub fn plain(raw: &str, max: usize) -> String {
    let mut s = raw.to_string();
    // Pages encode twice (`&amp;#038;`): decode until nothing changes, at
    // most twice.
    for _ in 0..2 {
        if !s.contains('&') && !s.contains('<') {
            break;
        }
        let marked = s
            .replace("<br>", "\n")
            .replace("<br/>", "\n")
            .replace("<br />", "\n")
            .replace("</p>", "\n");
        let decoded: String = crate::dom::fragment(&marked)
            .html
            .root_element()
            .text()
            .collect();
        if decoded == s {
            break;
        }
        s = decoded;
    }
    let mut out = String::new();
    for line in s.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line);
        if out.len() > max {
            break;
        }
    }
    out.truncate(crate::dom::floor_char(&out, max));
    out
}

/// A machine-written number: `4.5`, `"285.00"`, `"1,299.00"`, `"1.299,00"`,
/// `"12,99 €"`. With both separators the last is the decimal one; a lone
/// comma is decimal unless three digits follow it (`1,299`).
pub fn number(raw: &str) -> Option<f64> {
    let start = raw.find(|c: char| c.is_ascii_digit())?;
    // `.5` is a half: the separator before the first digit starts the number.
    let start = match raw[..start].strip_suffix(['.', ',']) {
        Some(before) if !before.ends_with(|c: char| c.is_alphanumeric()) => start - 1,
        _ => start,
    };
    let negative = raw[..start].trim_end().ends_with('-');
    let chunk = digits_run(&raw[start..]);
    let chunk = chunk.trim_end_matches(['.', ',']);
    let last_dot = chunk.rfind('.');
    let last_comma = chunk.rfind(',');
    let decimal = match (last_dot, last_comma) {
        (Some(d), Some(c)) => Some(d.max(c)),
        (None, Some(c)) => {
            let after = chunk.len() - c - 1;
            (chunk.matches(',').count() == 1 && after != 3).then_some(c)
        }
        (Some(d), None) => (chunk.matches('.').count() == 1).then_some(d),
        (None, None) => None,
    };
    let mut plain = String::with_capacity(chunk.len());
    for (i, c) in chunk.char_indices() {
        match c {
            '0'..='9' => plain.push(c),
            _ if Some(i) == decimal => plain.push('.'),
            _ => {}
        }
    }
    if plain.starts_with('.') {
        plain.insert(0, '0');
    }
    let v: f64 = plain.parse().ok()?;
    v.is_finite().then_some(if negative { -v } else { v })
}

/// A number as a page shows it to people (a visible price, a count):
/// where machine form is ambiguous (`1.299`, `1,299`: one separator before
/// exactly three digits), the page's language decides (`1.299 €` on a
/// German page is 1299); elsewhere as [`number`] reads it.
pub fn shown_number(raw: &str, locale: &Locale) -> Option<f64> {
    let start = raw.find(|c: char| c.is_ascii_digit())?;
    let chunk = digits_run(&raw[start..]);
    let chunk = chunk.trim_end_matches(['.', ',']);
    let seps: Vec<usize> = chunk.match_indices(['.', ',']).map(|(i, _)| i).collect();
    let ambiguous = matches!(seps[..], [i] if chunk.len() - i - 1 == 3);
    match ambiguous {
        true => locale.number(raw),
        false => number(raw),
    }
}

/// The run of digits and separators at the start of `text`; a space
/// between digit groups (`1 299,00`, with a no-break or thin space too)
/// groups them and is left out.
fn digits_run(text: &str) -> String {
    let chars: Vec<char> = text.chars().take(1024).collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '0'..='9' | '.' | ',' => out.push(c),
            ' ' | '\u{a0}' | '\u{202f}' | '\u{2009}' => {
                let group = chars
                    .get(i + 1..i + 4)
                    .is_some_and(|g| g.iter().all(char::is_ascii_digit))
                    && !chars.get(i + 4).is_some_and(char::is_ascii_digit)
                    && i > 0
                    && chars[i - 1].is_ascii_digit();
                if !group {
                    break;
                }
            }
            _ => break,
        }
    }
    out
}

/// A whole number written as machines or people write counts: `87`,
/// `"1,204"` and `"1.204"` (a separator before exactly three digits groups
/// them, as a strategy's `number = "integer"` reads), `"12.0"`; `"4.5"` is
/// no whole number.
pub fn whole(raw: &str) -> Option<i64> {
    let start = raw.find(|c: char| c.is_ascii_digit())?;
    let chunk = digits_run(&raw[start..]);
    let chunk = chunk.trim_end_matches(['.', ',']);
    let groups: Vec<&str> = chunk.split(['.', ',']).collect();
    let grouped =
        groups.len() > 1 && groups[0].len() <= 3 && groups[1..].iter().all(|g| g.len() == 3);
    if grouped {
        return count(chunk).and_then(|n| i64::try_from(n).ok());
    }
    let n = number(raw)?;
    (n.fract() == 0.0 && n.abs() < 9.0e15).then_some(n as i64)
}

/// A whole count (`"1,204"`, `"1.204"`, `87`).
pub fn count(raw: &str) -> Option<u64> {
    let digits: String = raw
        .trim()
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | ' ' | '\u{a0}'))
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A rating on its own scale, and on 0–5.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rating {
    pub value: f64,
    pub best: f64,
    pub worst: f64,
    /// `value` on a 0–5 scale (`value / best × 5`), to two decimals.
    pub stars: f64,
    /// The page named the scale (`bestRating`), rather than it being guessed.
    #[serde(skip)]
    pub said: bool,
}

impl Rating {
    /// `value` on the scale `best`..`worst` (schema.org's defaults 5 and 1;
    /// a value over 5 with no scale named is read on 10, or 100).
    pub fn new(value: f64, best: Option<f64>, worst: Option<f64>) -> Option<Rating> {
        if !value.is_finite() || value < 0.0 {
            return None;
        }
        let said_best = best.is_some_and(|b| b > 0.0);
        let best = best.filter(|b| *b > 0.0).unwrap_or(if value <= 5.0 {
            5.0
        } else if value <= 10.0 {
            10.0
        } else {
            100.0
        });
        if value > best {
            return None;
        }
        let worst = worst.filter(|w| *w < best).unwrap_or(1.0_f64.min(value));
        let stars = (value / best * 5.0 * 100.0).round() / 100.0;
        Some(Rating {
            value,
            best,
            worst,
            stars,
            said: said_best,
        })
    }
}

/// A date as `YYYY-MM-DD`: ISO 8601 (with or without a time), else written
/// out in any language `locale` reads (`March 12, 2024`, `12. März 2024`).
pub fn date(raw: &str, locale: &Locale) -> Option<String> {
    let t = raw.trim();
    let b = t.as_bytes();
    let iso = b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit);
    if iso {
        let n = |r: std::ops::Range<usize>| t[r].parse::<u32>().unwrap_or(0);
        return real_day(n(0..4), n(5..7), n(8..10)).then(|| t[..10].to_string());
    }
    locale.date(t).or_else(|| all_digits(t))
}

/// An all-digit day, month and year (`1/19/15`, `19.01.2015`) that only one
/// order can read: a part over 12 is the day. A two-digit year is 20xx
/// (shops' templates write `1/19/15` into `datetime`).
fn all_digits(t: &str) -> Option<String> {
    let parts: Vec<&str> = t.split(['/', '.', '-']).collect();
    let [a, b, y] = parts.as_slice() else {
        return None;
    };
    let num = |s: &str, n: std::ops::RangeInclusive<usize>| {
        (n.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    let (a, b) = (num(a, 1..=2)?, num(b, 1..=2)?);
    let year = match y.len() {
        2 => 2000 + num(y, 2..=2)?,
        _ => num(y, 4..=4)?,
    };
    let (month, day) = match (a, b) {
        (1..=12, 13..=31) => (a, b),
        (13..=31, 1..=12) => (b, a),
        // Both orders read the same day.
        (1..=12, _) if a == b => (a, b),
        _ => return None,
    };
    real_day(year, month, day).then(|| format!("{year:04}-{month:02}-{day:02}"))
}

/// Whether the calendar has this day (no 30 February).
fn real_day(year: u32, month: u32, day: u32) -> bool {
    let leap = (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
    let last = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=last).contains(&day)
}

/// An availability by its short name (`https://schema.org/InStock`,
/// `instock`, `In stock` → `InStock`).
pub fn availability(raw: &str) -> Option<String> {
    let short = super::item::short_name(raw);
    let key: String = short
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    const KNOWN: &[&str] = &[
        "InStock",
        "OutOfStock",
        "PreOrder",
        "PreSale",
        "BackOrder",
        "Discontinued",
        "InStoreOnly",
        "LimitedAvailability",
        "OnlineOnly",
        "SoldOut",
        "Reserved",
        "MadeToOrder",
    ];
    let known = KNOWN.iter().find(|k| k.to_ascii_lowercase() == key);
    match known {
        Some(k) => Some((*k).to_string()),
        None if !short.is_empty() && short.len() <= 40 => Some(short),
        None => None,
    }
}

/// `raw` as an absolute URL against the page's, if it is one.
pub fn url(raw: &str, base: Option<&url::Url>) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    let joined = match base {
        Some(b) => b.join(raw).ok(),
        None => url::Url::parse(raw).ok(),
    }?;
    matches!(joined.scheme(), "http" | "https").then(|| joined.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_shops_write_them() {
        assert_eq!(number("285.00"), Some(285.0));
        assert_eq!(number("1,299.00"), Some(1299.0));
        assert_eq!(number("1.299,00"), Some(1299.0));
        assert_eq!(number("12,99 €"), Some(12.99));
        assert_eq!(number("1,299"), Some(1299.0));
        assert_eq!(number("4.5"), Some(4.5));
        assert_eq!(
            number("4.500000000000000000000000000000000000000000000001"),
            Some(4.5)
        );
        assert_eq!(number("US$ 19"), Some(19.0));
        assert_eq!(number("1 299,00 \u{20ac}"), Some(1299.0));
        assert_eq!(number("12\u{a0}990 K\u{10d}"), Some(12990.0));
        assert_eq!(number("4 stars of 5"), Some(4.0));
        assert_eq!(number("none"), None);
        assert_eq!(count("1,204 ratings"), Some(1204));
        assert_eq!(count("87"), Some(87));
        assert_eq!(whole("1.204"), Some(1204));
        assert_eq!(whole("1,204,000"), Some(1_204_000));
        assert_eq!(whole("12.0"), Some(12));
        assert_eq!(whole("4.5"), None);
        assert_eq!(number(".5"), Some(0.5));
        assert_eq!(number("rated .5"), Some(0.5));
        assert_eq!(number("-.5"), Some(-0.5));
        assert_eq!(number("No.5"), Some(5.0));
        assert_eq!(number("Nr.5"), Some(5.0));
        // A visible number where machine form is ambiguous: the page's language.
        let de = Locale::parse("de-DE").expect("de");
        let en = Locale::default();
        assert_eq!(shown_number("1.299 €", &de), Some(1299.0));
        assert_eq!(shown_number("1.299", &en), Some(1.299));
        assert_eq!(shown_number("1,299", &de), Some(1.299));
        assert_eq!(shown_number("19,90 €", &en), Some(19.9));
        assert_eq!(shown_number("1.299,00 €", &en), Some(1299.0));
    }

    #[test]
    fn ratings_keep_their_scale_and_read_on_five() {
        let r = Rating::new(4.0, None, None).expect("rating");
        assert_eq!((r.best, r.stars), (5.0, 4.0));
        let r = Rating::new(80.0, Some(100.0), Some(0.0)).expect("rating");
        assert_eq!((r.value, r.best, r.worst, r.stars), (80.0, 100.0, 0.0, 4.0));
        let r = Rating::new(8.7, None, None).expect("rating");
        assert_eq!((r.best, r.stars), (10.0, 4.35));
        assert!(Rating::new(6.0, Some(5.0), None).is_none());
    }

    #[test]
    fn dates_entities_and_availability() {
        let en = Locale::default();
        assert_eq!(
            date("2021-03-04T10:00:00.000Z", &en).as_deref(),
            Some("2021-03-04")
        );
        assert_eq!(date("March 4, 2021", &en).as_deref(), Some("2021-03-04"));
        assert_eq!(date("2021-13-04", &en), None);
        assert_eq!(date("1/19/15", &en).as_deref(), Some("2015-01-19"));
        assert_eq!(date("12/12/2015", &en).as_deref(), Some("2015-12-12"));
        assert_eq!(date("2024-02-30", &en), None);
        assert_eq!(date("2024-02-29", &en).as_deref(), Some("2024-02-29"));
        assert_eq!(date("2023-02-29", &en), None);
        assert_eq!(
            plain("Tom &amp;#038; Jerry&apos;s<br/>second  line", 100),
            "Tom & Jerry's\nsecond line"
        );
        assert_eq!(
            availability("http://schema.org/InStock").as_deref(),
            Some("InStock")
        );
        assert_eq!(availability("instock").as_deref(), Some("InStock"));
        assert_eq!(
            availability("https://schema.org/PreSale").as_deref(),
            Some("PreSale")
        );
    }
}
