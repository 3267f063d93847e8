//! The first number in a text, with a locale's separators: `4,4` is 4.4 in
//! German and `92.284` is 92284; `1,23,456` is Indian grouping; `84.7K`,
//! `1,2 Tsd.` and `3万` are scaled. Arabic-Indic and full-width digits count
//! as digits.

use super::spec::Locale;

/// A digit of any script we read, as its value.
fn digit(c: char) -> Option<u32> {
    match c {
        '0'..='9' => c.to_digit(10),
        '\u{660}'..='\u{669}' => Some(c as u32 - 0x660),
        '\u{6f0}'..='\u{6f9}' => Some(c as u32 - 0x6f0),
        '\u{ff10}'..='\u{ff19}' => Some(c as u32 - 0xff10),
        _ => None,
    }
}

/// Words after a number that scale it, as (word, factor, may follow a space).
const SCALES: &[(&str, f64, bool)] = &[
    ("K", 1e3, false),
    ("k", 1e3, false),
    ("M", 1e6, false),
    ("B", 1e9, false),
    ("Tsd.", 1e3, true),
    ("Mio.", 1e6, true),
    ("mil", 1e3, true),
    ("k", 1e3, true),
    ("万", 1e4, true),
    ("千", 1e3, true),
    ("ألف", 1e3, true),
];

/// `integer`: the number is known to be a whole one (a count, a rank), so a
/// `.` or `,` followed by exactly three digits groups thousands in any
/// locale (a German page that writes "Nr. 117,767" means 117767).
pub(super) fn first(l: &Locale, text: &str, integer: bool) -> Option<f64> {
    // Full-width punctuation reads as its ASCII form (Japanese prices).
    let chars: Vec<char> = text
        .chars()
        .map(|c| match c {
            '\u{ff0c}' => ',',
            '\u{ff0e}' => '.',
            c => c,
        })
        .collect();
    let start = chars.iter().position(|c| digit(*c).is_some())?;
    let negative = start > 0
        && matches!(chars[start - 1], '-' | '\u{2212}')
        && (start < 2 || !chars[start - 2].is_alphanumeric());
    let mut i = start;
    let mut whole = String::new();
    let run = |i: &mut usize, out: &mut String| {
        while let Some(d) = chars.get(*i).and_then(|c| digit(*c)) {
            out.push(char::from_digit(d, 10).unwrap_or('0'));
            *i += 1;
        }
    };
    run(&mut i, &mut whole);
    // Grouping: a separator followed by exactly three digits (two, in
    // India's grouping, before the last group), then no further digit.
    while let Some(&c) = chars.get(i) {
        let is_group = l.group.contains(&c) || c == '\u{66c}';
        let whole_group = integer && matches!(c, '.' | ',');
        // The locale's decimal groups only in a whole number.
        let groups = if c == l.decimal {
            whole_group
        } else {
            is_group || whole_group
        };
        if !groups {
            break;
        }
        let n = chars[i + 1..]
            .iter()
            .take_while(|c| digit(**c).is_some())
            .count();
        let ok = n == 3 || (l.indian_grouping && n == 2 && c != l.decimal);
        if !ok {
            break;
        }
        i += 1;
        run(&mut i, &mut whole);
    }
    if let Some(&c) = chars.get(i)
        && (c == l.decimal || c == '\u{66b}')
        && chars.get(i + 1).and_then(|c| digit(*c)).is_some()
    {
        i += 1;
        whole.push('.');
        run(&mut i, &mut whole);
    }
    let mut value: f64 = whole.parse().ok()?;
    let factor = scale(&chars[i..]);
    if factor != 1.0 {
        // "84.7K" counts something whole.
        value = (value * factor).round();
    }
    Some(if negative { -value } else { value })
}

