//! The first date in a text, as `YYYY-MM-DD`. Month names are read in
//! English, German, French, Italian, Spanish, Portuguese, Dutch, Swedish,
//! Polish, Turkish and Arabic (both the Gregorian and the Levantine names);
//! `2024年3月12日` (Japanese, Chinese) and `2024년 3월 12일` (Korean) by
//! their markers; an all-digit date (`12.03.2024`, `03/12/2024`) in the
//! locale's order.
//!
//! `March 12, 2024`, `12 March 2024`, `12. März 2024`, `12 de marzo de
//! 2024`, `12 mars 2024`, `12 maart 2024`, `12 مارس 2024` all give
//! `2024-03-12`.

use super::spec::{DateOrder, Locale};

/// Month names, lower case, each with its number. Abbreviations are
/// matched with or without their full stop.
const MONTHS: &[(&str, u32)] = &[
    // English
    ("january", 1),
    ("february", 2),
    ("march", 3),
    ("april", 4),
    ("may", 5),
    ("june", 6),
    ("july", 7),
    ("august", 8),
    ("september", 9),
    ("october", 10),
    ("november", 11),
    ("december", 12),
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("sept", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
    // German
    ("januar", 1),
    ("jänner", 1),
    ("jän", 1),
    ("februar", 2),
    ("märz", 3),
    ("mär", 3),
    ("mai", 5),
    ("juni", 6),
    ("juli", 7),
    ("oktober", 10),
    ("okt", 10),
    ("dezember", 12),
    ("dez", 12),
    // French
    ("janvier", 1),
    ("janv", 1),
    ("février", 2),
    ("févr", 2),
    ("fév", 2),
    ("mars", 3),
    ("avril", 4),
    ("avr", 4),
    ("juin", 6),
    ("juillet", 7),
    ("juil", 7),
    ("août", 8),
    ("septembre", 9),
    ("octobre", 10),
    ("novembre", 11),
    ("décembre", 12),
    ("déc", 12),
    // Italian
    ("gennaio", 1),
    ("febbraio", 2),
    ("marzo", 3),
    ("aprile", 4),
    ("maggio", 5),
    ("giugno", 6),
    ("luglio", 7),
    ("agosto", 8),
    ("settembre", 9),
    ("ottobre", 10),
    ("dicembre", 12),
    // Spanish
    ("enero", 1),
    ("febrero", 2),
    ("abril", 4),
    ("mayo", 5),
    ("junio", 6),
    ("julio", 7),
    ("septiembre", 9),
    ("setiembre", 9),
    ("octubre", 10),
    ("noviembre", 11),
    ("diciembre", 12),
    // Portuguese
    ("janeiro", 1),
    ("fevereiro", 2),
    ("março", 3),
    ("maio", 5),
    ("junho", 6),
    ("julho", 7),
    ("setembro", 9),
    ("outubro", 10),
    ("dezembro", 12),
    // Dutch
    ("januari", 1),
    ("februari", 2),
    ("maart", 3),
    ("mei", 5),
    ("augustus", 8),
    // Swedish
    ("maj", 5),
    ("augusti", 8),
    // Polish (the genitive a date uses)
    ("stycznia", 1),
    ("lutego", 2),
    ("marca", 3),
    ("kwietnia", 4),
    ("maja", 5),
    ("czerwca", 6),
    ("lipca", 7),
    ("sierpnia", 8),
    ("września", 9),
    ("października", 10),
    ("listopada", 11),
    ("grudnia", 12),
    // Turkish
    ("ocak", 1),
    ("şubat", 2),
    ("mart", 3),
    ("nisan", 4),
    ("mayıs", 5),
    ("haziran", 6),
    ("temmuz", 7),
    ("ağustos", 8),
    ("eylül", 9),
    ("ekim", 10),
    ("kasım", 11),
    ("aralık", 12),
    // Arabic
    ("يناير", 1),
    ("فبراير", 2),
    ("مارس", 3),
    ("أبريل", 4),
    ("ابريل", 4),
    ("إبريل", 4),
    ("مايو", 5),
    ("يونيو", 6),
    ("يوليو", 7),
    ("أغسطس", 8),
    ("اغسطس", 8),
    ("سبتمبر", 9),
    ("أكتوبر", 10),
    ("اكتوبر", 10),
    ("نوفمبر", 11),
    ("ديسمبر", 12),
    ("شباط", 2),
    ("آذار", 3),
    ("نيسان", 4),
    ("أيار", 5),
    ("حزيران", 6),
    ("تموز", 7),
    ("آب", 8),
    ("أيلول", 9),
];

/// The Levantine months of two words.
const TWO_WORD_MONTHS: &[(&str, &str, u32)] = &[
    ("كانون", "الثاني", 1),
    ("تشرين", "الأول", 10),
    ("تشرين", "الثاني", 11),
    ("كانون", "الأول", 12),
];

/// Words that may stand between a date's parts ("12 de marzo de 2024").
const FILLERS: &[&str] = &[
    "de", "del", "di", "of", "den", "le", "il", "el", "em", "er", "st", "nd", "rd", "th",
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A number and how many digits it has.
    Num(u32, usize),
    Word(String),
    Sep(char),
}

fn digit(c: char) -> Option<u32> {
    match c {
        '0'..='9' => c.to_digit(10),
        '\u{660}'..='\u{669}' => Some(c as u32 - 0x660),
        '\u{6f0}'..='\u{6f9}' => Some(c as u32 - 0x6f0),
        '\u{ff10}'..='\u{ff19}' => Some(c as u32 - 0xff10),
        _ => None,
    }
}

/// Ideographs and kana stand alone: Japanese has no spaces between words.
fn cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30ff | 0x3400..=0x9fff | 0xac00..=0xd7af | 0x1100..=0x11ff)
}

fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(d) = digit(c) {
            let (mut v, mut n) = (d, 1usize);
            while let Some(d) = chars.peek().and_then(|c| digit(*c)) {
                v = v.saturating_mul(10).saturating_add(d);
                n += 1;
                chars.next();
            }
            out.push(Tok::Num(v, n));
        } else if cjk(c) {
            out.push(Tok::Word(c.to_string()));
        } else if c.is_alphabetic() {
            let mut w: String = c.to_lowercase().collect();
            while let Some(&n) = chars.peek() {
                if !n.is_alphabetic() || cjk(n) {
                    break;
                }
                w.extend(n.to_lowercase());
                chars.next();
            }
            out.push(Tok::Word(w));
        } else if matches!(c, '.' | ',' | '/' | '-' | '،') {
            out.push(Tok::Sep(c));
        }
        if out.len() > 4096 {
            break;
        }
    }
    out
}

fn month(w: &str) -> Option<u32> {
    MONTHS.iter().find(|(n, _)| *n == w).map(|(_, m)| *m)
}

fn days_in(y: u32, m: u32) -> u32 {
    match m {
        2 if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn ymd(y: u32, m: u32, d: u32) -> Option<String> {
    ((1900..=2200).contains(&y) && (1..=12).contains(&m) && d >= 1 && d <= days_in(y, m))
        .then(|| format!("{y:04}-{m:02}-{d:02}"))
}

/// A month name at `i` (one or two words): its number and the next index.
fn month_at(t: &[Tok], i: usize) -> Option<(u32, usize)> {
    let Tok::Word(w) = t.get(i)? else {
        return None;
    };
    if let Some(Tok::Word(w2)) = t.get(i + 1)
        && let Some((_, _, m)) = TWO_WORD_MONTHS.iter().find(|(a, b, _)| a == w && b == w2)
    {
        return Some((*m, i + 2));
    }
    month(w).map(|m| (m, i + 1))
}

/// Skip what may stand between a date's parts: fillers, a full stop, a comma.
fn skip(t: &[Tok], mut i: usize) -> usize {
    while let Some(tok) = t.get(i) {
        match tok {
            Tok::Sep('.' | ',' | '،') => i += 1,
            Tok::Word(w) if FILLERS.contains(&w.as_str()) => i += 1,
            _ => break,
        }
    }
    i
}

fn year_at(t: &[Tok], i: usize) -> Option<u32> {
    match t.get(i) {
        Some(Tok::Num(y, 4)) => Some(*y),
        _ => None,
    }
}

fn at(l: &Locale, t: &[Tok], i: usize) -> Option<String> {
    match t.get(i)? {
        // 2024年3月12日, 2024년 3월 12일
        Tok::Num(y, 4) if matches!(t.get(i + 1), Some(Tok::Word(w)) if w == "年" || w == "년") => {
            let (Some(Tok::Num(m, _)), Some(Tok::Word(mw)), Some(Tok::Num(d, _))) =
                (t.get(i + 2), t.get(i + 3), t.get(i + 4))
            else {
                return None;
            };
            (mw == "月" || mw == "월")
                .then(|| ymd(*y, *m, *d))
                .flatten()
        }
        // 12 March 2024, 12. März 2024, 12 de marzo de 2024
        Tok::Num(d, 1..=2) if month_at(t, skip(t, i + 1)).is_some() => {
            let (m, next) = month_at(t, skip(t, i + 1))?;
            ymd(year_at(t, skip(t, next))?, m, *d)
        }
        // 12.03.2024, 03/12/2024, 2024-03-12
        Tok::Num(a, na) => {
            let (
                Some(Tok::Sep(s1)),
                Some(Tok::Num(b, _)),
                Some(Tok::Sep(s2)),
                Some(Tok::Num(c, nc)),
            ) = (t.get(i + 1), t.get(i + 2), t.get(i + 3), t.get(i + 4))
            else {
                return None;
            };
            if s1 != s2 || !matches!(s1, '.' | '/' | '-') {
                return None;
            }
            match (*na, *nc, l.date_order) {
                (4, _, _) => ymd(*a, *b, *c),
                (_, 4, DateOrder::MonthDayYear) => ymd(*c, *a, *b),
                (_, 4, _) => ymd(*c, *b, *a),
                _ => None,
            }
        }
        // March 12, 2024
        Tok::Word(_) => {
            let (m, next) = month_at(t, i)?;
            let next = skip(t, next);
            let Some(Tok::Num(d, 1..=2)) = t.get(next) else {
                return None;
            };
            ymd(year_at(t, skip(t, next + 1))?, m, *d)
        }
        Tok::Sep(_) => None,
    }
}

pub(super) fn first(l: &Locale, text: &str) -> Option<String> {
    let t = tokens(text);
    (0..t.len()).find_map(|i| at(l, &t, i))
}

#[cfg(test)]
mod tests {
    use super::super::Locale;

    fn d(tag: &str, text: &str) -> Option<String> {
        Locale::parse(tag).unwrap().date(text)
    }

    #[test]
    fn dates_in_many_languages() {
        let want = Some("2024-03-12".to_string());
        for (tag, text) in [
            ("en-US", "Reviewed in the United States on March 12, 2024"),
            ("en-GB", "Reviewed in the United Kingdom on 12 March 2024"),
            ("en-US", "Mar. 12, 2024"),
            ("de-DE", "Rezension aus Deutschland vom 12. März 2024"),
            ("fr-FR", "Commenté en France le 12 mars 2024"),
            ("en-GB", "on the 12th of March 2024"),
            ("it-IT", "Recensito in Italia il 12 marzo 2024"),
            ("es-ES", "Revisado en España el 12 de marzo de 2024"),
            ("pt-BR", "Avaliado no Brasil em 12 de março de 2024"),
            ("nl-NL", "Beoordeeld in Nederland op 12 maart 2024"),
            ("sv-SE", "Recenserad i Sverige den 12 mars 2024"),
            ("pl-PL", "Zrecenzowano w Polsce 12 marca 2024"),
            ("tr-TR", "Türkiye'de 12 Mart 2024 tarihinde değerlendirildi"),
            ("ja-JP", "2024年3月12日に日本でレビュー済み"),
            ("ko-KR", "2024년 3월 12일"),
            (
                "ar-SA",
                "تمت المراجعة في المملكة العربية السعودية في 12 مارس 2024",
            ),
            ("ar-AE", "١٢ آذار ٢٠٢٤"),
            ("de-DE", "am 12.03.2024"),
            ("en-US", "on 03/12/2024"),
            ("en-GB", "on 12/03/2024"),
            ("en-US", "2024-03-12T10:00:00Z"),
        ] {
            assert_eq!(d(tag, text), want, "{tag}: {text}");
        }
        assert_eq!(
            d("ar-SA", "في 1 كانون الثاني 2025"),
            Some("2025-01-01".into())
        );
        assert_eq!(d("fr-FR", "le 1er février 2024"), Some("2024-02-01".into()));
        assert_eq!(d("en-US", "February 30, 2024"), None);
        assert_eq!(d("en-US", "February 29, 2024"), Some("2024-02-29".into()));
        assert_eq!(d("en-US", "12 people found this helpful"), None);
        assert_eq!(d("en-US", "May 2024"), None);
    }
}