/// The factor of a scale word right after a number (1 without one).
fn scale(rest: &[char]) -> f64 {
    let text: String = rest.iter().take(8).collect();
    for (word, factor, spaced) in SCALES {
        let after = if let Some(r) = text.strip_prefix(word) {
            Some(r)
        } else if *spaced {
            text.strip_prefix([' ', '\u{a0}', '\u{202f}'])
                .and_then(|t| t.strip_prefix(word))
        } else {
            None
        };
        // A Latin scale word ends there: "1K+" or "3 mil", not "5 Mbps"
        // ("1万点" needs no space: Japanese has none).
        let latin = word.chars().all(|c| c.is_ascii_alphabetic() || c == '.');
        if let Some(r) = after
            && !(latin && r.chars().next().is_some_and(char::is_alphabetic))
        {
            return *factor;
        }
    }
    1.0
}

#[cfg(test)]
mod tests {
    use super::super::Locale;

    fn n(tag: &str, text: &str) -> Option<f64> {
        Locale::parse(tag).unwrap().number(text)
    }

    #[test]
    fn separators_follow_the_locale() {
        assert_eq!(n("de-DE", "4,4 von 5 Sternen"), Some(4.4));
        assert_eq!(n("de-DE", "92.284 Sternebewertungen"), Some(92284.0));
        assert_eq!(n("de-DE", "1.234,56 €"), Some(1234.56));
        assert_eq!(n("en-US", "4.4 out of 5 stars"), Some(4.4));
        assert_eq!(n("en-US", "92,284 ratings"), Some(92284.0));
        assert_eq!(n("en-US", "$1,234.56"), Some(1234.56));
        // A comma is not a decimal in English: 4, then stop.
        assert_eq!(n("en-US", "4,4"), Some(4.0));
        assert_eq!(n("fr-FR", "1\u{202f}234,5 évaluations"), Some(1234.5));
        assert_eq!(n("fr-FR", "4,5 sur 5 étoiles"), Some(4.5));
        assert_eq!(n("en-IN", "₹1,23,456.00"), Some(123456.0));
        assert_eq!(n("es-MX", "4.5 de 5 estrellas"), Some(4.5));
        assert_eq!(n("pt-BR", "R$ 1.299,90"), Some(1299.9));
        assert_eq!(n("ja-JP", "￥３，９８０"), Some(3980.0));
        assert_eq!(n("ar-SA", "٤٫٥ من ٥ نجوم"), Some(4.5));
        assert_eq!(n("en-US", "Nr. 12 in"), Some(12.0));
        assert_eq!(n("en-US", "no digits"), None);
        assert_eq!(n("en-US", "-3 degrees"), Some(-3.0));
        assert_eq!(n("en-US", "B0-3"), Some(0.0));
    }

    #[test]
    fn whole_numbers_group_in_any_locale() {
        let w = |tag: &str, text: &str| Locale::parse(tag).unwrap().whole_number(text);
        assert_eq!(w("de-DE", "Nr. 117,767 in Drogerie"), Some(117767.0));
        assert_eq!(w("de-DE", "92.284 Sternebewertungen"), Some(92284.0));
        assert_eq!(w("en-US", "#1.234 in Books"), Some(1234.0));
        assert_eq!(w("es-ES", "(7,3 mil)"), Some(7300.0));
        assert_eq!(w("en-IN", "1,02,900"), Some(102900.0));
        // Not three digits: the locale's decimal still reads as one.
        assert_eq!(w("de-DE", "4,5"), Some(4.5));
        assert_eq!(n("de-DE", "117,767"), Some(117.767));
    }

    #[test]
    fn scale_words_multiply() {
        assert_eq!(n("en-US", "84.7K ratings"), Some(84700.0));
        assert_eq!(n("en-US", "1K+ bought in past month"), Some(1000.0));
        assert_eq!(n("en-US", "2M"), Some(2e6));
        assert_eq!(n("en-US", "5 Mbps"), Some(5.0));
        assert_eq!(n("en-US", "5Mbps"), Some(5.0));
        assert_eq!(n("de-DE", "1,2 Tsd."), Some(1200.0));
        assert_eq!(n("es-MX", "3 mil comprados"), Some(3000.0));
        assert_eq!(n("ja-JP", "1万点以上"), Some(10000.0));
    }
}
